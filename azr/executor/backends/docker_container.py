"""One hardened sandbox container running the supervisor, and the channel to it.

The container is created with every hardening option written out in ``container_options``; its
supervisor is fed over the container's attached stdin/stdout. Docker multiplexes stdout and stderr on the
attach socket (``tty=False``): every chunk carries an 8-byte header (stream number, three zero bytes, a
big-endian length). ``SandboxContainer`` demultiplexes that into a byte stream for the supervisor's
protocol frames and a small ring buffer of stderr kept for diagnostics only.

Threat model: everything read from the container is hostile. Frames are size-capped and validated by
``azr.executor.sandbox.protocol``; a reply that is late, malformed or missing raises ``ContainerError``,
after which the container must be destroyed (its channel can no longer be trusted). The parent buffers
at most one reply's worth of unrequested output and a few KiB of stderr. Nothing the program prints
reaches the parent: the supervisor sends the job's stdio to /dev/null.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import socket
import struct
from dataclasses import dataclass
from typing import Any

from azr.executor.errors import ErrorCode, ExecError
from azr.executor.sandbox import protocol
from azr.executor.sandbox.records import HashSeedSlot, RunOutcome, RunRequest

log = logging.getLogger(__name__)

SANDBOX_UID = 10001
"""The unprivileged user of the sandbox image (docker/sandbox.Dockerfile)."""

_OWNED_BY_SANDBOX = f"uid={SANDBOX_UID},gid={SANDBOX_UID}"
_MUX_HEADER = struct.Struct(">BxxxI")
_STDOUT, _STDERR = 1, 2
_STDERR_KEPT_BYTES = 8 * 1024
_MAX_REPLY_BYTES = protocol.MAX_FRAME_BYTES + 4
_REPLY_MARGIN_S = 5.0
"""Slack on top of the supervisor's own per-call limits before the parent gives up on a reply."""


@dataclass(frozen=True, slots=True)
class ContainerSpec:
    """How every sandbox container is started (see ``DockerConfig`` for what each limit means)."""

    image: str
    memory_bytes: int
    nano_cpus: int
    pids_limit: int
    tmpfs_bytes: int
    runtime: str | None
    seccomp_profile: str | None  # JSON text of a seccomp profile; None keeps the engine's default one
    labels: tuple[tuple[str, str], ...]


class ContainerError(Exception):
    """The container or its supervisor failed; the container must be destroyed.

    ``code`` is ``MEMORY_LIMIT`` when the engine reports the container was OOM-killed while running a
    job (the job's doing), else ``INFRA_ERROR``.
    """

    def __init__(self, message: str, code: ErrorCode = ErrorCode.INFRA_ERROR) -> None:
        super().__init__(message)
        self.error = ExecError(code, message)


def container_options(spec: ContainerSpec, slot: HashSeedSlot) -> dict[str, Any]:
    """Keyword arguments of ``DockerClient.containers.create`` for one sandbox of ``slot``."""
    import docker.types

    security_opt = ["no-new-privileges:true"]
    if spec.seccomp_profile is not None:
        security_opt.append(f"seccomp={spec.seccomp_profile}")
    return {
        "image": spec.image,
        "environment": {"PYTHONHASHSEED": str(protocol.SLOT_HASH_SEEDS[slot])},
        "user": f"{SANDBOX_UID}:{SANDBOX_UID}",
        "working_dir": "/tmp",
        "hostname": "sandbox",
        "labels": dict(spec.labels),
        # The supervisor is PID 1 (no --init): it kills and reaps everything a job leaves behind, and as
        # the namespace's init it cannot be killed by a job.
        "init": False,
        "network_mode": "none",  # no interface but loopback
        "read_only": True,
        # The only writable place, owned by the sandbox user (the supervisor empties it after every job);
        # noexec: nothing written there can be executed.
        "tmpfs": {"/tmp": f"rw,noexec,nosuid,nodev,size={spec.tmpfs_bytes},{_OWNED_BY_SANDBOX},mode=0700"},
        "ipc_mode": "none",  # no /dev/shm, no System V IPC shared with anyone
        "cap_drop": ["ALL"],
        "security_opt": security_opt,
        "privileged": False,
        "pids_limit": spec.pids_limit,
        "mem_limit": spec.memory_bytes,
        "memswap_limit": spec.memory_bytes,  # equal: no swap
        "nano_cpus": spec.nano_cpus,
        "oom_score_adj": 500,  # under memory pressure the host kills sandboxes before its own services
        "ulimits": [docker.types.Ulimit(name="core", soft=0, hard=0)],
        "runtime": spec.runtime,
        "log_config": docker.types.LogConfig(type="none"),  # stderr is read over the attach socket
        # detach=False with stdin_open sets StdinOnce: stdin closes when the attach connection does, so a
        # container whose parent died exits by itself (the next backend's orphan sweep removes it). Not
        # auto-removed: after a crash the engine's OOMKilled flag must still be readable to tell a memory
        # blow-up from an infrastructure fault.
        "stdin_open": True,
        "detach": False,
        "tty": False,
    }


