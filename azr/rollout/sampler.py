"""What every rollout engine provides: n sampled completions per prompt, with processed log-probs.

A prompt is given as token ids (the caller renders it with the tokenizer's chat template), so an engine
never needs to know the roles' templates. ``Completion.logprobs`` holds, for each sampled token, its
log-probability under the distribution it was actually sampled from: the model's logits divided by the
temperature (and, with top-p below 1, renormalised over the nucleus). The trainer scores its own
log-probs at the same temperature, so the two are comparable token for token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

FinishReason = Literal["stop", "length"]


@dataclass(frozen=True, slots=True)
class Completion:
    """One sampled response to one prompt."""

    token_ids: tuple[int, ...]
    """The response tokens, the end-of-sequence token included when generation stopped on it."""
    logprobs: tuple[float, ...]
    """Processed log-prob of each response token at the sampling temperature."""
    text: str
    """The decoded response, special tokens removed."""
    finish_reason: FinishReason
    """"stop": ended on an end-of-sequence token; "length": cut at ``max_new_tokens``."""

    def __post_init__(self) -> None:
        if len(self.token_ids) != len(self.logprobs):
            raise ValueError(
                f"one log-prob per response token: {len(self.token_ids)} ids, {len(self.logprobs)} log-probs"
            )


class Sampler(Protocol):
    """A rollout engine holding one copy of the policy."""

    @property
    def policy_version(self) -> int:
        """Version of the weights the engine samples from (0: the initial model)."""
        ...

    @property
    def temperature(self) -> float:
        """The sampling temperature its log-probs are processed at."""
        ...

    def generate(self, prompts: Sequence[Sequence[int]], n: int = 1) -> list[list[Completion]]:
        """``n`` completions for each prompt (prompt token ids), in prompt order."""
        ...

    def load_weights(self, version: int, path: str) -> None:
        """Replace the weights with the safetensors snapshot at ``path``, published as ``version``."""
        ...
