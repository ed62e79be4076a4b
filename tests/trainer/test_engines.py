"""Engines on the real tiny transformer: updates happen, agree across engines, and accumulate exactly."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

from azr.trainer.algorithms import AlgoConfig
from azr.trainer.config import TrainerConfig
from azr.trainer.losses import LossConfig
from azr.trainer.trainer import Trainer
from tests.trainer.conftest import on_policy, random_experiences

ENGINES: list[dict[str, Any]] = [
    {"engine": "torch"},
    {"engine": "deepspeed", "zero_stage": 1},
    {"engine": "deepspeed", "zero_stage": 2},
    {"engine": "deepspeed", "zero_stage": 3},
]


def one_step(
    cfg: TrainerConfig, demonstrations: int = 0
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], dict[str, float]]:
    trainer = Trainer(cfg)
    # The published weights: whole tensors under every ZeRO stage (stage 3 shards the module's own).
    before = trainer.engine.state_dict_for_publishing(torch.float32)
    metrics = trainer.train_step(random_experiences(demonstrations=demonstrations))
    return before, trainer.engine.state_dict_for_publishing(torch.float32), metrics


@pytest.mark.parametrize(
    "engine",
    [*ENGINES, {"engine": "torch", "gradient_checkpointing": True}],
    ids=lambda e: "-".join(str(v) for v in e.values()),
)
def test_one_step_changes_every_parameter(
    make_config: Callable[..., TrainerConfig], engine: dict[str, Any]
) -> None:
    # No weight decay: every change must come from a gradient.
    before, after, metrics = one_step(make_config(weight_decay=0.0, **engine))
    unchanged = [name for name in before if torch.equal(before[name], after[name])]
    assert not unchanged, f"parameters not updated: {unchanged}"
    assert metrics["optim/grad_norm"] > 0
    assert metrics["trainer/policy_version"] == 1.0


def test_torch_and_deepspeed_zero1_make_the_same_update(make_config: Callable[..., TrainerConfig]) -> None:
    # With a warm-up the first step's learning rate is a third of lr in both engines.
    before, torch_after, torch_metrics = one_step(make_config(engine="torch", lr_warmup_steps=3))
    _, ds_after, ds_metrics = one_step(make_config(engine="deepspeed", zero_stage=1, lr_warmup_steps=3))
    assert ds_metrics["optim/lr"] == torch_metrics["optim/lr"] == pytest.approx(1e-4 / 3)
    assert ds_metrics["losses/loss"] == pytest.approx(torch_metrics["losses/loss"], rel=1e-5, abs=1e-7)
    assert ds_metrics["optim/grad_norm"] == pytest.approx(torch_metrics["optim/grad_norm"], rel=1e-5)
    for name in before:
        torch_delta = torch_after[name] - before[name]
        ds_delta = ds_after[name] - before[name]
        torch.testing.assert_close(
            ds_delta, torch_delta, rtol=0, atol=0.05 * torch_metrics["optim/lr"], msg=name
        )


@pytest.mark.parametrize(
    "split",
    [{"micro_batch_size": 2}, {"micro_batch_size": 12, "micro_batch_max_tokens": 64}],
    ids=["rows", "token-budget"],
)
@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: "-".join(str(v) for v in e.values()))
def test_micro_batching_gives_the_same_update(
    make_config: Callable[..., TrainerConfig], engine: dict[str, Any], split: dict[str, Any]
) -> None:
    """With demonstrations in the batch, so that the imitation loss's token-mean is checked too."""
    before, whole, whole_metrics = one_step(
        make_config(**engine, mini_batch_size=15, micro_batch_size=15), demonstrations=3
    )
    _, split_after, split_metrics = one_step(
        make_config(**engine, mini_batch_size=15, **split), demonstrations=3
    )
    assert split_metrics["optim/micro_batches"] > 1
    assert whole_metrics["optim/micro_batches"] == 1
    assert split_metrics["losses/loss"] == pytest.approx(whole_metrics["losses/loss"], rel=1e-5, abs=1e-7)
    assert split_metrics["losses/imitation_nll"] == pytest.approx(
        whole_metrics["losses/imitation_nll"], rel=1e-5
    )
    assert split_metrics["optim/grad_norm"] == pytest.approx(whole_metrics["optim/grad_norm"], rel=1e-5)
    # Adam divides by |g|: on elements whose gradient is ~0 (the key biases, whose exact gradient is 0),
    # rounding differences in the summation order move the update by a fraction of lr; everywhere else
    # the updates agree to float precision.
    lr = whole_metrics["optim/lr"]
    differ = 0
    for name in before:
        torch.testing.assert_close(split_after[name], whole[name], rtol=0, atol=0.05 * lr, msg=name)
        differ += int(((split_after[name] - whole[name]).abs() > 1e-7).sum())
    assert differ < 1e-4 * sum(p.numel() for p in before.values())


@pytest.mark.parametrize("kl_in", ["loss", "reward"])
def test_kl_to_the_reference_starts_at_zero_and_grows(
    make_config: Callable[..., TrainerConfig], kl_in: str
) -> None:
    algo = AlgoConfig(
        form="token" if kl_in == "reward" else "sequence",
        loss=LossConfig(kl_coef=0.1, kl_estimator="k3", kl_in=kl_in),  # type: ignore[arg-type]
    )
    trainer = Trainer(make_config(algo=algo, lr=1e-3))
    experiences = random_experiences()
    first = trainer.train_step(on_policy(trainer, experiences))
    later = [trainer.train_step(on_policy(trainer, experiences)) for _ in range(3)]
    assert first["losses/kl"] == pytest.approx(0.0, abs=1e-6)  # the policy starts as the reference
    assert later[-1]["losses/kl"] > 1e-4


def test_bad_batches_are_rejected_with_a_reason(make_config: Callable[..., TrainerConfig]) -> None:
    trainer = Trainer(make_config())
    with pytest.raises(ValueError, match="empty list"):
        trainer.train_step([])
    too_long = random_experiences()
    too_long[0].prompt_ids = np.arange(5000, dtype=np.int32) % 700
    with pytest.raises(ValueError, match="at most 4096"):
        trainer.train_step(too_long)
    assert trainer.state.step == 0