class SandboxContainer:
    """A started container whose supervisor has said it is ready; runs one request at a time."""

    def __init__(self, client: Any, container_id: str, slot: HashSeedSlot) -> None:
        self.client = client
        self.id = container_id
        self.slot = slot
        self.jobs_done = 0
        self.host_pid: int | None = None  # the supervisor, as the host sees it (0 when it is not visible)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._frames = asyncio.StreamReader(limit=protocol.MAX_FRAME_BYTES + 16)
        self._stderr: collections.deque[bytes] = collections.deque()
        self._stderr_bytes = 0
        self._demux: asyncio.Task[None] | None = None
        # Bytes the supervisor may still send before the parent asks for more: a hello or one reply. A
        # supervisor that floods its stdout cannot make the parent buffer without bound.
        self._stdout_allowance = _MAX_REPLY_BYTES

    @classmethod
    async def start(
        cls, client: Any, spec: ContainerSpec, slot: HashSeedSlot, ready_timeout_s: float
    ) -> SandboxContainer:
        """Create, attach, start and wait for the supervisor's hello; a half-started container is removed."""
        created = await asyncio.to_thread(client.containers.create, **container_options(spec, slot))
        container = cls(client, created.id, slot)
        try:
            await container._attach()
            await asyncio.to_thread(client.api.start, created.id)
            hello = await asyncio.wait_for(protocol.read_frame_async(container._frames), ready_timeout_s)
            protocol.check_hello(hello, slot, require_unprivileged=True)
            container.host_pid = int((await asyncio.to_thread(container.inspect))["State"]["Pid"])
        except BaseException as exc:
            await container.destroy()
            if isinstance(exc, TimeoutError):
                note = container.stderr_note()
                raise ContainerError(
                    f"sandbox supervisor not ready within {ready_timeout_s} s{note}"
                ) from None
            if isinstance(exc, (EOFError, protocol.ProtocolError, OSError)):
                raise ContainerError(
                    f"sandbox supervisor failed to start: {exc}{container.stderr_note()}"
                ) from None
            raise
        return container

    @property
    def alive(self) -> bool:
        """False once the attach stream ended (the supervisor exited or the container was removed)."""
        return self._demux is not None and not self._demux.done()

    async def run(self, request: RunRequest) -> RunOutcome:
        """Send one run request and wait for its reply; a failure of the channel raises ``ContainerError``."""
        assert self._writer is not None, "started containers have a writer"
        deadline_s = protocol.reply_deadline_s(request)
        self._stdout_allowance = _MAX_REPLY_BYTES
        try:
            self._writer.write(protocol.encode_frame(protocol.encode_run(request)))
            await self._writer.drain()
            reply = await asyncio.wait_for(protocol.read_frame_async(self._frames), deadline_s)
            outcome = protocol.decode_outcome(reply, len(request.args))
        except TimeoutError:
            raise ContainerError(f"no reply from the sandbox within {deadline_s:.1f} s") from None
        except (EOFError, OSError, protocol.ProtocolError) as exc:
            raise await self._fault(exc) from None
        self.jobs_done += 1
        return outcome

    async def probe(self, read_paths: list[str], write_dirs: list[str]) -> dict[str, Any]:
        """Ask the supervisor what it can see from inside (used to report isolation truthfully)."""
        assert self._writer is not None, "started containers have a writer"
        message = {"op": "probe", "tcp_port": None, "read_paths": read_paths, "write_dirs": write_dirs}
        self._stdout_allowance = _MAX_REPLY_BYTES
        try:
            self._writer.write(protocol.encode_frame(message))
            await self._writer.drain()
            return await asyncio.wait_for(protocol.read_frame_async(self._frames), _REPLY_MARGIN_S)
        except (TimeoutError, EOFError, OSError, protocol.ProtocolError) as exc:
            raise ContainerError(f"sandbox probe failed: {exc!r}") from None

    def inspect(self) -> dict[str, Any]:
        """The engine's view of this container (blocking; call it in a thread)."""
        result: dict[str, Any] = self.client.api.inspect_container(self.id)
        return result

    async def destroy(self) -> None:
        """Kill and remove the container and wait until the engine no longer lists it."""
        import docker.errors

        if self._writer is not None:
            self._writer.close()
        if self._demux is not None:
            self._demux.cancel()
        for _ in range(50):
            try:
                await asyncio.to_thread(self.client.api.remove_container, self.id, force=True)
            except docker.errors.NotFound:
                return
            except docker.errors.APIError as exc:
                if exc.status_code != 409:  # 409: a removal is already in progress; wait for it
                    log.warning("could not remove sandbox container %s: %s", self.id[:12], exc)
                    return
            await asyncio.sleep(0.1)
        log.warning("sandbox container %s was still listed after removal", self.id[:12])

    def stderr_note(self) -> str:
        text = b"".join(self._stderr).decode("utf-8", "replace").strip()
        return f"; its stderr ends with: {text[-500:]}" if text else ""

    async def _attach(self) -> None:
        params = {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
        raw = await asyncio.to_thread(self.client.api.attach_socket, self.id, params)
        # Attached before the container starts, so no stream byte can sit in the HTTP client's buffer:
        # take the bare file descriptor over (detach it from the SDK's objects) and drive it with asyncio.
        sock = socket.socket(fileno=_inner_socket(raw).detach())
        sock.setblocking(False)
        self._reader, self._writer = await asyncio.open_connection(sock=sock, limit=2**16)
        self._demux = asyncio.create_task(self._demultiplex(self._reader), name=f"demux-{self.id[:12]}")

    async def _demultiplex(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                stream, size = _MUX_HEADER.unpack(await reader.readexactly(_MUX_HEADER.size))
                payload = await reader.readexactly(size)
                if stream == _STDOUT:
                    self._stdout_allowance -= len(payload)
                    if self._stdout_allowance < 0:
                        log.warning("sandbox %s sent more than one reply's worth; dropping it", self.id[:12])
                        return  # the channel ends here; the container is replaced
                    self._frames.feed_data(payload)
                elif stream == _STDERR:
                    self._keep_stderr(payload)
        except (asyncio.IncompleteReadError, OSError):
            pass
        finally:
            self._frames.feed_eof()

    def _keep_stderr(self, payload: bytes) -> None:
        self._stderr.append(payload)
        self._stderr_bytes += len(payload)
        while self._stderr_bytes > _STDERR_KEPT_BYTES and len(self._stderr) > 1:
            self._stderr_bytes -= len(self._stderr.popleft())

    async def _fault(self, exc: BaseException) -> ContainerError:
        """Why the channel broke: an OOM kill is the job's doing, anything else is infrastructure."""
        import docker.errors

        try:
            state = (await asyncio.to_thread(self.inspect)).get("State", {})
        except docker.errors.APIError:
            state = {}
        if state.get("OOMKilled"):
            return ContainerError(
                "the sandbox ran out of memory (container OOM-killed)", ErrorCode.MEMORY_LIMIT
            )
        return ContainerError(f"sandbox channel failed: {exc!r}{self.stderr_note()}")


def _inner_socket(raw: Any) -> socket.socket:
    """The ``socket.socket`` under what ``APIClient.attach_socket`` returns (a ``SocketIO`` on Unix)."""
    if isinstance(raw, socket.socket):
        return raw
    inner = getattr(raw, "_sock", None)
    if isinstance(inner, socket.socket):
        return inner
    raise ContainerError(
        f"cannot drive the attach socket of this Docker connection ({type(raw).__name__}); "
        "use a local engine socket (unix://) or plain tcp://"
    )
