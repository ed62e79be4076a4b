"""Supervised fine-tuning on the warm-start examples: next-token cross-entropy on the completion tokens.

Plain PyTorch, one process: the examples are tokenised once (prompt through the policy's chat template
by ``PromptRenderer``, completion followed by the end-of-sequence token the samplers stop on), batches
are drawn from a seeded shuffle, and the loss is the mean over completion tokens of the batch (prompt and
padding positions are masked out). AdamW with a short linear warm-up and a linear decay to a tenth of the
peak rate, gradient norm clipped.

Deliberate simplifications: no packing (each example is one row, right-padded), no evaluation during
training (``azr eval`` does that on its own suites), and a fixed number of optimizer steps rather than
epochs, so that the CPU cost is known in advance.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from azr.selfplay.rendering import PromptRenderer
from azr.warmstart.examples import Example

log = logging.getLogger(__name__)
IGNORE = -100
"""Label of positions without a loss (prompt and padding), as ``torch.nn.functional.cross_entropy`` skips."""


@dataclass(frozen=True, slots=True)
class Tokenised:
    """One example as token ids: the prompt, then the completion (end-of-sequence token included)."""

    prompt: tuple[int, ...]
    completion: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class SFTSchedule:
    steps: int
    batch_size: int
    prompt_gradient: bool
    lr: float
    warmup_steps: int
    seed: int


def tokenise(
    examples: Sequence[Example], tokenizer: PreTrainedTokenizerBase, render: PromptRenderer, max_tokens: int
) -> list[Tokenised]:
    """Token ids of each example; examples longer than ``max_tokens`` are dropped."""
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ValueError("the tokenizer names no end-of-sequence token: the model could never learn to stop")
    out = []
    for example in examples:
        prompt = tuple(render(example.prompt))
        completion = (*tokenizer(example.completion, add_special_tokens=False)["input_ids"], int(eos))
        if len(prompt) + len(completion) <= max_tokens:
            out.append(Tokenised(prompt, tuple(int(i) for i in completion)))
    return out


@dataclass(frozen=True, slots=True)
class Batch:
    """A batch split where the gradient starts: a context read without gradient, then the trained part.

    The context is every prompt but its last token, left-padded to a common width P, so that the trained
    part (the last prompt token, whose logits predict the first completion token, and the completion)
    starts at the same column in every row; the trained part is right-padded to width C.
    """

    context: torch.Tensor  # (B, P)
    context_mask: torch.Tensor  # (B, P)
    tail: torch.Tensor  # (B, C)
    tail_mask: torch.Tensor  # (B, C)
    labels: torch.Tensor  # (B, C), IGNORE outside the completion

    def position_ids(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Positions of the context (B, P) and of the tail (B, C), counting real tokens only."""
        mask = torch.cat([self.context_mask, self.tail_mask], dim=1)  # (B, P + C)
        positions = (mask.cumsum(dim=1) - 1).clamp(min=0)  # (B, P + C)
        width = self.context.shape[1]
        return positions[:, :width], positions[:, width:]


def collate(rows: Sequence[Tokenised], pad_id: int) -> Batch:
    """The rows as a ``Batch`` (left-padded contexts, right-padded tails)."""
    p_width = max(len(r.prompt) - 1 for r in rows)
    c_width = max(len(r.completion) + 1 for r in rows)
    shape = (len(rows), p_width)
    context, context_mask = torch.full(shape, pad_id, dtype=torch.long), torch.zeros(shape, dtype=torch.long)
    shape = (len(rows), c_width)
    tail, tail_mask = torch.full(shape, pad_id, dtype=torch.long), torch.zeros(shape, dtype=torch.long)
    labels = torch.full(shape, IGNORE, dtype=torch.long)
    for b, row in enumerate(rows):
        head, trained = row.prompt[:-1], (row.prompt[-1], *row.completion)
        context[b, p_width - len(head) :] = torch.tensor(head, dtype=torch.long)
        context_mask[b, p_width - len(head) :] = 1
        tail[b, : len(trained)] = torch.tensor(trained)
        tail_mask[b, : len(trained)] = 1
        labels[b, : len(row.completion)] = torch.tensor(row.completion)  # position t predicts token t + 1
    return Batch(context, context_mask, tail, tail_mask, labels)


def completion_loss(model: PreTrainedModel, batch: Batch, *, prompt_gradient: bool) -> torch.Tensor:
    """Mean cross-entropy of the completion tokens given their prompts.

    With ``prompt_gradient`` false the prompt is read under ``no_grad`` into the KV cache and only the
    completion is back-propagated: the gradient does not reach the prompt positions' keys and values
    (a stop-gradient), which makes a step about three times cheaper on the CPU, where prompts are ten
    times longer than completions. The completions restate what they copy from the prompt (the
    ``<think>`` section), so the copying features are still trained on completion positions.
    """
    context_positions, tail_positions = batch.position_ids()
    mask = torch.cat([batch.context_mask, batch.tail_mask], dim=1)  # (B, P + C)
    with torch.set_grad_enabled(prompt_gradient):
        cached = model(
            input_ids=batch.context,
            attention_mask=batch.context_mask,
            position_ids=context_positions,
            use_cache=True,
        )
    logits = model(
        input_ids=batch.tail,
        attention_mask=mask,
        position_ids=tail_positions,
        cache=cached.cache,
        use_cache=True,
    ).logits  # (B, C, V)
    return torch.nn.functional.cross_entropy(
        logits.float().flatten(0, 1), batch.labels.flatten(), ignore_index=IGNORE
    )


def lr_factor(step: int, schedule: SFTSchedule) -> float:
    """Linear warm-up to 1, then linear decay to 0.1 at the last step."""
    if step < schedule.warmup_steps:
        return (step + 1) / schedule.warmup_steps
    span = max(1, schedule.steps - schedule.warmup_steps)
    return 1.0 - 0.9 * (step - schedule.warmup_steps) / span


def train(
    model: PreTrainedModel,
    rows: Sequence[Tokenised],
    pad_id: int,
    schedule: SFTSchedule,
    *,
    max_seconds: float | None = None,
) -> list[float]:
    """Train ``model`` in place for ``schedule.steps`` optimizer steps, or until ``max_seconds`` of wall
    time have passed (a benchmark's fixed budget); returns the loss of each step."""
    if not rows:
        raise ValueError("no example fits the token budget: nothing to train on")
    generator = torch.Generator().manual_seed(schedule.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=schedule.lr, weight_decay=0.0)
    model.train()
    order: list[int] = []
    losses: list[float] = []
    started = time.perf_counter()
    for step in range(schedule.steps):
        if max_seconds is not None and time.perf_counter() - started > max_seconds:
            break
        while len(order) < schedule.batch_size:  # a fresh seeded permutation each pass over the data
            order += torch.randperm(len(rows), generator=generator).tolist()
        batch, order = [rows[i] for i in order[: schedule.batch_size]], order[schedule.batch_size :]
        for group in optimizer.param_groups:
            group["lr"] = schedule.lr * lr_factor(step, schedule)
        loss = completion_loss(model, collate(batch, pad_id), prompt_gradient=schedule.prompt_gradient)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(float(loss.detach()))
        if not math.isfinite(losses[-1]):
            raise FloatingPointError(f"the warm-start loss is {losses[-1]} at step {step}: lower the lr")
        if step % 10 == 0 or step == schedule.steps - 1:
            log.info(
                "warm start step %d/%d loss %.4f (%.0f s)",
                step + 1,
                schedule.steps,
                losses[-1],
                time.perf_counter() - started,
            )
    model.train(False)
    return losses
