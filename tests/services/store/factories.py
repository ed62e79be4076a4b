"""Test data for the store tests."""

from __future__ import annotations

import numpy as np

from azr.core.experience import Experience
from azr.core.task import Role, TaskType


def make_experience(
    i: int, *, policy_version: int = 0, prompt_len: int = 7, response_len: int = 5, seed: int = 0
) -> Experience:
    """A deterministic experience with distinctive values (large and negative ids, tiny log-probs)."""
    rng = np.random.default_rng(seed * 1_000_003 + i)
    return Experience(
        id=f"exp-{i}",
        run_id="run-test",
        policy_version=policy_version,
        role=(Role.PROPOSE, Role.SOLVE)[i % 2],
        task_type=(TaskType.DEDUCTION, TaskType.ABDUCTION, TaskType.INDUCTION)[i % 3],
        prompt_ids=rng.integers(-(2**31), 2**31 - 1, size=prompt_len, dtype=np.int32),
        response_ids=rng.integers(0, 200_000, size=response_len, dtype=np.int32),
        behaviour_logprobs=-rng.exponential(size=response_len).astype(np.float32),
        reward=float(rng.normal()),
        reward_parts={"format": -0.5, "solve": float(i % 2)},
        task_id=f"task-{i}",
    )
