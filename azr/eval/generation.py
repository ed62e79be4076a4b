"""Completions of a checkpoint for evaluation: greedy at temperature 0, sampled (seeded) above it.

The rollout engines always sample, since training needs the sampling distribution's log-probs; an
evaluation wants the model's single best answer too, so this small wrapper around ``generate`` offers
both and returns only what scoring needs: the text, its length in tokens and whether it was cut off.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, PreTrainedModel, PreTrainedTokenizerBase

from azr.trainer.models import load_tokenizer


@dataclass(frozen=True, slots=True)
class Response:
    text: str
    tokens: int
    stopped_by_length: bool


class EvalModel:
    """A Hugging Face model and its tokenizer, answering prompts on whatever device the model is on.

    It leaves the model's train/eval mode to its owner: ``load`` sets eval mode for a checkpoint, and a
    model still being trained is switched by the caller around each evaluation.
    """

    def __init__(
        self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, *, batch_prompts: int = 16
    ) -> None:
        self.model = model
        self.device = model.device
        self.tokenizer = tokenizer
        self.batch_prompts = batch_prompts
        eos = model.generation_config.eos_token_id or tokenizer.eos_token_id
        self.eos_ids = sorted([eos] if isinstance(eos, int) else list(eos or []))
        if not self.eos_ids:
            raise ValueError(f"{model.name_or_path} names no end-of-sequence token")

    @classmethod
    def load(cls, directory: Path | str, *, device: str = "cpu", batch_prompts: int = 16) -> EvalModel:
        """A checkpoint (a Hugging Face model directory) loaded for generation on the CPU or a GPU."""
        loaded = AutoModelForCausalLM.from_pretrained(str(directory), dtype=torch.float32)
        if not isinstance(loaded, PreTrainedModel):
            raise TypeError(f"{directory} did not load as a transformers model")
        model = loaded.to(torch.device(device))  # type: ignore[arg-type]
        model.eval()
        tokenizer = load_tokenizer(str(directory), padding_side="left")
        return cls(model, tokenizer, batch_prompts=batch_prompts)

    @torch.no_grad()
    def generate(
        self, prompts: Sequence[Sequence[int]], *, n: int, temperature: float, max_new_tokens: int, seed: int
    ) -> list[list[Response]]:
        """``n`` responses per prompt (token ids), in prompt order."""
        if temperature == 0 and n != 1:
            raise ValueError("greedy decoding (temperature 0) gives one response per prompt: use n=1")
        torch.manual_seed(seed)
        out: list[list[Response]] = []
        for start in range(0, len(prompts), self.batch_prompts):
            out += self._chunk(prompts[start : start + self.batch_prompts], n, temperature, max_new_tokens)
        return out

    def _chunk(
        self, prompts: Sequence[Sequence[int]], n: int, temperature: float, max_new_tokens: int
    ) -> list[list[Response]]:
        pad = int(self.tokenizer.pad_token_id)
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), pad, dtype=torch.long)  # (B, T) left-padded
        mask = torch.zeros((len(prompts), width), dtype=torch.long)  # (B, T)
        for i, p in enumerate(prompts):
            ids[i, width - len(p) :] = torch.tensor(list(p))
            mask[i, width - len(p) :] = 1
        sampling = {"temperature": temperature, "top_k": 0} if temperature > 0 else {}
        sequences = self.model.generate(  # type: ignore[operator]
            input_ids=ids.to(self.device),
            attention_mask=mask.to(self.device),
            do_sample=temperature > 0,
            max_new_tokens=max_new_tokens,
            num_return_sequences=n,
            pad_token_id=pad,
            eos_token_id=self.eos_ids,
            **sampling,
        )
        rows = [self._response(seq[width:].tolist()) for seq in sequences]  # B*n rows
        return [rows[i * n : (i + 1) * n] for i in range(len(prompts))]

    def _response(self, tokens: list[int]) -> Response:
        end = next((t + 1 for t, tok in enumerate(tokens) if tok in self.eos_ids), None)
        kept = tokens if end is None else tokens[:end]
        text = str(self.tokenizer.decode(kept, skip_special_tokens=True))
        return Response(text=text, tokens=len(kept), stopped_by_length=end is None)
