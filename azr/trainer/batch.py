"""From a list of experiences to padded tensors, and from a training batch to mini- and micro-batches.

Layout of one row (prompt P tokens, response R tokens, right padding to L):

    input_ids       p_0 ... p_{P-1} r_0 ... r_{R-1} pad ... pad      (N, L)
    attention_mask  1   ... 1       1   ... 1       0   ... 0        (N, L)
    response_mask   0   ... 0       1   ... 1       0   ... 0        (N, L)

Every per-token tensor is aligned with ``input_ids``, as ``azr.trainer.logprobs.sequence_logprobs``
returns its log-probs: column t holds the score of token t, so ``response_mask`` marks the columns whose
log-probs the loss uses and the behaviour log-probs sit in exactly those columns.

A row is either sampled (the policy wrote the response; the loss reinforces it by its advantage) or a
demonstration (the executor's gold answer; the loss imitates it). ``sampled_mask`` and
``demonstration_mask`` split ``response_mask`` between the two.

Why right padding: every row starts at column 0, so a sub-batch is trimmed to its longest row by keeping
the first columns, and every pad query still has real tokens before it to attend to (left padding gives
pad rows nothing to attend to, which some attention kernels turn into NaNs). Positions come from the
attention mask either way, so the scores equal the unpadded ones the sampler saw.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import numpy as np
import torch
from torch import Tensor

from azr.core.experience import Experience, ExperienceKind


@dataclass(frozen=True)
class TrainingBatch:
    """N experiences as right-padded tensors; per-token tensors are (N, L) aligned with ``input_ids``."""

    input_ids: Tensor  # (N, L) int64
    attention_mask: Tensor  # (N, L) int64
    response_mask: Tensor  # (N, L) float32, 1 on response tokens
    behaviour_logprobs: Tensor  # (N, L) float32, the sampler's log-probs on response tokens, 0 elsewhere
    rewards: Tensor  # (N,) float32
    lengths: Tensor  # (N,) int64, prompt + response tokens
    demonstration: Tensor  # (N,) bool, True where the response is a demonstration to imitate
    groups: tuple[tuple[str, str], ...]
    """(role, task type) of each row: the groups TRR++ whitens within."""
    prompt_groups: tuple[str, ...]
    """A hash of each row's prompt tokens: rows with equal prompts share a GRPO/RLOO group."""
    old_logprobs: Tensor | None = None  # (N, L) the PPO ratio's denominator, set by the trainer
    ref_logprobs: Tensor | None = None  # (N, L) the reference policy's log-probs, when the KL is on
    advantages: Tensor | None = None  # (N, L) set by the trainer
    is_weights: Tensor | None = None  # (N, L) truncated importance weights, when enabled

    @property
    def num_rows(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def sampled_mask(self) -> Tensor:
        """(N, L) the response tokens of sampled rows: those the policy loss reinforces."""
        return self.response_mask * ~self.demonstration[:, None]

    @property
    def demonstration_mask(self) -> Tensor:
        """(N, L) the response tokens of demonstrations: those the imitation loss scores."""
        return self.response_mask * self.demonstration[:, None]

    @property
    def response_tokens(self) -> int:
        return int(self.response_mask.sum().item())

    @property
    def sampled_tokens(self) -> int:
        return int(self.sampled_mask.sum().item())

    @property
    def demonstration_tokens(self) -> int:
        return int(self.demonstration_mask.sum().item())

    def rows(self, *, demonstration: bool) -> list[int]:
        """The indices of the demonstrations, or of the sampled rows."""
        return (self.demonstration == demonstration).nonzero().flatten().tolist()

    def with_(
        self,
        *,
        old_logprobs: Tensor,
        ref_logprobs: Tensor | None,
        advantages: Tensor,
        is_weights: Tensor | None,
    ) -> TrainingBatch:
        """A copy with the trainer's per-token tensors set."""
        return replace(
            self,
            old_logprobs=old_logprobs,
            ref_logprobs=ref_logprobs,
            advantages=advantages,
            is_weights=is_weights,
        )

    def without_tokens(self) -> TrainingBatch:
        """A copy whose response mask is all zero: a micro-batch that adds nothing to the gradient.

        A rank with fewer micro-batches than another runs such fillers, so that every rank takes part in
        the same number of gradient reductions.
        """
        return replace(self, response_mask=torch.zeros_like(self.response_mask))

    def select(self, rows: Sequence[int]) -> TrainingBatch:
        """The sub-batch of ``rows``, trimmed to its longest row."""
        index = torch.as_tensor(list(rows), dtype=torch.long)
        width = int(self.lengths[index].max().item())
        values: dict[str, object] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Tensor):
                value = value[index]
                values[f.name] = value[:, :width] if value.dim() == 2 else value
            elif isinstance(value, tuple):
                values[f.name] = tuple(value[i] for i in index.tolist())
            else:
                values[f.name] = value
        return TrainingBatch(**values)  # type: ignore[arg-type]

    def to(self, device: torch.device) -> TrainingBatch:
        values = {
            f.name: getattr(self, f.name).to(device)
            for f in fields(self)
            if isinstance(getattr(self, f.name), Tensor)
        }
        return replace(self, **values)


