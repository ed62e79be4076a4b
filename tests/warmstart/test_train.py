"""Supervised training: the completion loss is the plain next-token loss, and a few steps lower it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from azr.warmstart.train import IGNORE, SFTSchedule, Tokenised, collate, completion_loss, train

ROWS = [
    Tokenised(tuple(range(5, 40)), (50, 51, 52, 2)),
    Tokenised(tuple(range(7, 20)), (60, 61, 2)),
    Tokenised(tuple(range(9, 12)), (70, 2)),
]
SHARED = (3, 4, 5, 6)
"""A preamble every prompt of ``SHARED_ROWS`` starts with, as the roles' system text is."""
SHARED_ROWS = [
    Tokenised((*SHARED, 30, 31, 32), (50, 51, 2)),
    Tokenised((*SHARED, 40), (60, 61, 62, 2)),
    Tokenised((*SHARED, 30, 33), (70, 2)),
]


@pytest.fixture(scope="module")
def model(tiny_model_dir: Path):
    return AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32)


def _reference_loss(model, rows) -> float:
    """Each row as one unpadded sequence, summed token losses over the completion, divided by their count."""
    total, count = 0.0, 0
    for row in rows:
        ids = torch.tensor([row.prompt + row.completion])
        logits = model(input_ids=ids).logits[0, :-1]
        labels = ids[0, 1:].clone()
        labels[: len(row.prompt) - 1] = IGNORE
        total += float(
            torch.nn.functional.cross_entropy(logits, labels, ignore_index=IGNORE, reduction="sum")
        )
        count += len(row.completion)
    return total / count


@pytest.mark.parametrize("rows", [ROWS, SHARED_ROWS], ids=["distinct", "shared-preamble"])
@pytest.mark.parametrize("prompt_gradient", [True, False])
def test_completion_loss_matches_the_unpadded_next_token_loss(model, rows, prompt_gradient: bool) -> None:
    with torch.no_grad():
        loss = completion_loss(model, collate(rows, pad_id=0), prompt_gradient=prompt_gradient)
        assert float(loss) == pytest.approx(_reference_loss(model, rows), rel=1e-5)


def test_prompt_labels_cover_each_prompts_own_tokens_not_the_shared_preamble() -> None:
    completion_only = collate(SHARED_ROWS, pad_id=0).labels[0].tolist()
    with_prompt = collate(SHARED_ROWS, pad_id=0, prompt_loss=True).labels[0].tolist()
    assert completion_only == [IGNORE, IGNORE, 50, 51, 2, IGNORE]
    assert with_prompt == [
        31,
        32,
        50,
        51,
        2,
        IGNORE,
    ]  # 30 would be predicted by the preamble, which is context


def test_only_the_shared_preamble_is_read_without_gradient(model) -> None:
    """The stop-gradient covers the preamble every prompt shares, never a prompt's own tokens: an answer
    is copied from those, so their keys and values must be trained."""
    batch = collate(SHARED_ROWS, pad_id=0)
    assert batch.context.tolist() == [list(SHARED)] * 3
    embedded: list[torch.Tensor] = []

    def keep(_module, _inputs, output: torch.Tensor) -> None:
        if output.requires_grad:
            output.retain_grad()
        embedded.append(output)

    handle = model.get_input_embeddings().register_forward_hook(keep)
    try:
        completion_loss(model, batch, prompt_gradient=False).backward()
    finally:
        handle.remove()
        model.zero_grad(set_to_none=True)
    context, tail = embedded
    assert not context.requires_grad
    own_prompt = tail.grad[0, :2].abs().sum(dim=-1)  # tokens 30 and 31: row 0's own prompt, before its last
    assert bool((own_prompt > 0).all())


def test_a_few_steps_lower_the_loss(tiny_model_dir: Path) -> None:
    fresh = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32)
    schedule = SFTSchedule(
        steps=8, batch_size=3, prompt_gradient=False, prompt_loss=False, lr=3e-3, warmup_steps=1, seed=0
    )
    losses = train(fresh, ROWS, pad_id=0, schedule=schedule)
    assert len(losses) == 8
    assert losses[-1] < losses[0] / 2
