"""The self-play loop's protocols implemented on the Redis store (``azr.selfplay.protocols``,
``azr.selfplay.learner``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager

from azr.core.experience import Experience
from azr.core.task import Task, TaskType, TaskUse
from azr.services.store.buffers import TaskBuffers
from azr.services.store.experience_stream import DeliveryBatch, ExperienceStream
from azr.services.store.metrics import Counters, task_use
from azr.services.store.run_state import RunState


class RedisTaskStore:
    """``TaskStore`` on the Redis task buffers; remembers each type's solver cursor (newest first)."""

    def __init__(self, buffers: TaskBuffers, counters: Counters) -> None:
        self.buffers = buffers
        self.counters = counters
        self._cursors = dict.fromkeys(TaskType, 0)

    def sample(self, task_type: TaskType, k: int) -> list[Task]:
        return self.buffers[task_type].sample_uniform(k)

    def solver_batch(self, task_type: TaskType, b: int) -> list[Task]:
        batch = self.buffers[task_type].solver_batch(b, since=self._cursors[task_type])
        self._cursors[task_type] = batch.cursor
        return batch.tasks

    def add(self, tasks: Sequence[Task]) -> int:
        by_type: dict[TaskType, list[Task]] = {}
        for task in tasks:
            by_type.setdefault(task.type, []).append(task)
        return sum(self.buffers[t].add_many(group).added for t, group in by_type.items())

    def sizes(self) -> Mapping[TaskType, int]:
        return self.buffers.sizes()

    def record_uses(self, uses: Mapping[tuple[str, TaskUse], int]) -> None:
        self.counters.incr_many({task_use(task_id, use): n for (task_id, use), n in uses.items()})


class StreamSink:
    """``ExperienceSink`` on the experience stream (idempotent by experience id, with backpressure)."""

    def __init__(self, stream: ExperienceStream) -> None:
        self.stream = stream

    def add(self, experiences: Sequence[Experience]) -> None:
        if experiences:
            self.stream.add(experiences)


class StreamSource:
    """The learner's ``ExperienceSource`` on the experience stream: leased reads, renewals, fenced acks."""

    def __init__(self, stream: ExperienceStream, *, block_ms: int) -> None:
        self.stream = stream
        self.block_ms = block_ms

    def take(self, current_version: int, n: int) -> tuple[list[Experience], DeliveryBatch]:
        batch = self.stream.read(current_version, n=n, block_ms=self.block_ms)
        return batch.experiences, batch

    @contextmanager
    def holding(self, leases: Sequence[DeliveryBatch]) -> Iterator[object]:
        with ExitStack() as stack:
            for batch in leases:
                stack.enter_context(self.stream.keep_alive(batch))
            yield stack

    def confirm(self, leases: Sequence[DeliveryBatch]) -> None:
        self.stream.renew([d for batch in leases for d in batch.deliveries])

    def commit(self, leases: Sequence[DeliveryBatch]) -> None:
        """One atomic ack for the whole step, however many reads it took."""
        self.stream.ack([d for batch in leases for d in batch.deliveries])


class RunStateVersions:
    """The learner's ``VersionRecord`` on the run state."""

    def __init__(self, run_state: RunState) -> None:
        self.run_state = run_state

    def current(self) -> int:
        return self.run_state.policy_version()

    def advance(self, version: int) -> int:
        return self.run_state.advance_policy_version(version)
