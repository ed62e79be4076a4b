"""Loading the policy model and its tokenizer through the Hugging Face Auto classes.

``name_or_path`` is a local model directory or a hub id; both go through ``from_pretrained``, so the tiny
model built by ``azr.trainer.tiny`` takes the same path as a real Qwen checkpoint.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

import torch
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from azr.trainer.config import DeviceName, DTypeName
from azr.trainer.logprobs import install_float32_head

log = logging.getLogger(__name__)

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


def resolve_device(device: DeviceName) -> torch.device:
    """ "auto" is CUDA when available, else the CPU; asking for CUDA without one is an error."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device='cuda' but torch sees no CUDA device: use device='cpu' or 'auto'")
    return torch.device(device)


def resolve_dtype(dtype: DTypeName, device: torch.device) -> torch.dtype:
    """ "auto" is bfloat16 on CUDA and float32 on the CPU (CPU bfloat16 matmuls are slow and lossy)."""
    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return DTYPES[dtype]


def load_policy(
    name_or_path: str,
    *,
    dtype: torch.dtype,
    gradient_checkpointing: bool,
    device: torch.device | None,
    zero3_config: dict[str, Any] | None = None,
) -> PreTrainedModel:
    """The causal LM for RL training: parameters in ``dtype``, dropout off, float32 LM head, no KV cache.

    ``device`` None leaves the weights where they were built, for an engine that places (and shards)
    them itself. With ``zero3_config`` (a DeepSpeed ZeRO-3 config) the weights are partitioned over the
    ranks as they are created (``zero.Init``), so no rank ever holds the whole model.

    Dropout is forced off: it makes the log-probs of the same tokens differ between the forward that
    scores the old policy and the one that is trained, so the PPO ratio is not 1 on-policy, and the
    samplers generate without it.
    """
    config = AutoConfig.from_pretrained(name_or_path)
    for key, value in config.to_dict().items():
        if "dropout" in key and isinstance(value, float):
            setattr(config, key, 0.0)
    hf_ds_config = None
    if zero3_config is not None:
        from transformers.integrations.deepspeed import HfDeepSpeedConfig

        hf_ds_config = HfDeepSpeedConfig(zero3_config)  # type: ignore[no-untyped-call]  # read while alive
    model = AutoModelForCausalLM.from_pretrained(
        name_or_path, config=config, dtype=dtype, attn_implementation="sdpa"
    )
    del hf_ds_config
    if not isinstance(model, PreTrainedModel):
        raise TypeError(f"{name_or_path} did not load as a transformers model: {type(model).__name__}")
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    model.config.use_cache = False  # the cache is for generation; training scores whole sequences
    install_float32_head(model)
    if gradient_checkpointing:
        enable_checkpointing(model)
    if device is not None:
        model.to(device)  # type: ignore[arg-type]
    model.train()
    log.info(
        "loaded %s: %.1f M parameters, %s on %s", name_or_path, num_parameters(model) / 1e6, dtype, device
    )
    return model


def enable_checkpointing(model: PreTrainedModel) -> None:
    """Recompute each decoder layer's activations in the backward pass (non-reentrant, ZeRO-safe).

    transformers 5.x renamed ``gradient_checkpointing_enable`` to ``activation_checkpointing_enable``;
    the older name is used where the new one does not exist yet.
    """
    kwargs = {"use_reentrant": False}
    enable = getattr(model, "activation_checkpointing_enable", None)
    if enable is not None:
        enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)  # type: ignore[no-untyped-call]


def load_reference(name_or_path: str, *, dtype: torch.dtype, device: torch.device) -> PreTrainedModel:
    """A frozen copy of the initial policy for the KL term (only loaded when the KL is on)."""
    model = load_policy(name_or_path, dtype=dtype, gradient_checkpointing=False, device=device)
    model.train(False)
    model.requires_grad_(False)
    return model


def load_tokenizer(
    name_or_path: str, *, padding_side: Literal["left", "right"] = "right"
) -> PreTrainedTokenizerBase:
    """The model's tokenizer with a pad token and the requested padding side.

    Training pads on the right (see ``azr.trainer.batch``); batched generation pads prompts on the left
    so that every row's next token sits in the last column. A tokenizer without a pad token gets its EOS
    token as pad: padding is masked out everywhere, so the choice only needs to be a valid id.
    """
    tok = AutoTokenizer.from_pretrained(name_or_path)
    if tok.pad_token_id is None:
        if tok.eos_token is None:
            raise ValueError(f"tokenizer of {name_or_path} has neither a pad nor an EOS token; set one")
        tok.pad_token = tok.eos_token
    tok.padding_side = padding_side
    return tok


def num_parameters(model: torch.nn.Module) -> int:
    """Number of distinct parameters (tied weights counted once; ZeRO-3 partitions at their full size)."""
    return sum(int(getattr(p, "ds_numel", p.numel())) for p in model.parameters())


def record_dtype(model: PreTrainedModel) -> None:
    """Make the config that ``save_pretrained`` writes state the dtype the weights really have."""
    first = next((p for p in model.parameters() if p.is_floating_point()), None)
    if first is not None:
        model.config.dtype = first.dtype