def collate(experiences: Sequence[Experience], pad_token_id: int) -> TrainingBatch:
    """Right-pad prompt + response of each experience into one batch."""
    if not experiences:
        raise ValueError("cannot collate an empty list of experiences")
    lengths = [len(e.prompt_ids) + len(e.response_ids) for e in experiences]
    bad = [e.id for e in experiences if not math.isfinite(e.reward)]
    if bad:
        raise ValueError(
            f"non-finite rewards in experiences {bad[:5]}: a reward must be a finite number; the batch is "
            "refused and the policy version does not advance"
        )
    if any(len(e.prompt_ids) == 0 for e in experiences):
        raise ValueError(
            "every experience needs a non-empty prompt: the first response token is scored given it"
        )
    N, L = len(experiences), max(lengths)  # noqa: N806 (paper-style sizes)
    input_ids = np.full((N, L), pad_token_id, dtype=np.int64)
    attention_mask = np.zeros((N, L), dtype=np.int64)
    response_mask = np.zeros((N, L), dtype=np.float32)
    behaviour = np.zeros((N, L), dtype=np.float32)
    for i, e in enumerate(experiences):
        P, R = len(e.prompt_ids), len(e.response_ids)  # noqa: N806
        input_ids[i, :P] = e.prompt_ids
        input_ids[i, P : P + R] = e.response_ids
        attention_mask[i, : P + R] = 1
        response_mask[i, P : P + R] = 1.0
        behaviour[i, P : P + R] = e.behaviour_logprobs
    return TrainingBatch(
        input_ids=torch.from_numpy(input_ids),
        attention_mask=torch.from_numpy(attention_mask),
        response_mask=torch.from_numpy(response_mask),
        behaviour_logprobs=torch.from_numpy(behaviour),
        rewards=torch.tensor([e.reward for e in experiences], dtype=torch.float32),
        lengths=torch.tensor(lengths, dtype=torch.long),
        demonstration=torch.tensor([e.kind is ExperienceKind.DEMONSTRATION for e in experiences]),
        groups=tuple(e.group for e in experiences),
        prompt_groups=tuple(hashlib.sha1(e.prompt_ids.tobytes()).hexdigest() for e in experiences),
    )


def mini_batches(rows: Sequence[int], count: int, generator: torch.Generator | None) -> list[list[int]]:
    """``rows`` cut into ``count`` consecutive mini-batches of near-equal size (some empty if rows are few).

    With a generator the rows are permuted first, so that each mini-batch mixes all (role, type) groups
    rather than holding one or two of them. Every rank cuts its own rows into the same ``count``, so
    that all ranks take the same number of optimizer steps.
    """
    order = (
        torch.randperm(len(rows), generator=generator) if generator is not None else torch.arange(len(rows))
    )
    return [[rows[i] for i in chunk.tolist()] for chunk in torch.tensor_split(order, count)]


def shard(experiences: Sequence[Experience], rank: int, world_size: int) -> list[Experience]:
    """The experiences rank ``rank`` of ``world_size`` trains on: every ``world_size``-th, from ``rank``."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, {world_size}), got {rank}")
    return list(experiences[rank::world_size])


def micro_batches(
    rows: Sequence[int], lengths: Tensor, *, max_rows: int, max_tokens: int | None
) -> list[list[int]]:
    """Pack ``rows`` into micro-batches of at most ``max_rows`` rows and ``max_tokens`` padded tokens.

    Rows are taken longest first, so rows of similar length share a micro-batch and little padding is
    computed. A single row longer than ``max_tokens`` gets a micro-batch of its own: it cannot be split.
    """
    by_length = sorted(rows, key=lambda r: (-int(lengths[r]), r))
    out: list[list[int]] = []
    current: list[int] = []
    for r in by_length:
        width = int(lengths[current[0]]) if current else int(lengths[r])  # longest row of the micro-batch
        fits_tokens = max_tokens is None or (len(current) + 1) * width <= max_tokens
        if current and (len(current) >= max_rows or not fits_tokens):
            out.append(current)
            current = []
        current.append(r)
    out.append(current)
    return out
