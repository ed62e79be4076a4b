"""A run's worth of store content for the API tests, written through the store's own API: tasks of every
origin in every buffer, per-step metrics records with the keys the self-play loop publishes, proposal
counters and a policy version."""

from __future__ import annotations

import math

import redis

from azr.core.task import Origin, Task, TaskType
from azr.executor.errors import ErrorCode
from azr.services.store.buffers import TaskBuffers
from azr.services.store.keys import Keys
from azr.services.store.metrics import Counters, MetricsStream, proposal_outcome
from azr.services.store.run_state import RunState

ERROR_CLASSES = (ErrorCode.SYNTAX_ERROR, ErrorCode.TIMEOUT, ErrorCode.FORBIDDEN)


def proposed_task(task_type: TaskType, i: int, step: int = 0, origin: Origin = Origin.PROPOSED) -> Task:
    inputs = (f"{i}", f"{i + 1}") if task_type is TaskType.INDUCTION else (f"{i}",)
    return Task(
        type=task_type,
        program=f"def f(x):\n    # task {i}\n    return x * {i % 7 + 1} + {i % 3}",
        inputs=inputs,
        outputs=tuple(str(int(a) * (i % 7 + 1) + i % 3) for a in inputs),
        message="scale and shift" if task_type is TaskType.INDUCTION else "",
        origin=origin,
        step=step,
    )


def step_values(step: int) -> dict[str, float]:
    """One metrics record as the self-play loop publishes it (smooth, plausible curves)."""
    progress = 1 - math.exp(-step / 20)
    values: dict[str, float] = {"step": step, "policy_version": step, "time_s": 3.0 * step}
    for k, task_type in enumerate(TaskType):
        t = task_type.value
        values |= {
            f"propose/{t}/valid_rate": 0.4 + 0.5 * progress,
            f"propose/{t}/reward_mean": 0.1 + 0.2 * progress - 0.05 * k,
            f"propose/{t}/learnability_mean": (0.15 + 0.1 * k + 0.05 * (step % 5)) % 1.0,
            f"propose/{t}/complexity_mean": 12 + 10 * progress + 3 * k,
            f"solve/{t}/accuracy": 0.2 + 0.6 * progress - 0.1 * k,
            f"solve/{t}/reward_mean": -0.3 + 0.9 * progress,
            f"buffer/{t}/size": 10 + step,
        }
    for code in ERROR_CLASSES:
        values[f"executor/errors/{code.value}"] = float((step + len(code.value)) % 3)
    values |= {
        "train/pg_loss": 0.5 - 0.3 * progress,
        "train/entropy": 1.2 - 0.4 * progress,
        "train/kl": 0.01 * progress,
        "train/imitation_nll": 1.1 - 0.7 * progress,
        "train/clip_frac": 0.05,
        "train/grad_norm": 0.8,
        "perf/tokens_per_s": 900 + 10 * step,
        "perf/step_s": 3.0,
        "perf/generate_s": 1.6,
        "perf/execute_s": 0.4,
        "perf/train_s": 0.8,
        "perf/publish_s": 0.2,
        "perf/trainer_idle_ratio": 0.3,
        "batch/staleness_max": float(step % 2),
        "response/length_mean": 180 + 2 * step,
    }
    return values


def fill_run(client: redis.Redis, keys: Keys, *, steps: int = 30, tasks_per_type: int = 20) -> None:
    buffers = TaskBuffers(client, keys)
    buffers.ensure_zero_seed()
    for task_type in TaskType:
        buffers[task_type].add_many(proposed_task(task_type, i, step=i) for i in range(tasks_per_type))
    stream = MetricsStream(client, keys)
    for step in range(steps):
        stream.publish(step, step_values(step))
    counters = Counters(client, keys)
    counters.incr_many({proposal_outcome(t, None): 40 for t in TaskType})
    counters.incr_many({proposal_outcome(t, code): 5 for t in TaskType for code in ERROR_CLASSES})
    RunState(client, keys).advance_policy_version(steps)
