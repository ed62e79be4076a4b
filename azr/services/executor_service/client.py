"""``ExecutorClient``: the ``ExecutorPool`` API (validate / check / submit / map) over HTTP.

    async with ExecutorClient("http://127.0.0.1:8090", token="...") as executor:
        validation = await executor.validate(task)
        async for result in executor.map(jobs):
            ...

Failure never turns into a verdict. A job's result is taken only from a well-formed result line with
that job's id; everything else (a refused request, a dropped connection, a service restart, a stream that
ends early, a line that does not parse) leads to a retry of the jobs still without a result, with
exponential backoff and the server's ``Retry-After``, and once the retries are spent each of those jobs
gets an ``infra_error`` result. Jobs are pure functions of their text, so running one twice is harmless.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Sequence
from dataclasses import replace
from types import TracebackType
from typing import Any, Self

import httpx

from azr.core.task import Task
from azr.executor.errors import ErrorCode, ExecError
from azr.executor.jobs import Job, JobOp, JobResult, Judgement, Validation
from azr.services.executor_service.schemas import JobIn

log = logging.getLogger(__name__)

_RETRIED_STATUSES = frozenset({429, 502, 503, 504})


class ExecutorClient:
    """Talks to one executor service; an async context manager that owns its HTTP connections."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        attempts: int = 6,
        backoff_s: float = 0.2,
        max_backoff_s: float = 5.0,
        read_timeout_s: float = 300.0,
        batch_jobs: int = 64,
        max_in_flight_batches: int = 2,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        """``attempts`` tries per job (the first included); ``read_timeout_s`` bounds the wait for the
        next result line; ``map`` sends ``batch_jobs`` jobs per request, ``max_in_flight_batches`` at once."""
        if attempts < 1 or batch_jobs < 1 or max_in_flight_batches < 1:
            raise ValueError("attempts, batch_jobs and max_in_flight_batches must be at least 1")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.AsyncClient(
            base_url=base_url,
            headers=headers,
            timeout=httpx.Timeout(10.0, read=read_timeout_s),
            transport=transport,
        )
        self._attempts = attempts
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self._batch_jobs = batch_jobs
        self._max_in_flight_batches = max_in_flight_batches

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def health(self) -> dict[str, Any]:
        """The service's /healthz body (raises ``httpx.HTTPError`` when it cannot be read)."""
        response = await self._http.get("/healthz")
        body: dict[str, Any] = response.json()
        return body

    async def validate(self, task: Task) -> Validation:
        result = await self.submit(Job(id="validate", op=JobOp.VALIDATE, task=task))
        if result.ok:
            return Validation(result.outputs, None)
        return Validation(None, result.error)

    async def check(self, task: Task, answer: str) -> Judgement:
        result = await self.submit(Job(id="check", op=JobOp.CHECK, task=task, answer=answer))
        if result.ok:
            return Judgement(ok=True, correct=result.correct, error=result.error)
        return Judgement.invalid(result.error or _infra("the service gave no reason"))

    async def submit(self, job: Job) -> JobResult:
        """Judge one job; always returns a result (``infra_error`` when the service could not be used)."""
        (result,) = [result async for result in self._run_batch([job])]
        return result

    async def map(self, jobs: Iterable[Job] | AsyncIterable[Job]) -> AsyncIterator[JobResult]:
        """A result for every job, in completion order; jobs go out in batches of ``batch_jobs``."""
        results: asyncio.Queue[JobResult | None] = asyncio.Queue()
        gate = asyncio.Semaphore(self._max_in_flight_batches)

        async def run(batch: list[Job]) -> None:
            try:
                async for result in self._run_batch(batch):
                    await results.put(result)
            finally:
                gate.release()

        async def feed() -> None:
            running: set[asyncio.Task[None]] = set()
            try:
                async for batch in _batches(jobs, self._batch_jobs):
                    await gate.acquire()
                    task = asyncio.create_task(run(batch))
                    running.add(task)
                    task.add_done_callback(running.discard)
                await asyncio.gather(*running)
            finally:
                for task in running:
                    task.cancel()
                await results.put(None)

        feeder = asyncio.create_task(feed())
        try:
            while (result := await results.get()) is not None:
                yield result
            await feeder  # re-raises a failure of the job source
        finally:
            feeder.cancel()
            await asyncio.gather(feeder, return_exceptions=True)

    async def _run_batch(self, jobs: Sequence[Job]) -> AsyncIterator[JobResult]:
        """Stream one batch, retrying the jobs without a result; yields exactly one result per job.

        On the wire each job's id is its position in ``jobs``, so callers' ids need not be unique.
        """
        waiting = {str(n): job for n, job in enumerate(jobs)}
        reason, retry_after_s = "not tried", 0.0
        for attempt in range(self._attempts):
            if attempt:
                await asyncio.sleep(max(retry_after_s, self._backoff(attempt)))
            retry_after_s = 0.0
            body = {"jobs": [_wire(wire_id, job) for wire_id, job in waiting.items()]}
            try:
                async with self._http.stream(
                    "POST", "/v1/batches", params={"stream": "true"}, json=body
                ) as reply:
                    if reply.status_code != 200:
                        reason, retry_after_s = await _refusal(reply)
                        if reply.status_code not in _RETRIED_STATUSES:
                            break  # a request the service will never accept: retrying cannot help
                        continue
                    async for line in reply.aiter_lines():
                        result = _parse_result(line, waiting)
                        if result is None:
                            reason = f"malformed result line from the service: {line[:200]!r}"
                            break  # the stream cannot be trusted any more; retry what is left
                        yield replace(result, id=waiting.pop(result.id).id)
                    else:
                        reason = "the result stream ended early"
            except httpx.TransportError as exc:
                reason = f"{type(exc).__name__}: {exc}"
            if not waiting:
                return
            log.warning("executor service attempt %d/%d failed: %s", attempt + 1, self._attempts, reason)
        for job in waiting.values():
            yield JobResult.failed(job.id, _infra(f"executor service unusable: {reason}"))

    def _backoff(self, attempt: int) -> float:
        """Exponential backoff with jitter (so that many clients do not retry in step)."""
        return min(self._backoff_s * 2.0 ** (attempt - 1) * (1 + random.random()), self._max_backoff_s)


