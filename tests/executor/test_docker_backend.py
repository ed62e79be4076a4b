"""Container-specific properties of the docker backend, against the real engine and the real image.

The backend runs whatever program it is given (the static gate lives above it), so the attacks here use
``os`` freely: each one targets what only the container provides (its supervisor, its tmpfs, its pids
limit, its lifetime) and checks three things: the job gets its error class, the pool keeps serving, and
no container is left behind once the backend is closed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from azr.executor.backends.base import HashSeedSlot, RunOutcome, RunRequest
from azr.executor.backends.docker import DockerBackend, DockerConfig
from azr.executor.backends.docker_engine import (
    LABEL,
    OWNER_LABEL,
    POOL_LABEL,
    DockerUnavailableError,
    owner_id,
)
from azr.executor.errors import ErrorCode
from azr.executor.limits import SandboxLimits
from azr.executor.sandbox.records import PRIMARY_SLOTS
from tests.executor.docker_support import REPO, require_docker

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

LIMITS = SandboxLimits(timeout_s=2.0, cpu_time_s=2)
IDENTITY = "def f(x):\n    return x"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def engine():  # the SDK client, for looking at containers from outside
    require_docker()
    import docker.client

    client = docker.client.from_env()
    yield client
    client.close()


@pytest.fixture
async def backend(engine) -> AsyncIterator[DockerBackend]:
    async with DockerBackend(1, LIMITS, config=DockerConfig(health_interval_s=0.5)) as started:
        yield started
    assert _containers(engine, started) == [], "aclose left containers behind"


def _containers(engine, backend: DockerBackend) -> list[Any]:
    found: list[Any] = engine.containers.list(all=True, filters={"label": f"{POOL_LABEL}={backend.pool_id}"})
    return found


def _request(program: str, *args: str, limits: SandboxLimits = LIMITS, slot=HashSeedSlot.A) -> RunRequest:
    return RunRequest(program=textwrap.dedent(program), args=args or ("0",), slot=slot, limits=limits)


async def _serves(backend: DockerBackend) -> None:
    """The pool answers a plain job correctly in both primary slots."""
    for slot in PRIMARY_SLOTS:
        outcome = await backend.run(_request(IDENTITY, "[1, 2]", slot=slot))
        assert outcome.error is None and outcome.calls[0].output == "[1, 2]", outcome


def _code(outcome: RunOutcome) -> ErrorCode | None:
    if outcome.error is not None:
        return outcome.error.code
    error = outcome.calls[0].error
    return None if error is None else error.code


async def test_containers_are_hardened(engine, backend: DockerBackend) -> None:
    containers = _containers(engine, backend)
    assert len(containers) == 2  # one per primary hash-seed slot; the others start on first use
    for container in containers:
        host = container.attrs["HostConfig"]
        assert host["NetworkMode"] == "none"
        assert host["ReadonlyRootfs"] is True
        assert host["CapDrop"] == ["ALL"] and not host["CapAdd"]
        assert "no-new-privileges:true" in host["SecurityOpt"]
        assert not host["Privileged"]
        assert host["PidsLimit"] == DockerConfig().pids_limit
        assert host["Memory"] > 0 and host["MemorySwap"] == host["Memory"]
        assert host["NanoCpus"] > 0
        assert "noexec" in host["Tmpfs"]["/tmp"]
        assert not host["Binds"] and not container.attrs["Mounts"]  # no volumes, no Docker socket
        assert container.attrs["Config"]["User"] == "10001:10001"
    assert backend.isolation.full, backend.isolation
    assert "seccomp filter active, no_new_privs on" in backend.isolation.details


async def test_jobs_run_under_seccomp_and_no_new_privs(backend: DockerBackend) -> None:
    """Read from inside a job, not from the engine's record: the kernel's view of the job process."""
    program = """
    def f(x):
        fields = dict(line.split(":\t", 1) for line in open("/proc/self/status").read().splitlines())
        return [fields["Seccomp"].strip(), fields["NoNewPrivs"].strip()]
    """
    outcome = await backend.run(_request(program))
    assert outcome.calls[0].output == "['2', '1']", outcome


async def test_slots_run_with_different_hash_seeds(backend: DockerBackend) -> None:
    program = "def f(x):\n    return hash('azr')"
    a = await backend.run(_request(program, slot=HashSeedSlot.A))
    b = await backend.run(_request(program, slot=HashSeedSlot.B))
    assert a.calls[0].output != b.calls[0].output
    j = await backend.run(_request(program, slot=HashSeedSlot.J))  # a slot started on its first request
    assert j.calls[0].output not in {a.calls[0].output, b.calls[0].output}


ATTACKS = [
    pytest.param(
        """
        def f(x):
            import os, signal
            for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
                os.kill(1, sig)
            return 'survived'
        """,
        LIMITS,
        None,
        id="kill-supervisor",
    ),
    pytest.param(
        """
        def f(x):
            n = 0
            while True:  # 512 KiB files until the 32 MiB tmpfs is full
                with open(f'fill{n}', 'wb') as out:
                    out.write(b'x' * 512 * 1024)
                n += 1
        """,
        LIMITS,
        ErrorCode.RUNTIME_ERROR,
        id="fill-tmpfs",
    ),
    pytest.param(
        """
        def f(x):
            import os, time
            while True:  # until the container's pids limit refuses the fork
                if os.fork() == 0:
                    time.sleep(60)
                    os._exit(0)
        """,
        SandboxLimits(timeout_s=5.0, cpu_time_s=5, processes=10_000),  # only the pids limit stops it
        ErrorCode.RUNTIME_ERROR,
        id="exhaust-pids",
    ),
    pytest.param(
        """
        def f(x):
            import os, time
            ready, tell = os.pipe()
            if os.fork() == 0:  # each process stays under its address-space limit; together they
                held = b'x' * (300 << 20)  # exceed the container's memory, and the kernel's OOM killer
                os.write(tell, b'1')  # ends the largest: the job itself
                time.sleep(60)
            os.read(ready, 1)
            mine = b'y' * (400 << 20)
            return len(mine)
        """,
        SandboxLimits(timeout_s=5.0, cpu_time_s=5, processes=8),
        ErrorCode.MEMORY_LIMIT,
        id="cgroup-oom",
    ),
]


@pytest.mark.parametrize(("program", "limits", "expected"), ATTACKS)
async def test_attack_gets_its_error_class_and_the_pool_recovers(
    backend: DockerBackend, program: str, limits: SandboxLimits, expected: ErrorCode | None
) -> None:
    outcome = await backend.run(_request(program, limits=limits))
    assert _code(outcome) == expected, outcome
    await _serves(backend)
    # What the job left in its scratch space is gone: a 1 MiB file fits again.
    write = "def f(x):\n    open('big', 'wb').write(b'y' * 1024 * 1023)\n    return 1"
    assert (await backend.run(_request(write))).calls[0].output == "1"


async def test_killed_container_is_infra_error_and_replaced(engine, backend: DockerBackend) -> None:
    busy = _request(
        "def f(x):\n    while True:\n        pass", limits=SandboxLimits(timeout_s=10, cpu_time_s=10)
    )
    running = asyncio.ensure_future(backend.run(busy))
    await asyncio.sleep(0.5)
    killed = _containers(engine, backend)
    for container in killed:  # from outside, as an operator or the OOM killer would
        container.kill()
    assert _code(await running) is ErrorCode.INFRA_ERROR
    await _serves(backend)
    assert backend.pool_stats()["containers"] == 2
    running_now = {c.id for c in _containers(engine, backend) if c.status == "running"}
    assert len(running_now) == 2 and not running_now & {c.id for c in killed}


async def test_container_is_recycled_after_its_job_quota(engine) -> None:
    async with DockerBackend(1, LIMITS, config=DockerConfig(jobs_per_container=2)) as backend:
        for n in range(5):
            outcome = await backend.run(_request(IDENTITY, str(n)))
            assert outcome.calls[0].output == str(n)
        assert backend.pool_stats()["recycled_total"] >= 2
    assert _containers(engine, backend) == []


def test_orphans_of_a_dead_process_are_removed(engine) -> None:
    script = textwrap.dedent(
        """
        import asyncio, sys
        from azr.executor.backends.docker import DockerBackend

        async def main():
            backend = DockerBackend(1)
            await backend.start()
            print(backend.pool_id, flush=True)
            await asyncio.sleep(300)

        asyncio.run(main())
        """
    )
    owner = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        pool_id = owner.stdout.readline().strip()
        assert pool_id, "the owner process did not start its pool"
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    orphans = engine.containers.list(all=True, filters={"label": f"{POOL_LABEL}={pool_id}"})
    assert orphans, "the dead owner's containers should still be listed before the sweep"
    live = engine.containers.create(  # owned by this (live) process: must survive the sweep
        DockerBackend().image,
        entrypoint=["python3", "-c", "import time; time.sleep(60)"],
        network_mode="none",
        labels={LABEL: "1", OWNER_LABEL: owner_id(os.getpid()), POOL_LABEL: "live"},
    )
    try:

        async def start_and_close() -> None:
            async with DockerBackend(1):
                pass

        asyncio.run(start_and_close())
        assert engine.containers.list(all=True, filters={"label": f"{POOL_LABEL}={pool_id}"}) == []
    finally:
        live.remove(force=True)


async def test_missing_image_says_how_to_build_it(engine) -> None:
    backend = DockerBackend(1, config=DockerConfig(image="azr-sandbox:no-such-tag"))
    with pytest.raises(DockerUnavailableError, match=r"build-sandbox-image\.sh"):
        await backend.start()
    await backend.aclose()


async def test_missing_engine_says_how_to_start_it() -> None:
    backend = DockerBackend(1, config=DockerConfig(base_url=f"unix:///tmp/no-docker-{time.time_ns()}.sock"))
    with pytest.raises(DockerUnavailableError, match="dockerd"):
        await backend.start()
    await backend.aclose()


@pytest.mark.parametrize("pause_s", [0.0, 0.05, 0.3])
async def test_closing_while_a_recycled_container_restarts_leaves_nothing(engine, pause_s: float) -> None:
    """A job that forces a recycle, then the pool closes while the replacement is being created."""
    backend = DockerBackend(1, LIMITS, config=DockerConfig(health_interval_s=0.5))
    await backend.start()
    try:
        outcome = await backend.run(_request("def f(x):\n    while True:\n        pass"))
        assert _code(outcome) is ErrorCode.TIMEOUT
        await asyncio.sleep(pause_s)
    finally:
        await backend.aclose()  # must not raise (an engine 409 here used to end a CLI run with exit 1)
    assert _containers(engine, backend) == [], "aclose left containers behind"
    time.sleep(1.0)  # a create still in flight in a worker thread would show up now
    assert _containers(engine, backend) == [], "a container was created after aclose returned"


@pytest.mark.usefixtures("engine")  # skips without an engine, as the other tests here do
async def test_a_slow_legal_job_makes_others_wait_not_fail() -> None:
    """One worker, a job that runs longer than the acquire timeout: the job behind it waits its turn."""
    config = DockerConfig(health_interval_s=0.5, acquire_timeout_s=0.5)
    async with DockerBackend(1, LIMITS, config=config) as backend:
        slow = _request("import time\ndef f(x):\n    time.sleep(1.5)\n    return x", "1")
        behind = [_request(IDENTITY, str(n)) for n in range(2, 4)]
        outcomes = await asyncio.gather(backend.run(slow), *(backend.run(r) for r in behind))
    assert [o.calls[0].output if o.calls else o.error for o in outcomes] == ["1", "2", "3"], outcomes
