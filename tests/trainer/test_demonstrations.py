"""Demonstrations in a training batch: imitated by their likelihood, invisible to the RL side of the step."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from azr.trainer.algorithms import AlgoConfig
from azr.trainer.batch import collate
from azr.trainer.config import TrainerConfig
from azr.trainer.logprobs import sequence_logprobs
from azr.trainer.losses import LossConfig
from azr.trainer.trainer import Trainer
from tests.trainer.conftest import on_policy, random_experiences


def test_demonstrations_change_no_advantage_and_no_reward_statistic(
    make_config: Callable[..., TrainerConfig],
) -> None:
    """A demonstration's reward is not an outcome: it must not move a group's baseline or spread."""
    trainer = Trainer(make_config())
    sampled = random_experiences()
    mixed = sampled + random_experiences(per_group=0, seed=5, demonstrations=4)
    alone, alone_metrics = trainer._prepare(collate(sampled, trainer.pad_token_id))
    both, both_metrics = trainer._prepare(collate(mixed, trainer.pad_token_id))
    assert alone.advantages is not None and both.advantages is not None
    width = alone.advantages.shape[1]
    torch.testing.assert_close(both.advantages[: len(sampled), :width], alone.advantages)
    assert not both.advantages[len(sampled) :].any()
    assert both_metrics["batch/demonstrations"] == 4.0 and alone_metrics["batch/demonstrations"] == 0.0
    rewards = {
        k: v for k, v in both_metrics.items() if k.startswith(("rewards/", "advantages/", "mismatch/"))
    }
    assert rewards == {k: v for k, v in alone_metrics.items() if k in rewards}
    assert rewards.keys() == {
        k for k in alone_metrics if k.startswith(("rewards/", "advantages/", "mismatch/"))
    }


def test_the_step_loss_is_the_policy_loss_plus_the_weighted_mean_nll_of_the_demonstrations(
    make_config: Callable[..., TrainerConfig],
) -> None:
    coef = 0.5
    algo = AlgoConfig(loss=LossConfig(entropy_coef=0.0, imitation_coef=coef))
    trainer = Trainer(make_config(algo=algo, mini_batch_size=15, micro_batch_size=4))
    experiences = on_policy(trainer, random_experiences()) + random_experiences(
        per_group=0, seed=5, demonstrations=3
    )
    batch = collate(experiences, trainer.pad_token_id)
    with torch.no_grad():
        logprobs, _ = sequence_logprobs(
            trainer.engine.module, batch.input_ids, batch.attention_mask, temperature=1.0, with_entropy=False
        )  # (N, L)
    mask = batch.demonstration_mask.bool()  # (N, L)
    nll = float(-logprobs[mask].mean())

    metrics = trainer.train_step(experiences)

    assert metrics["losses/imitation_nll"] == pytest.approx(nll, rel=1e-5)
    # One mini-batch, no entropy, KL or importance weight: the policy loss is the clipped surrogate alone.
    assert metrics["losses/loss"] == pytest.approx(metrics["losses/pg_loss"] + coef * nll, rel=1e-5)


def test_a_batch_of_demonstrations_alone_teaches_them(make_config: Callable[..., TrainerConfig]) -> None:
    trainer = Trainer(make_config(lr=1e-3))
    demonstrations = random_experiences(per_group=0, seed=5, demonstrations=6)
    nll = [trainer.train_step(demonstrations)["losses/imitation_nll"] for _ in range(5)]
    assert nll[-1] < 0.8 * nll[0], nll
    assert trainer.state.policy_version == 5 and trainer.state.optimizer_steps == 5
    last = trainer.train_step(demonstrations)
    assert not any(k.startswith(("rewards/", "advantages/", "losses/pg_loss")) for k in last)
