"""The learner's order of work on the real trainer, stream and run state: train, acknowledge, publish,
checkpoint; resume never moves the policy version backwards."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import redis

from azr.core.experience import Experience
from azr.core.task import Role, TaskType
from azr.selfplay.learner import Learner
from azr.services.adapters import RunStateVersions, StreamSource
from azr.services.store.experience_stream import ExperienceStream
from azr.services.store.keys import Keys
from azr.services.store.run_state import RunState
from azr.trainer.config import TrainerConfig
from azr.trainer.trainer import Trainer
from azr.trainer.weights import DirectoryPublisher, latest_snapshot

pytestmark = pytest.mark.redis


def experiences(count: int, version: int, seed: int = 0) -> list[Experience]:
    rng = np.random.default_rng(seed)
    groups = [(r, t) for r in Role for t in TaskType]
    return [
        Experience(
            id=f"e{seed}-{i}",
            run_id="test",
            policy_version=version,
            role=groups[i % 6][0],
            task_type=groups[i % 6][1],
            prompt_ids=rng.integers(3, 500, 12, dtype=np.int32),
            response_ids=rng.integers(3, 500, 6, dtype=np.int32),
            behaviour_logprobs=-rng.random(6, dtype=np.float32),
            reward=float(rng.choice([-1.0, 0.0, 1.0])),
        )
        for i in range(count)
    ]


def make_learner(
    tiny_model_dir: Path, tmp_path: Path, client: redis.Redis, keys: Keys, *, interval: int = 2
) -> tuple[Learner, ExperienceStream, RunState]:
    config = TrainerConfig(
        model=str(tiny_model_dir),
        device="cpu",
        gradient_checkpointing=False,
        mini_batch_size=12,
        micro_batch_size=12,
        checkpoint_dir=tmp_path / "checkpoints",
        checkpoint_interval=interval,
    )
    trainer = Trainer(config, publisher=DirectoryPublisher(tmp_path / "weights"))
    stream = ExperienceStream(client, keys, consumer="learner")
    run_state = RunState(client, keys)
    learner = Learner(
        trainer, StreamSource(stream, block_ms=50), RunStateVersions(run_state), sampler_temperature=1.0
    )
    return learner, stream, run_state


def test_a_step_trains_acknowledges_publishes_and_checkpoints_when_due(
    tiny_model_dir: Path, tmp_path: Path, client: redis.Redis, keys: Keys
) -> None:
    learner, stream, run_state = make_learner(tiny_model_dir, tmp_path, client, keys)
    learner.publish_initial()
    assert latest_snapshot(tmp_path / "weights").version == 0  # type: ignore[union-attr]
    stream.add(experiences(12, version=0))

    metrics = learner.step(expected=12)
    assert metrics["batch/size"] == 12 and metrics["train/skipped"] == 0
    assert stream.waiting() == 0, "the step's experiences are acknowledged"
    assert learner.policy_version == run_state.policy_version() == 1
    assert latest_snapshot(tmp_path / "weights").version == 1  # type: ignore[union-attr]
    assert not (tmp_path / "checkpoints").exists() or not any((tmp_path / "checkpoints").iterdir())

    stream.add(experiences(12, version=1, seed=1))
    learner.step(expected=12)
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["step-00000002"]


def test_a_step_without_experiences_changes_nothing(
    tiny_model_dir: Path, tmp_path: Path, client: redis.Redis, keys: Keys
) -> None:
    learner, _, run_state = make_learner(tiny_model_dir, tmp_path, client, keys)
    metrics = learner.step(expected=6)
    assert metrics["train/skipped"] == 1.0 and metrics["batch/size"] == 0.0
    assert "train/pg_loss" in metrics, "a skipped step reports the same keys as any other"
    assert learner.policy_version == run_state.policy_version() == 0


def test_resume_republishes_above_every_recorded_version(
    tiny_model_dir: Path, tmp_path: Path, client: redis.Redis, keys: Keys
) -> None:
    """A learner that dies after publishing versions its last checkpoint does not know resumes with the
    checkpoint's weights under a new, higher version: the version never goes backwards."""
    learner, stream, run_state = make_learner(tiny_model_dir, tmp_path, client, keys, interval=1)
    for seed in range(2):
        stream.add(experiences(12, version=learner.policy_version, seed=seed))
        learner.step(expected=12)

    same, _, _ = make_learner(tiny_model_dir, tmp_path, client, keys, interval=1)
    assert same.resume(tmp_path / "checkpoints")
    assert same.policy_version == run_state.policy_version() == 2, "the checkpoint's weights are v2's"

    run_state.advance_policy_version(5)  # published by a learner that died before its next checkpoint
    restarted, _, _ = make_learner(tiny_model_dir, tmp_path, client, keys, interval=1)
    assert restarted.resume(tmp_path / "checkpoints")
    assert restarted.steps_done == 2
    assert restarted.policy_version == run_state.policy_version() == 6
    assert latest_snapshot(tmp_path / "weights").version == 6  # type: ignore[union-attr]


def test_samplers_and_trainer_must_agree_on_the_temperature(
    tiny_model_dir: Path, tmp_path: Path, client: redis.Redis, keys: Keys
) -> None:
    learner, stream, run_state = make_learner(tiny_model_dir, tmp_path, client, keys)
    with pytest.raises(ValueError, match="temperature"):
        Learner(
            learner.trainer,
            StreamSource(stream, block_ms=50),
            RunStateVersions(run_state),
            sampler_temperature=0.7,
        )
