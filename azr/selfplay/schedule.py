"""The schedule of a run: rounds and learner steps, synchronous or with a bounded policy lag.

Step k is one round (rollouts and executor checks, experiences written) followed by one learner step on
those experiences, which publishes policy version v+1. With ``max_staleness`` s, round k may start once
learner step k - s - 1 has finished, so its rollouts use a policy at most s updates behind:

    s = 0 (sync):   round k | train k | round k+1 | train k+1 | ...
    s = 1 (async):  round k | round k+1 ...          (round k+1 overlaps train k)
                            | train k   | train k+1 ...

Learner steps run one at a time and in order. Each step's metrics are emitted once its learner step has
finished, merged with its round's. ``stop`` ends the run cleanly: no new round starts, the steps already
running finish, and the caller checkpoints.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from azr.selfplay.round import RoundResult

log = logging.getLogger(__name__)


class RolloutSide(Protocol):
    async def sync_weights(self) -> int:
        """Load the newest published weights into every sampler; returns the version they now hold."""
        ...

    async def round(self, step: int, policy_version: int) -> RoundResult: ...


class LearnerSide(Protocol):
    async def step(self, step: int, expected: int) -> dict[str, float]:
        """Train step ``step`` on the next ``expected`` experiences; returns the training metrics."""
        ...


@dataclass(frozen=True, slots=True)
class StepRecord:
    """Everything known about one finished step."""

    step: int
    metrics: dict[str, float]
    samples: list[dict[str, object]]


class Schedule:
    def __init__(
        self,
        rollout: RolloutSide,
        learner: LearnerSide,
        *,
        max_staleness: int,
        max_seconds: float | None = None,
    ) -> None:
        if max_staleness < 0:
            raise ValueError(f"max_staleness must be >= 0, got {max_staleness}")
        if max_seconds is not None and max_seconds <= 0:
            raise ValueError(f"max_seconds must be > 0, got {max_seconds}")
        self.rollout = rollout
        self.learner = learner
        self.max_staleness = max_staleness
        self.max_seconds = max_seconds
        """Time budget of ``run``: no round starts after it (the steps in flight still finish)."""
        self.stop = asyncio.Event()

    async def run(self, first_step: int, last_step: int, on_step: Callable[[StepRecord], None]) -> int:
        """Run steps ``first_step`` .. ``last_step - 1``; returns the number of steps finished."""
        started = time.perf_counter()
        last_emit = started
        training: dict[int, asyncio.Task[dict[str, float]]] = {}
        rounds: dict[int, tuple[RoundResult, float, int]] = {}
        previous: asyncio.Task[dict[str, float]] | None = None
        finished = 0

        async def emit_through(step: int) -> None:
            nonlocal last_emit, finished
            for k in sorted(s for s in training if s <= step):
                train = await training.pop(k)
                result, round_s, version = rounds.pop(k)
                now = time.perf_counter()
                metrics = result.metrics | train
                metrics |= {
                    "step": float(k),
                    "time_s": now - started,
                    "perf/step_s": now - last_emit,
                    "perf/round_s": round_s,
                    "rollout/policy_version": float(version),
                }
                metrics.setdefault("policy_version", float(version))
                last_emit = now
                finished += 1
                on_step(StepRecord(step=k, metrics=metrics, samples=result.samples))

        for k in range(first_step, last_step):
            if self.stop.is_set():
                log.info("stop requested: no new round after step %d", k - 1)
                break
            if self.max_seconds is not None and time.perf_counter() - started >= self.max_seconds:
                log.info("time budget of %.0f s spent: no new round after step %d", self.max_seconds, k - 1)
                break
            await emit_through(k - self.max_staleness - 1)
            version = await self.rollout.sync_weights()
            round_start = time.perf_counter()
            result = await self.rollout.round(k, version)
            rounds[k] = (result, time.perf_counter() - round_start, version)
            previous = training[k] = asyncio.create_task(
                self._train_after(previous, k, len(result.experiences)), name=f"learner-step-{k}"
            )
        await emit_through(last_step)
        return finished

    async def _train_after(
        self, previous: asyncio.Task[dict[str, float]] | None, step: int, expected: int
    ) -> dict[str, float]:
        """One learner step, started only when the previous one has finished (steps never overlap)."""
        if previous is not None:
            await asyncio.shield(previous)
        return await self.learner.step(step, expected)
