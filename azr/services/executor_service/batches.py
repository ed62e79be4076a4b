"""Admission and bookkeeping of batches: the service's queue, its backpressure and its result store.

Every admitted job counts as pending until its result exists; a batch that would push the count past
``max_pending_jobs`` is refused whole (``AdmissionError``), so a caller never has half a batch accepted.
Jobs run on the shared ``ExecutorPool``, whose own limit bounds how many are judged at once; results are
kept in completion order for streaming and polling, and a finished batch is forgotten ``result_ttl_s``
later.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable, Sequence

from azr.executor.errors import ErrorCode, ExecError
from azr.executor.jobs import Job, JobResult
from azr.executor.pool import ExecutorPool

log = logging.getLogger(__name__)


class AdmissionError(Exception):
    """The service cannot take this batch now; the caller should retry later.

    ``status_code`` is 429 when the queue is full and 503 when the service is shutting down.
    """

    def __init__(self, message: str, *, shutting_down: bool = False) -> None:
        super().__init__(message)
        self.status_code = 503 if shutting_down else 429
        self.reason = "not_ready" if shutting_down else "queue_full"


class JobBatch:
    """The jobs of one request and their results, in the order they finished."""

    def __init__(self, jobs: Sequence[Job]) -> None:
        self.id = secrets.token_hex(12)
        self.size = len(jobs)
        self.results: list[JobResult] = []
        self.finished_at: float | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._changed = asyncio.Condition()

    @property
    def complete(self) -> bool:
        return len(self.results) == self.size

    async def add(self, result: JobResult) -> None:
        async with self._changed:
            self.results.append(result)
            if self.complete:
                self.finished_at = time.monotonic()
            self._changed.notify_all()

    async def wait_beyond(self, position: int, timeout_s: float) -> None:
        """Return once more than ``position`` results exist, the batch is complete or ``timeout_s`` passed."""
        async with self._changed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._changed.wait_for(lambda: len(self.results) > position or self.complete), timeout_s
                )

    async def stream(self) -> AsyncIterator[JobResult]:
        """Every result, as soon as it exists."""
        sent = 0
        while sent < self.size:
            await self.wait_beyond(sent, timeout_s=3600.0)
            while sent < len(self.results):
                yield self.results[sent]
                sent += 1

    def track(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def cancel(self) -> list[asyncio.Task[None]]:
        """Cancel the jobs still running; returns them so the caller can wait for them."""
        running = list(self._tasks)
        for task in running:
            task.cancel()
        return running


class BatchRunner:
    """Runs admitted batches on one pool and keeps their results for a while."""

    def __init__(
        self,
        pool: ExecutorPool,
        *,
        max_pending_jobs: int,
        result_ttl_s: float,
        on_result: Callable[[Job, JobResult], None],
    ) -> None:
        self._pool = pool
        self._max_pending_jobs = max_pending_jobs
        self._result_ttl_s = result_ttl_s
        self._on_result = on_result
        self._batches: dict[str, JobBatch] = {}
        self.pending_jobs = 0
        self.draining = False

    def admit(self, jobs: Sequence[Job]) -> JobBatch:
        """Start every job of a batch, or raise ``AdmissionError`` and start none."""
        self._forget_expired()
        if self.draining:
            raise AdmissionError("the service is shutting down", shutting_down=True)
        if self.pending_jobs + len(jobs) > self._max_pending_jobs:
            raise AdmissionError(
                f"{self.pending_jobs} jobs pending; a batch of {len(jobs)} would exceed the limit of "
                f"{self._max_pending_jobs}"
            )
        batch = JobBatch(jobs)
        self._batches[batch.id] = batch
        self.pending_jobs += len(jobs)
        for job in jobs:
            batch.track(asyncio.create_task(self._run(batch, job), name=f"job-{job.id}"))
        return batch

    def get(self, batch_id: str) -> JobBatch | None:
        self._forget_expired()
        return self._batches.get(batch_id)

    def discard(self, batch: JobBatch) -> None:
        """Stop a batch nobody will read (its streaming client went away)."""
        batch.cancel()
        self._batches.pop(batch.id, None)

    async def aclose(self) -> None:
        """Refuse new batches, then stop the running ones; their jobs get no verdict."""
        self.draining = True
        running = [task for batch in self._batches.values() for task in batch.cancel()]
        await asyncio.gather(*running, return_exceptions=True)

    async def _run(self, batch: JobBatch, job: Job) -> None:
        try:
            result = await self._pool.submit(job)
        except asyncio.CancelledError:
            self.pending_jobs -= 1
            raise
        except Exception as exc:  # submit promises a result; this guards the promise
            log.exception("job %s raised out of the pool", job.id)
            result = JobResult.failed(job.id, ExecError(ErrorCode.INFRA_ERROR, f"executor fault: {exc!r}"))
        self.pending_jobs -= 1
        self._on_result(job, result)
        await batch.add(result)

    def _forget_expired(self) -> None:
        now = time.monotonic()
        expired = [
            batch_id
            for batch_id, batch in self._batches.items()
            if batch.finished_at is not None and now - batch.finished_at > self._result_ttl_s
        ]
        for batch_id in expired:
            del self._batches[batch_id]
