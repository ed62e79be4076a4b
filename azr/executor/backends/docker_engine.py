"""The docker backend's dealings with the engine itself: connecting, finding and removing our containers,
and measuring what isolation a container actually got.

Every container the backend starts carries ``LABEL``, ``OWNER_LABEL`` (which process owns it) and
``POOL_LABEL`` (which backend instance). Only containers whose owner process on this host is gone count as
orphans, so pools of other live processes on the same engine are never touched.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from pathlib import Path
from typing import Any

from azr.executor.backends.base import IsolationReport
from azr.executor.backends.docker_container import SandboxContainer
from azr.executor.errors import ErrorCode, ExecutorError
from azr.executor.sandbox.probe import describe_kernel_guards

log = logging.getLogger(__name__)

LABEL = "org.azr.sandbox"
"""Every container the docker backend starts carries this label (value "1")."""
OWNER_LABEL = "org.azr.sandbox.owner"
"""``host:pid:start-time`` of the process that started the container; a dead owner makes it an orphan."""
POOL_LABEL = "org.azr.sandbox.pool"
"""A random id per backend: ``aclose`` sweeps by it, catching containers whose creation was interrupted."""


class DockerUnavailableError(ExecutorError):
    """The engine or the image is missing; the message says what the operator should do."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.INFRA_ERROR, message)


def image_missing(image: str) -> str:
    return (
        f"sandbox image {image} not found: build it with `bash docker/build-sandbox-image.sh` "
        "(its tag follows the content of azr/executor, so rebuild after changing that package)"
    )


def connect(base_url: str | None, image: str) -> Any:
    """A client of a reachable engine that has ``image``; raises ``DockerUnavailableError`` (blocking)."""
    try:
        import docker.client
        import docker.errors
    except ImportError:
        raise DockerUnavailableError("the docker backend needs the Docker SDK: pip install docker") from None
    try:
        client = docker.client.DockerClient(base_url=base_url) if base_url else docker.client.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        raise DockerUnavailableError(
            f"cannot reach the Docker engine ({exc}): start dockerd (scripts/host-setup.sh does) "
            "or use the local backend"
        ) from None
    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        client.close()
        raise DockerUnavailableError(image_missing(image)) from None
    return client


def remove_by_label(client: Any, label: str) -> None:
    """Force-remove every container carrying ``label`` (``key=value``) (blocking).

    A container another removal is already taking away (the engine answers 409) counts as removed.
    """
    import docker.errors

    for container in client.containers.list(all=True, filters={"label": label}):
        try:
            container.remove(force=True)
        except docker.errors.NotFound:
            continue
        except docker.errors.APIError as exc:
            if exc.status_code != 409:
                raise


def remove_orphans(client: Any) -> None:
    """Remove our containers whose owning process on this host is gone, left by a crash (blocking)."""
    import docker.errors

    host = socket.gethostname()
    for container in client.containers.list(all=True, filters={"label": f"{LABEL}=1"}):
        owner = container.labels.get(OWNER_LABEL, "")
        owner_host, _, rest = owner.partition(":")
        pid_text = rest.partition(":")[0]
        if owner_host != host or not pid_text.isdigit() or owner_id(int(pid_text)) == owner:
            continue
        log.info("removing orphaned sandbox container %s (owner %s is gone)", container.short_id, owner)
        with contextlib.suppress(docker.errors.NotFound):
            container.remove(force=True)


def owner_id(pid: int) -> str | None:
    """``host:pid:start-time`` of a live process, ``None`` when it does not exist (pids get reused)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    start_ticks = stat.rpartition(")")[2].split()[19]  # field 22 of proc(5), counted after the command
    return f"{socket.gethostname()}:{pid}:{start_ticks}"


async def measure_isolation(container: SandboxContainer, *, custom_seccomp: bool) -> IsolationReport:
    """What the container actually got, from the engine's record and from inside (never assumed)."""
    info = await asyncio.to_thread(container.inspect)
    seen = await container.probe(
        read_paths=["/var/run/docker.sock", "/root"], write_dirs=["/", "/opt/azr", "/etc"]
    )
    host = info["HostConfig"]
    runtime = host.get("Runtime") or "runc"
    network = (
        host["NetworkMode"] == "none" and seen.get("interfaces") == ["lo"] and not seen.get("tcp_connected")
    )
    filesystem = (
        bool(host["ReadonlyRootfs"])
        and not info.get("Mounts")
        and not seen.get("readable")
        and not seen.get("writable")
    )
    details = (
        f"image {info['Config']['Image']}",
        f"runtime {runtime}",
        f"security options {', '.join(host.get('SecurityOpt') or [])}; seccomp profile "
        + ("custom" if custom_seccomp else "engine default"),
        describe_kernel_guards(seen),
        f"memory {host['Memory']} B, pids {host['PidsLimit']}, cpus {host['NanoCpus'] / 1e9:g}",
        "shared host kernel" if runtime == "runc" else "user-space kernel",
    )
    return IsolationReport(
        backend="docker",
        network=network,
        filesystem=filesystem,
        pid=host.get("PidMode", "") in ("", "private") and seen.get("pid") == 1,
        user=seen.get("uid") not in (0, None) and seen.get("cap_eff") == 0 and seen.get("no_new_privs") == 1,
        rlimits=True,  # the supervisor applies them to every job
        details=details,
    )
