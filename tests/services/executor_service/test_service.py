"""The executor service over real HTTP: a uvicorn subprocess with a real sandbox pool behind it."""

from __future__ import annotations

import asyncio
import signal
import textwrap
import time
from collections.abc import Iterator

import httpx
import pytest

from azr.core.task import Task, TaskType
from azr.executor.errors import ErrorCode
from azr.executor.jobs import Job, JobOp
from azr.services.executor_service.client import ExecutorClient
from tests.executor.docker_support import require_docker
from tests.services.executor_service.conftest import TOKEN, ServiceProcess, free_port

pytestmark = pytest.mark.anyio

PLUS_ONE = Task(type=TaskType.DEDUCTION, program="def f(x):\n    return x + 1", inputs=("3",))
SOLVED = Task(type=TaskType.DEDUCTION, program=PLUS_ONE.program, inputs=("3",), outputs=("4",))
# About a second of pure computation per call (the static gate forbids sleeping).
SLOW = Task(
    type=TaskType.DEDUCTION,
    program=textwrap.dedent(
        """
        def f(n):
            total = 0
            for i in range(n):
                total += i % 7
            return total
        """
    ),
    inputs=("30000000",),
)
SLOW_OUTPUT = str(30_000_000 // 7 * 21 + sum(range(30_000_000 % 7)))  # sum of i % 7 for i < 3e7


def _job(job_id: str, task: Task = PLUS_ONE, answer: str | None = None) -> dict[str, object]:
    if answer is None:
        return Job(id=job_id, op=JobOp.VALIDATE, task=task).to_dict()
    return Job(id=job_id, op=JobOp.CHECK, task=SOLVED, answer=answer).to_dict()


def _auth(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_validate_and_check_through_the_client(service: ServiceProcess) -> None:
    async with ExecutorClient(service.url, token=TOKEN) as client:
        validation = await client.validate(PLUS_ONE)
        assert validation.ok and validation.outputs == ("4",)
        right, wrong = await client.check(SOLVED, "4"), await client.check(SOLVED, "5")
        garbage = await client.check(SOLVED, "[9]) or True or (0")
    assert (right.ok, right.correct) == (True, True)
    assert (wrong.ok, wrong.correct, wrong.error) == (True, False, None)
    assert garbage.correct is False and garbage.error is not None
    assert garbage.error.code is ErrorCode.BAD_ANSWER


async def test_concurrent_clients_each_get_their_own_results(service: ServiceProcess) -> None:
    async def one_client(n: int) -> dict[str, str | None]:
        jobs = [
            Job(id=f"c{n}-{k}", op=JobOp.CHECK, task=SOLVED, answer=str(4 if (n + k) % 2 else 5))
            for k in range(12)
        ]
        async with ExecutorClient(service.url, token=TOKEN, batch_jobs=5) as client:
            return {r.id: str(r.correct) async for r in client.map(jobs)}

    answers = await asyncio.gather(*(one_client(n) for n in range(4)))
    for n, results in enumerate(answers):
        assert results == {f"c{n}-{k}": str((n + k) % 2 == 1) for k in range(12)}


@pytest.mark.parametrize(
    ("headers", "status"),
    [({}, 401), (_auth("wrong"), 401), ({"Authorization": "Basic abc"}, 401), (_auth(), 202)],
    ids=["none", "wrong-token", "wrong-scheme", "right"],
)
def test_batches_need_the_bearer_token(service: ServiceProcess, headers: dict[str, str], status: int) -> None:
    reply = httpx.post(f"{service.url}/v1/batches", json={"jobs": [_job("a")]}, headers=headers)
    assert reply.status_code == status, reply.text
    assert httpx.get(f"{service.url}/healthz").status_code == 200  # health stays open


MALFORMED = [
    pytest.param(b"{not json", 422, "JSON", id="not-json"),
    pytest.param(b'{"jobs": []}', 422, "at least 1", id="no-jobs"),
    pytest.param(b'{"jobs": [{"id": "a", "op": "run", "task": {}}]}', 422, "op", id="unknown-op"),
    pytest.param(
        b'{"jobs": [{"id": "a", "op": "check", "task": {"type": "deduction", "program": "def f(x):\\n'
        b'    return x", "inputs": ["1"], "outputs": ["1"]}}]}',
        422,
        "needs a string 'answer'",
        id="check-without-answer",
    ),
    pytest.param(
        b'{"jobs": [{"id": "a", "op": "validate", "task": {"type": "deduction"}}]}',
        422,
        "task",
        id="bad-task",
    ),
    pytest.param(
        b'{"jobs": [{"id": "a", "op": "validate", "task": {}, "x": 1}]}', 422, "x", id="extra-field"
    ),
    pytest.param(b"x" * (300 * 1024), 413, "larger than", id="body-too-large"),
]


@pytest.mark.parametrize(("body", "status", "says"), MALFORMED)
def test_malformed_requests_get_a_clear_4xx(
    service: ServiceProcess, body: bytes, status: int, says: str
) -> None:
    reply = httpx.post(
        f"{service.url}/v1/batches", content=body, headers={**_auth(), "Content-Type": "application/json"}
    )
    assert reply.status_code == status, reply.text
    assert says in reply.text


def test_duplicate_ids_and_oversized_batches_are_refused(service: ServiceProcess) -> None:
    twice = httpx.post(f"{service.url}/v1/batches", json={"jobs": [_job("a"), _job("a")]}, headers=_auth())
    assert twice.status_code == 422 and "unique" in twice.text
    many = {"jobs": [_job(f"j{k}") for k in range(65)]}
    assert httpx.post(f"{service.url}/v1/batches", json=many, headers=_auth()).status_code == 413


def test_chunked_body_over_the_limit_is_refused(service: ServiceProcess) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(40):
            yield b" " * 8192  # whitespace: valid JSON padding, 320 KiB in all, no Content-Length

    reply = httpx.post(f"{service.url}/v1/batches", content=chunks(), headers=_auth())
    assert reply.status_code == 413


def test_poll_results_and_metrics(service: ServiceProcess) -> None:
    jobs = {"jobs": [_job("v"), _job("c", answer="4"), _job("w", answer="5")]}
    accepted = httpx.post(f"{service.url}/v1/batches", json=jobs, headers=_auth())
    assert accepted.status_code == 202 and accepted.json()["size"] == 3
    batch_url = f"{service.url}/v1/batches/{accepted.json()['batch_id']}"
    seen: list[dict[str, object]] = []
    for _ in range(20):
        status = httpx.get(batch_url, params={"after": len(seen), "wait_s": 5}, headers=_auth()).json()
        seen += status["results"]
        if status["complete"]:
            break
    by_id = {r["id"]: r for r in seen}
    assert by_id["v"]["outputs"] == ["4"] and by_id["c"]["correct"] is True and by_id["w"]["correct"] is False
    assert httpx.get(f"{batch_url}-nope", headers=_auth()).status_code == 404
    metrics = httpx.get(f"{service.url}/metrics").text
    assert 'azr_executor_jobs_total{op="check",outcome="correct",type="deduction"}' in metrics
    assert "azr_executor_job_latency_seconds_bucket" in metrics


def _validated(service: ServiceProcess) -> float:
    """Validations the service finished so far (from its metrics)."""
    for line in httpx.get(f"{service.url}/metrics").text.splitlines():
        if line.startswith('azr_executor_jobs_total{op="validate",outcome="valid",type="deduction"}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_a_streaming_client_that_leaves_takes_its_jobs_with_it(service: ServiceProcess) -> None:
    before = _validated(service)
    body = {"jobs": [_job(f"s{k}", SLOW) for k in range(6)]}
    with httpx.stream(
        "POST", f"{service.url}/v1/batches", params={"stream": "true"}, json=body, headers=_auth()
    ):
        pass  # leave as soon as the stream has started
    for _ in range(100):
        if httpx.get(f"{service.url}/healthz").json()["pending_jobs"] == 0:
            break
        time.sleep(0.1)
    assert httpx.get(f"{service.url}/healthz").json()["pending_jobs"] == 0
    assert _validated(service) - before < 6, "the abandoned jobs ran to the end"


def test_full_queue_answers_429_with_retry_after() -> None:
    service = ServiceProcess(free_port(), max_pending_jobs=2, max_batch_jobs=2, workers=1).start()
    try:
        slow = {"jobs": [_job("s1", SLOW), _job("s2", SLOW)]}
        assert httpx.post(f"{service.url}/v1/batches", json=slow).status_code == 202
        refused = httpx.post(f"{service.url}/v1/batches", json={"jobs": [_job("x")]})
        assert refused.status_code == 429
        assert refused.headers["Retry-After"].isdigit()

        async def patient() -> str | None:  # the client waits its turn instead of failing
            async with ExecutorClient(service.url, attempts=8, backoff_s=0.3) as client:
                result = await client.validate(PLUS_ONE)
                return result.outputs[0] if result.outputs else None

        assert asyncio.run(patient()) == "4"
    finally:
        service.stop()


def test_restart_while_a_client_waits_gives_the_right_verdict_or_infra_error() -> None:
    port = free_port()
    service = ServiceProcess(port).start()

    async def scenario() -> tuple[str | None, ErrorCode | None]:
        async with ExecutorClient(service.url, attempts=10, backoff_s=0.3, max_backoff_s=2.0) as client:
            waiting = asyncio.create_task(client.validate(SLOW))
            await asyncio.sleep(0.3)  # the job is running in the first process
            assert not waiting.done(), "the job finished before the restart; make SLOW slower"
            await asyncio.to_thread(service.stop, signal.SIGKILL)
            await asyncio.to_thread(service.start)
            result = await waiting
            return (result.outputs[0] if result.outputs else None), (
                result.error.code if result.error else None
            )

    try:
        output, error = asyncio.run(scenario())
    finally:
        service.stop()
    assert (output, error) == (SLOW_OUTPUT, None)


async def test_service_that_never_returns_gives_infra_error_not_a_verdict() -> None:
    async with ExecutorClient(f"http://127.0.0.1:{free_port()}", attempts=2, backoff_s=0.05) as client:
        judgement = await client.check(SOLVED, "4")
    assert judgement.ok is False and judgement.correct is None
    assert judgement.error is not None and judgement.error.code is ErrorCode.INFRA_ERROR


@pytest.mark.docker
def test_docker_backend_service_reports_pool_and_isolation() -> None:
    require_docker()
    service = ServiceProcess(free_port(), backend="docker", workers=1).start()
    try:
        health = httpx.get(f"{service.url}/healthz").json()
        assert health["backend"] == "docker" and health["isolation"]["full"] is True
        assert health["pool"]["containers"] == 2 and health["pool"]["target"] == 2
        reply = httpx.post(f"{service.url}/v1/batches", params={"stream": "true"}, json={"jobs": [_job("d")]})
        assert reply.status_code == 200 and '"outputs":["4"]' in reply.text
        assert "azr_executor_pool_containers 2.0" in httpx.get(f"{service.url}/metrics").text
    finally:
        service.stop()
