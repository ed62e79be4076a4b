"""The schedule's ordering: how far rollouts may run ahead of training, and that steps never overlap.

The two sides here only record when they run; the loop itself is exercised end to end in
tests/services/test_selfplay_run.py."""

from __future__ import annotations

import asyncio

import pytest

from azr.selfplay.round import RoundResult
from azr.selfplay.schedule import Schedule, StepRecord

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Recorder:
    def __init__(self) -> None:
        self.events: list[str] = []
        self.version = 0
        self.training = 0

    async def sync_weights(self) -> int:
        return self.version

    async def round(self, step: int, policy_version: int) -> RoundResult:
        self.events.append(f"round {step} on v{policy_version}")
        await asyncio.sleep(0.01)
        return RoundResult(experiences=[], metrics={"x": float(step)}, samples=[], new_tasks=[])

    async def step(self, step: int, expected: int) -> dict[str, float]:
        self.training += 1
        assert self.training == 1, "two learner steps ran at once"
        self.events.append(f"train {step} start")
        await asyncio.sleep(0.05)
        self.version += 1
        self.events.append(f"train end v{self.version}")
        self.training -= 1
        return {"policy_version": float(self.version)}


async def run(max_staleness: int) -> tuple[list[str], list[StepRecord]]:
    recorder = Recorder()
    records: list[StepRecord] = []
    await Schedule(recorder, recorder, max_staleness=max_staleness).run(0, 4, records.append)
    return recorder.events, records


async def test_sync_waits_for_each_update_before_the_next_round() -> None:
    events, records = await run(max_staleness=0)
    rounds = [e for e in events if e.startswith("round")]
    assert rounds == ["round 0 on v0", "round 1 on v1", "round 2 on v2", "round 3 on v3"]
    assert [r.step for r in records] == [0, 1, 2, 3]


async def test_async_overlaps_one_round_with_training_and_stays_within_the_bound() -> None:
    events, records = await run(max_staleness=1)
    for k, event in enumerate(e for e in events if e.startswith("round")):
        version = int(event.rsplit("v", 1)[1])
        assert k - 1 <= version <= k, f"round {k} ran on version {version}"
    assert events.index("round 1 on v0") < events.index("train end v1"), "round 1 overlapped step 0"
    assert [e for e in events if e.endswith(" start")] == [f"train {k} start" for k in range(4)]
    assert [r.step for r in records] == [0, 1, 2, 3]
    assert [r.metrics["policy_version"] for r in records] == [1.0, 2.0, 3.0, 4.0]


async def test_stop_finishes_the_steps_in_flight_and_starts_no_round() -> None:
    recorder = Recorder()
    records: list[StepRecord] = []
    schedule = Schedule(recorder, recorder, max_staleness=1)

    def on_step(record: StepRecord) -> None:
        records.append(record)
        schedule.stop.set()

    await schedule.run(0, 10, on_step)
    assert len(records) == len([e for e in recorder.events if e.startswith("round")]) < 10


async def test_a_spent_time_budget_starts_no_round_and_finishes_the_steps_in_flight() -> None:
    recorder = Recorder()
    records: list[StepRecord] = []
    # Each step takes at least 50 ms of training, so a 0.2 s budget cannot reach step 1000.
    finished = await Schedule(recorder, recorder, max_staleness=1, max_seconds=0.2).run(
        0, 1000, records.append
    )
    rounds = [e for e in recorder.events if e.startswith("round")]
    assert 1 <= finished == len(records) == len(rounds) < 1000
    assert [r.step for r in records] == list(range(finished))


def test_a_time_budget_must_be_positive() -> None:
    recorder = Recorder()
    with pytest.raises(ValueError, match="max_seconds"):
        Schedule(recorder, recorder, max_staleness=0, max_seconds=0)
