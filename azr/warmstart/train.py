"""Supervised fine-tuning on the warm-start examples: next-token cross-entropy on the completion tokens
and, by default, on each prompt's own tokens.

Plain PyTorch, one process: the examples are tokenised once (prompt through the policy's chat template
by ``PromptRenderer``, completion followed by the end-of-sequence token the samplers stop on), batches
are drawn from a seeded shuffle, and the loss is the mean over the labelled tokens of the batch (the
preamble every prompt shares and the padding are never labelled). AdamW with a short linear warm-up and a
linear decay to a tenth of the peak rate, gradient norm clipped.

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
from azr.warmstart.config import WarmStartConfig
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
    prompt_loss: bool
    lr: float
    warmup_steps: int
    seed: int

    @classmethod
    def of(cls, config: WarmStartConfig) -> SFTSchedule:
        """The schedule ``config`` describes."""
        return cls(
            steps=config.steps,
            batch_size=config.batch_size,
            prompt_gradient=config.prompt_gradient,
            prompt_loss=config.prompt_loss,
            lr=config.lr,
            warmup_steps=config.warmup_steps,
            seed=config.seed,
        )


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
    """A batch split where the gradient may start: a shared context, then each row's own part.

    The context is the longest prefix every prompt of the batch shares (the system preamble and the
    role's fixed wording), identical in every row and so unpadded, width S. The tail is the rest of each
    prompt (at least its last token, whose logits predict the first completion token) and the completion,
    right-padded to width T.
    """

    context: torch.Tensor  # (B, S)
    tail: torch.Tensor  # (B, T)
    tail_mask: torch.Tensor  # (B, T)
    labels: torch.Tensor  # (B, T), IGNORE where no token is predicted


def shared_prefix(prompts: Sequence[Sequence[int]]) -> int:
    """Length of the longest prefix common to every prompt, short of the shortest prompt's last token."""
    limit = min(len(p) for p in prompts) - 1
    width = 0
    while width < limit and all(p[width] == prompts[0][width] for p in prompts):
        width += 1
    return width


def collate(rows: Sequence[Tokenised], pad_id: int, *, prompt_loss: bool = False) -> Batch:
    """The rows as a ``Batch`` (a shared context, right-padded tails); with ``prompt_loss`` each prompt's
    own tokens (after the shared context) are labelled too, not only the completion."""
    width = shared_prefix([r.prompt for r in rows])
    context = torch.tensor([r.prompt[:width] for r in rows], dtype=torch.long).reshape(len(rows), width)
    t_width = max(len(r.prompt) - width + len(r.completion) for r in rows)
    shape = (len(rows), t_width)
    tail, tail_mask = torch.full(shape, pad_id, dtype=torch.long), torch.zeros(shape, dtype=torch.long)
    labels = torch.full(shape, IGNORE, dtype=torch.long)
    for b, row in enumerate(rows):
        own = (*row.prompt[width:], *row.completion)
        tail[b, : len(own)] = torch.tensor(own)
        tail_mask[b, : len(own)] = 1
        first = len(row.prompt) - width - 1  # the last prompt token predicts the first completion token
        labels[b, first : first + len(row.completion)] = torch.tensor(row.completion)
        if prompt_loss:
            labels[b, :first] = torch.tensor(own[1 : first + 1])
    return Batch(context, tail, tail_mask, labels)


def completion_loss(model: PreTrainedModel, batch: Batch, *, prompt_gradient: bool) -> torch.Tensor:
    """Mean cross-entropy of the labelled tokens (the completion, and the prompt's own tokens when the
    batch labels them) given what precedes them.

    With ``prompt_gradient`` false the shared context is read under ``no_grad`` into the KV cache (a
    stop-gradient at its keys and values) and only each row's own tokens are back-propagated. Nothing an
    answer copies lies in the shared part, so the task-specific prompt tokens keep their gradient: a model
    learns to copy from a prompt only if the prompt positions' keys and values are trained to be found.
    """
    rows, width = batch.context.shape
    mask = torch.cat([torch.ones_like(batch.context), batch.tail_mask], dim=1)  # (B, S + T)
    tail_positions = width + torch.arange(batch.tail.shape[1]).expand(rows, -1)  # (B, T)
    cache = None
    if width:
        with torch.set_grad_enabled(prompt_gradient):
            cache = model(input_ids=batch.context, use_cache=True).cache
    logits = model(
        input_ids=batch.tail,
        attention_mask=mask,
        position_ids=tail_positions,
        cache=cache,
        use_cache=cache is not None,
    ).logits  # (B, T, V)
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
        drawn, order = [rows[i] for i in order[: schedule.batch_size]], order[schedule.batch_size :]
        for group in optimizer.param_groups:
            group["lr"] = schedule.lr * lr_factor(step, schedule)
        batch = collate(drawn, pad_id, prompt_loss=schedule.prompt_loss)
        loss = completion_loss(model, batch, prompt_gradient=schedule.prompt_gradient)
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