def _infra(message: str) -> ExecError:
    return ExecError(ErrorCode.INFRA_ERROR, message)


def _wire(wire_id: str, job: Job) -> dict[str, Any]:
    return JobIn.of(replace(job, id=wire_id)).model_dump(exclude_none=True)


async def _refusal(reply: httpx.Response) -> tuple[str, float]:
    """Why the service refused a request, and how long it asked us to wait (0 when it did not say)."""
    text = (await reply.aread()).decode("utf-8", "replace")
    try:
        detail = json.loads(text).get("detail", text)
    except (ValueError, AttributeError):
        detail = text
    retry_after = reply.headers.get("Retry-After", "")
    return f"HTTP {reply.status_code}: {str(detail)[:500]}", float(
        retry_after
    ) if retry_after.isdigit() else 0.0


def _parse_result(line: str, waiting: dict[str, Job]) -> JobResult | None:
    """A result for one of ``waiting`` that is consistent with its job, or ``None`` for anything else."""
    try:
        data = json.loads(line)
        if not isinstance(data, dict) or not isinstance(data.get("ok"), bool):
            return None
        result = JobResult.from_dict(data)
        job = waiting.get(result.id)
        if job is None:
            return None
        # Building the typed outcome checks the result's fields against each other.
        if job.op is JobOp.VALIDATE:
            Validation(result.outputs if result.ok else None, None if result.ok else result.error)
        elif result.ok:
            Judgement(ok=True, correct=result.correct, error=result.error)
        else:
            Judgement.invalid(result.error)  # type: ignore[arg-type]
        return result
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


async def _batches(jobs: Iterable[Job] | AsyncIterable[Job], size: int) -> AsyncIterator[list[Job]]:
    batch: list[Job] = []
    if isinstance(jobs, AsyncIterable):
        async for job in jobs:
            batch.append(job)
            if len(batch) == size:
                yield batch
                batch = []
    else:
        for job in jobs:
            batch.append(job)
            if len(batch) == size:
                yield batch
                batch = []
    if batch:
        yield batch
