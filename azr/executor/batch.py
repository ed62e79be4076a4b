"""The JSON-lines batch runner behind ``azr executor run``: jobs in, one result per job out, as they finish.

Each result line is written and flushed when its job finishes, so a slow job never holds back the others
and a consumer can stream the results. Bad input loses nothing: a line that is not a well-formed job (not
JSON, missing fields, too long, not UTF-8) gets a ``bad_answer`` result with its id (or ``line-N`` when
no id can be read) and the run goes on; so does a job that repeats an earlier job's id, which is refused
rather than run. Blank lines are skipped. The run itself fails (an exception out
of ``run_batch``) only when the input cannot be read or the output cannot be written.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import BinaryIO

from azr.executor.errors import ErrorCode
from azr.executor.jobs import Job, JobResult, MalformedJobError, decode_job, line_id
from azr.executor.pool import ExecutorPool

MAX_LINE_BYTES = 16 * 1024**2
"""Longest job line read; a longer one is answered as malformed and skipped, not loaded into memory."""
_SKIP_CHUNK_BYTES = 1024**2
_READ_AHEAD_LINES = 64
_STOP_POLL_S = 0.5


@dataclass(slots=True)
class BatchSummary:
    """Counts of what a batch run wrote, for the operator."""

    results: int = 0
    ok: int = 0
    not_ok: int = 0
    """Invalid tasks and jobs that could not be judged (malformed and infra errors included)."""
    malformed: int = 0
    infra_errors: int = 0
    correct: int = 0
    """Checks judged correct."""
    elapsed_s: float = 0.0
    codes: dict[str, int] = field(default_factory=dict)
    """Error classes seen, over every result that carries an error."""

    def add(self, result: JobResult) -> None:
        self.results += 1
        self.ok += result.ok
        self.not_ok += not result.ok
        self.correct += result.correct is True
        if result.error is not None:
            code = result.error.code
            self.codes[code.value] = self.codes.get(code.value, 0) + 1
            self.infra_errors += code is ErrorCode.INFRA_ERROR


class _ResultWriter:
    def __init__(self, sink: BinaryIO, summary: BatchSummary) -> None:
        self._sink = sink
        self._summary = summary

    def write(self, result: JobResult) -> None:
        self._sink.write(result.to_json().encode() + b"\n")
        self._sink.flush()
        self._summary.add(result)

    def write_malformed(self, malformed: MalformedJobError) -> None:
        self.write(malformed.result())
        self._summary.malformed += 1


async def run_batch(pool: ExecutorPool, source: BinaryIO, sink: BinaryIO) -> BatchSummary:
    """Judge every job line of ``source`` on ``pool``, writing JSON result lines to ``sink``."""
    summary = BatchSummary()
    writer = _ResultWriter(sink, summary)
    started = time.perf_counter()
    async for result in pool.map(_jobs(source, writer)):
        writer.write(result)
    summary.elapsed_s = time.perf_counter() - started
    return summary


async def _jobs(source: BinaryIO, writer: _ResultWriter) -> AsyncIterator[Job]:
    """Decode lines into jobs; a malformed line's result is written at once, in reading order.

    A job whose id an earlier line already used is not run: its result (with that id) says so, since a
    consumer could not tell two results of one id apart.
    """
    line_number = 0
    seen: set[str] = set()
    async for line in _lines(source):
        line_number += 1
        if line is _TOO_LONG:
            message = f"line {line_number} is longer than {MAX_LINE_BYTES} bytes"
            writer.write_malformed(MalformedJobError(line_id(line_number), message))
            continue
        if not line.strip():
            continue
        try:
            job = decode_job(line, line_number)
        except MalformedJobError as malformed:
            writer.write_malformed(malformed)
            continue
        if job.id in seen:
            message = f"duplicate job id on line {line_number}: ids must be unique within a batch"
            writer.write_malformed(MalformedJobError(job.id, message))
            continue
        seen.add(job.id)
        yield job


_TOO_LONG = b"\0too long\0"
"""Stands for a line over ``MAX_LINE_BYTES`` (compared by identity)."""
_END = b""


async def _lines(source: BinaryIO) -> AsyncIterator[bytes]:
    """Lines of ``source`` read on a daemon thread, a few ahead of their use.

    A plain thread-pool read would keep an interrupted run alive until an open pipe sends more input;
    a daemon thread never delays exit. A read error is raised here, in the reading coroutine.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | OSError] = asyncio.Queue(maxsize=_READ_AHEAD_LINES)
    stop = threading.Event()

    def put(item: bytes | OSError) -> bool:
        """Hand ``item`` to the loop, waiting while the queue is full; False once nobody reads."""
        try:
            future = asyncio.run_coroutine_threadsafe(queue.put(item), loop)
        except RuntimeError:  # the loop is closed
            return False
        while not stop.is_set():
            try:
                future.result(timeout=_STOP_POLL_S)
                return True
            except TimeoutError:
                continue
            except concurrent.futures.CancelledError:
                return False
        future.cancel()
        return False

    def pump() -> None:
        try:
            while line := source.readline(MAX_LINE_BYTES + 1):
                if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                    _skip_rest_of_line(source)
                    line = _TOO_LONG
                if not put(line):
                    return
        except OSError as exc:
            put(exc)
            return
        put(_END)

    threading.Thread(target=pump, name="azr-batch-reader", daemon=True).start()
    try:
        while (item := await queue.get()) is not _END:
            if isinstance(item, OSError):
                raise item
            yield item
    finally:
        stop.set()


def _skip_rest_of_line(source: BinaryIO) -> None:
    while chunk := source.readline(_SKIP_CHUNK_BYTES):
        if chunk.endswith(b"\n"):
            return
