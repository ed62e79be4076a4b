"""The sandbox machinery itself: wire framing, the supervisor's start rules, isolation reporting, refusal
without isolation, and replacement of a supervisor that dies mid-job (real processes throughout)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import struct
import subprocess
from pathlib import Path

import psutil
import pytest

from azr.executor.backends.base import RunOutcome, RunRequest
from azr.executor.backends.local import IsolationUnavailableError, LocalBackend
from azr.executor.errors import ErrorCode
from azr.executor.limits import SandboxLimits
from azr.executor.sandbox import launch, protocol

from .conftest import Harness, descendants, start_harness, stop_harness

# ------------------------------------------------------------------------------------------- framing


def _pipe_with(data: bytes) -> int:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, data)
    os.close(write_fd)
    return read_fd


def test_frame_round_trip_keeps_unicode_and_nesting() -> None:
    message = {"op": "run", "program": "def f(x):\n    return 'é' * x", "args": ["3"], "limits": {}}
    read_fd = _pipe_with(protocol.encode_frame(message) * 2)
    try:
        assert protocol.read_frame(read_fd) == message
        assert protocol.read_frame(read_fd) == message
        assert protocol.read_frame(read_fd) is None  # clean end of stream between frames
    finally:
        os.close(read_fd)


@pytest.mark.parametrize(
    ("data", "error"),
    [
        pytest.param(protocol.encode_frame({"op": "x"})[:-2], EOFError, id="truncated-body"),
        pytest.param(b"\x00\x00", EOFError, id="truncated-header"),
        pytest.param(
            struct.pack(">I", protocol.MAX_FRAME_BYTES + 1) + b"{}", protocol.ProtocolError, id="oversize"
        ),
        pytest.param(struct.pack(">I", 3) + b"{x}", protocol.ProtocolError, id="not-json"),
        pytest.param(struct.pack(">I", 2) + b"[]", protocol.ProtocolError, id="not-an-object"),
        pytest.param(struct.pack(">I", 2) + b"\xff\xfe", protocol.ProtocolError, id="not-utf8"),
    ],
)
def test_broken_frames_are_refused(data: bytes, error: type[Exception]) -> None:
    read_fd = _pipe_with(data)
    try:
        with pytest.raises(error):
            protocol.read_frame(read_fd)
    finally:
        os.close(read_fd)


def test_async_reader_refuses_oversize_and_truncation() -> None:
    async def read(data: bytes) -> protocol.JsonObject:
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        return await protocol.read_frame_async(reader)

    with pytest.raises(protocol.ProtocolError):
        asyncio.run(read(struct.pack(">I", protocol.MAX_FRAME_BYTES + 1)))
    with pytest.raises(EOFError):
        asyncio.run(read(protocol.encode_frame({"calls": []})[:-1]))


def test_encoding_an_oversize_message_fails_before_sending() -> None:
    with pytest.raises(protocol.ProtocolError):
        protocol.encode_frame({"program": "x" * (protocol.MAX_FRAME_BYTES + 1)})


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param({"calls": [{"output": "1"}], "error": None, "elapsed_ms": 1}, id="too-few-calls"),
        pytest.param(
            {"calls": [{"output": 1}, {"output": "2"}], "error": None, "elapsed_ms": 1}, id="int-output"
        ),
        pytest.param(
            {"calls": [{"output": "1", "error": None}] * 2, "error": None, "elapsed_ms": 1}, id="both"
        ),
        pytest.param(
            {"calls": [{"error": {"code": "great"}}] * 2, "error": None, "elapsed_ms": 1}, id="bad-code"
        ),
        pytest.param({"calls": [], "error": None}, id="no-elapsed"),
    ],
)
def test_malformed_replies_are_protocol_errors(reply: protocol.JsonObject) -> None:
    with pytest.raises(protocol.ProtocolError):
        protocol.decode_outcome(reply, expected_calls=2)


# ------------------------------------------------------------------------------------ supervisor start


_BOOTSTRAP = (
    "import sys; sys.path.insert(0, {root!r}); "
    "from azr.executor.sandbox.supervisor import main; sys.exit(main(['--scratch', {scratch!r}]))"
)


@pytest.mark.parametrize(
    ("flags", "env"),
    [
        pytest.param(("-s",), {}, id="no-hash-seed"),
        pytest.param(("-I",), {"PYTHONHASHSEED": "1"}, id="isolated-mode-ignores-the-seed"),
    ],
)
def test_supervisor_refuses_to_start_without_a_controlled_hash_seed(
    flags: tuple[str, ...], env: dict[str, str], tmp_path: Path
) -> None:
    code = _BOOTSTRAP.format(root=str(launch.source_root()), scratch=str(tmp_path))
    process = subprocess.run(
        [str(launch.python_executable()), *flags, "-c", code],
        check=False,
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert process.returncode == 2
    assert b"PYTHONHASHSEED" in process.stderr
    assert process.stdout == b""  # nothing ever reaches the protocol channel


def test_supervisor_exits_on_a_protocol_violation(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [
            str(launch.python_executable()),
            "-s",
            "-m",
            "azr.executor.sandbox.supervisor",
            "--scratch",
            str(tmp_path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={"PYTHONHASHSEED": "5", "PYTHONPATH": str(launch.source_root())},
    )
    assert process.stdout is not None and process.stdin is not None
    hello = protocol.read_frame(process.stdout.fileno())
    assert hello is not None and hello["hash_seed"] == "5"
    process.stdin.write(struct.pack(">I", protocol.MAX_FRAME_BYTES + 1))
    process.stdin.flush()
    assert process.wait(timeout=30) == 2


# ------------------------------------------------------------------------------------------ isolation


def test_local_isolation_is_probed_and_full(backend: Harness) -> None:
    if not isinstance(backend.backend, LocalBackend):
        pytest.skip("local backend property")
    report = backend.backend.isolation
    assert report.full, report
    assert report.backend == "local"
    assert any("readable host paths: []" in line for line in report.details)
    assert "no seccomp filter, no_new_privs on" in report.details  # bubblewrap sets no_new_privs


def test_refuses_to_start_without_isolation(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap to be found
    with pytest.raises(IsolationUnavailableError, match="bubblewrap"):
        asyncio.run(LocalBackend.create(workers=1))


def test_unisolated_start_only_when_allowed_and_loudly(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    caplog.set_level(logging.WARNING, logger="azr.executor.backends.local")
    harness = start_harness(lambda: LocalBackend(workers=1, allow_unisolated=True))
    try:
        report = harness.backend.isolation
        assert not report.full and not report.network and not report.pid
        assert "WITHOUT FULL ISOLATION" in caplog.text
        assert harness.run("def f(x):\n    return x * 2", ["21"]).calls[0].output == "42"
    finally:
        stop_harness(harness)


# -------------------------------------------------------------------------------------- replacement


def _supervisor_host_pid(harness: Harness) -> int:
    launched = harness.backend.process_ids()[0]  # type: ignore[attr-defined]
    for process in [psutil.Process(launched), *descendants(launched)]:
        if "azr.executor.sandbox.supervisor" in process.cmdline():
            return int(process.pid)
    raise AssertionError("no supervisor process found")


def test_supervisor_killed_mid_job_gives_infra_error_then_recovers() -> None:
    harness = start_harness(lambda: LocalBackend(workers=1))
    try:
        victim = _supervisor_host_pid(harness)
        request = RunRequest(
            "def f(x):\n    while True:\n        pass", ("1",), limits=SandboxLimits(timeout_s=20)
        )

        async def kill_during_run() -> object:
            running = asyncio.create_task(harness.backend.run(request))
            await asyncio.sleep(0.5)
            os.kill(victim, signal.SIGKILL)
            return await running

        outcome = harness.loop.run_until_complete(kill_during_run())
        assert outcome.error is not None and outcome.error.code is ErrorCode.INFRA_ERROR  # type: ignore[attr-defined]
        after = harness.run("def f(x):\n    return x + 1", ["41"])
        assert after.calls[0].output == "42"
        assert not psutil.pid_exists(victim) or psutil.Process(victim).status() == psutil.STATUS_ZOMBIE
    finally:
        stop_harness(harness)


def test_aclose_leaves_no_process() -> None:
    harness = start_harness(lambda: LocalBackend(workers=2))
    launched = harness.backend.process_ids()  # type: ignore[attr-defined]
    below = [p.pid for pid in launched for p in descendants(pid)]
    # under each sandbox: the supervisor, its zygote and one job process forked in advance
    assert len(launched) == 4 and len(below) == 12
    stop_harness(harness)
    assert not [pid for pid in (*launched, *below) if psutil.pid_exists(pid)]


# ------------------------------------------------------------------------------------------ scheduling

SLOW = RunRequest("import time\ndef f(x):\n    time.sleep(1.5)\n    return 'slow'", ("1",))
FAST = RunRequest("def f(x):\n    return 'fast'", ("1",))


def test_cancelled_request_does_not_hand_its_reply_to_the_next() -> None:
    harness = start_harness(lambda: LocalBackend(workers=1))
    try:

        async def cancel_then_run() -> RunOutcome:
            slow = asyncio.create_task(harness.backend.run(SLOW))
            await asyncio.sleep(0.3)
            slow.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await slow
            return await harness.backend.run(FAST)

        assert harness.loop.run_until_complete(cancel_then_run()).calls[0].output == "'fast'"
    finally:
        stop_harness(harness)


def test_a_slow_job_does_not_hold_up_others() -> None:
    harness = start_harness(lambda: LocalBackend(workers=2))
    try:

        async def first_done() -> RunOutcome:
            slow = asyncio.create_task(harness.backend.run(SLOW))
            await asyncio.sleep(0.1)
            fast = asyncio.create_task(harness.backend.run(FAST))
            done, _ = await asyncio.wait({slow, fast}, return_when=asyncio.FIRST_COMPLETED)
            await asyncio.gather(slow, fast)
            return done.pop().result()

        assert harness.loop.run_until_complete(first_done()).calls[0].output == "'fast'"
    finally:
        stop_harness(harness)
