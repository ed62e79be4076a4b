"""Fixtures for the trainer tests: the real tiny model (built once per session) and batches of experiences."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from azr.core.experience import Experience, ExperienceKind
from azr.core.task import Role, TaskType
from azr.trainer.batch import collate
from azr.trainer.config import TrainerConfig
from azr.trainer.logprobs import sequence_logprobs
from azr.trainer.trainer import Trainer


@pytest.fixture
def make_config(tiny_model_dir: Path) -> Callable[..., TrainerConfig]:
    """A CPU config for the tiny model; keyword arguments override fields."""

    def make(**overrides: Any) -> TrainerConfig:
        fields: dict[str, Any] = {
            "model": str(tiny_model_dir),
            "device": "cpu",
            "gradient_checkpointing": False,
            "lr": 1e-4,
            "mini_batch_size": 12,
            "micro_batch_size": 12,
        }
        return TrainerConfig(**(fields | overrides))

    return make


def random_experiences(
    per_group: int = 2, *, seed: int = 0, vocab: int = 700, demonstrations: int = 0
) -> list[Experience]:
    """``per_group`` experiences in each of the six (role, task type) groups, varied lengths and rewards,
    then ``demonstrations`` solver demonstrations (task types in turn)."""
    rng = np.random.default_rng(seed)

    def draw(name: str, role: Role, task_type: TaskType, *, demonstration: bool = False) -> Experience:
        prompt_len, response_len = int(rng.integers(4, 24)), int(rng.integers(2, 16))
        prompt_ids = rng.integers(3, vocab, prompt_len, dtype=np.int32)
        response_ids = rng.integers(3, vocab, response_len, dtype=np.int32)
        if demonstration:
            logprobs, reward = np.zeros(response_len, dtype=np.float32), 1.0
        else:
            logprobs = -rng.random(response_len, dtype=np.float32) * 6.0
            reward = float(rng.choice([-1.0, -0.5, 0.0, 1.0]))
        return Experience(
            id=name,
            run_id="test",
            policy_version=0,
            role=role,
            task_type=task_type,
            prompt_ids=prompt_ids,
            response_ids=response_ids,
            behaviour_logprobs=logprobs,
            reward=reward,
            kind=ExperienceKind.DEMONSTRATION if demonstration else ExperienceKind.SAMPLED,
        )

    out = [
        draw(f"{role}-{task_type}-{k}", role, task_type)
        for role in Role
        for task_type in TaskType
        for k in range(per_group)
    ]
    out += [
        draw(f"demonstration-{k}", Role.SOLVE, list(TaskType)[k % len(TaskType)], demonstration=True)
        for k in range(demonstrations)
    ]
    return out


@torch.no_grad()
def on_policy(trainer: Trainer, experiences: list[Experience]) -> list[Experience]:
    """The experiences with the behaviour log-probs that a sampler holding the trainer's current weights
    would report, as on-policy rollouts carry them."""
    batch = collate(experiences, trainer.pad_token_id)
    logprobs, _ = sequence_logprobs(
        trainer.engine.module,
        batch.input_ids,
        batch.attention_mask,
        temperature=trainer.cfg.temperature,
        with_entropy=False,
    )  # (N, L)
    mask = batch.response_mask.bool()  # (N, L)
    return [
        replace(e, behaviour_logprobs=logprobs[i][mask[i]].numpy().astype(np.float32))
        for i, e in enumerate(experiences)
    ]


def params_of(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters()}
