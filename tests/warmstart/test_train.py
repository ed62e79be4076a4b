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


@pytest.mark.parametrize("prompt_gradient", [True, False])
def test_completion_loss_matches_the_unpadded_next_token_loss(model, prompt_gradient: bool) -> None:
    with torch.no_grad():
        loss = completion_loss(model, collate(ROWS, pad_id=0), prompt_gradient=prompt_gradient)
        assert float(loss) == pytest.approx(_reference_loss(model, ROWS), rel=1e-5)


def test_a_few_steps_lower_the_loss(tiny_model_dir: Path) -> None:
    fresh = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32)
    schedule = SFTSchedule(steps=8, batch_size=3, prompt_gradient=False, lr=3e-3, warmup_steps=1, seed=0)
    losses = train(fresh, ROWS, pad_id=0, schedule=schedule)
    assert len(losses) == 8
    assert losses[-1] < losses[0] / 2
