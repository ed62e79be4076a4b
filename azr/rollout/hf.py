"""The Hugging Face engine: batched ``generate`` with a KV cache, prompts padded on the left.

Runs anywhere torch runs; on the CPU it is the engine of the ``tiny`` preset. Log-probs come from
``output_scores``, which holds the logits after generation's own processors (temperature, top-p), so
``log_softmax`` of them is exactly the distribution each token was drawn from: the processed log-probs
the trainer compares with its own.

Memory: ``generate`` keeps one (rows, vocabulary) score matrix per generated token; with a 150k-token
vocabulary and long completions that is the engine's limit, and vLLM's reason to exist.

Simplifications, on purpose: no continuous batching (prompts are cut into fixed chunks of
``max_batch_prompts``) and no prefix sharing between the n samples of one prompt beyond what
``num_return_sequences`` does. vLLM (``azr.rollout.vllm``) is the engine for throughput.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, PreTrainedModel

from azr.rollout.config import RolloutConfig
from azr.rollout.sampler import Completion
from azr.trainer.models import load_tokenizer, resolve_device
from azr.trainer.weights import load_into

log = logging.getLogger(__name__)


class HFSampler:
    """One copy of the policy in a Hugging Face model, sampling with ``generate``."""

    def __init__(self, model: str | Path, config: RolloutConfig) -> None:
        self.config = config
        self.device = resolve_device(config.device)
        dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        loaded = AutoModelForCausalLM.from_pretrained(str(model), dtype=dtype)
        if not isinstance(loaded, PreTrainedModel):
            raise TypeError(f"{model} did not load as a transformers model: {type(loaded).__name__}")
        self.model: PreTrainedModel = loaded
        self.model.to(self.device)  # type: ignore[arg-type]
        self.model.train(False)
        self.tokenizer = load_tokenizer(str(model), padding_side="left")
        self.pad_token_id = int(self.tokenizer.pad_token_id)
        eos = self.model.generation_config.eos_token_id or self.tokenizer.eos_token_id
        self.eos_token_ids = frozenset([eos] if isinstance(eos, int) else list(eos or []))
        if not self.eos_token_ids:
            raise ValueError(f"{model} names no end-of-sequence token: generation could never stop")
        self._version = 0
        self._generator = torch.Generator(device=self.device).manual_seed(config.seed)
        self._calls = 0

    @property
    def policy_version(self) -> int:
        return self._version

    @property
    def temperature(self) -> float:
        return self.config.temperature

    def load_weights(self, version: int, path: str) -> None:
        load_into(self.model, load_file(path, device=str(self.device)))
        self._version = version
        log.info("sampler loaded policy version %d", version)

    @torch.no_grad()
    def generate(self, prompts: Sequence[Sequence[int]], n: int = 1) -> list[list[Completion]]:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        out: list[list[Completion]] = []
        step = self.config.max_batch_prompts
        for start in range(0, len(prompts), step):
            out += self._generate_chunk(prompts[start : start + step], n)
        return out

    def _generate_chunk(self, prompts: Sequence[Sequence[int]], n: int) -> list[list[Completion]]:
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):  # left padding: every row's next token is in the last column
            input_ids[i, width - len(p) :] = torch.tensor(list(p), dtype=torch.long)
            attention_mask[i, width - len(p) :] = 1
        self._calls += 1
        # One seed per call from the sampler's own stream: reproducible runs, distinct samples per call.
        torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=self._generator)))
        result = self.model.generate(  # type: ignore[operator]
            input_ids=input_ids.to(self.device),
            attention_mask=attention_mask.to(self.device),
            do_sample=True,
            temperature=self.config.temperature,
            top_p=self.config.top_p,
            top_k=0,  # off: the paper samples from the whole distribution (top-p 1.0)
            max_new_tokens=self.config.max_new_tokens,
            num_return_sequences=n,
            pad_token_id=self.pad_token_id,
            eos_token_id=sorted(self.eos_token_ids),
            output_scores=True,
            return_dict_in_generate=True,
        )
        responses = result.sequences[:, width:]  # (B*n, T)
        logprobs = torch.empty(responses.shape, dtype=torch.float32)  # (B*n, T)
        for t, scores in enumerate(result.scores):  # scores: (B*n, V), the processed logits of step t
            step_logprobs = torch.log_softmax(scores.float(), dim=-1)  # one step at a time: no (B*n, T, V)
            logprobs[:, t] = step_logprobs.gather(-1, responses[:, t : t + 1]).squeeze(-1).cpu()
        rows = [self._completion(responses[r], logprobs[r]) for r in range(responses.shape[0])]
        return [rows[i * n : (i + 1) * n] for i in range(len(prompts))]

    def _completion(self, tokens: torch.Tensor, logprobs: torch.Tensor) -> Completion:
        ids = tokens.tolist()
        end = next((t + 1 for t, tok in enumerate(ids) if tok in self.eos_token_ids), None)
        kept = ids if end is None else ids[:end]
        return Completion(
            token_ids=tuple(kept),
            logprobs=tuple(logprobs[: len(kept)].tolist()),
            text=str(self.tokenizer.decode(kept, skip_special_tokens=True)),
            finish_reason="length" if end is None else "stop",
        )
