"""Loading the policy model and its tokenizer through the Hugging Face Auto classes.

``name_or_path`` is a local model directory or a hub id; both go through ``from_pretrained``, so the tiny
model built by ``azr.trainer.tiny`` takes the same path as a real Qwen checkpoint.
"""

from __future__ import annotations

import logging
from typing import Literal

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from azr.trainer.config import DeviceName, DTypeName

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
    device: torch.device,
) -> PreTrainedModel:
    """The causal LM in train mode, parameters in ``dtype`` on ``device``, KV cache off."""
    model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=dtype, attn_implementation="sdpa")
    if not isinstance(model, PreTrainedModel):
        raise TypeError(f"{name_or_path} did not load as a transformers model: {type(model).__name__}")
    model.config.use_cache = False  # the cache is for generation; training scores whole sequences
    if gradient_checkpointing:
        enable_checkpointing(model)
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
    """Number of distinct parameters (tied weights counted once)."""
    return sum(p.numel() for p in model.parameters())
