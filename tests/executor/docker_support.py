"""Shared by every test that runs the docker backend: skip without Docker, fail without it in CI.

``require_docker()`` skips the calling test when no engine is reachable, unless ``AZR_REQUIRE_DOCKER=1``
(set by CI), where a missing engine is a failure. It builds the sandbox image for this checkout once per
session (``docker/build-sandbox-image.sh`` is idempotent and takes a second or two when the base exists).
"""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

import pytest

from azr.executor.backends.docker import DockerBackend

REPO = Path(__file__).resolve().parents[2]


@functools.cache
def _docker_problem() -> str | None:
    """Why the docker backend cannot run here, or ``None`` when the engine is up and the image is built."""
    try:
        import docker.client
        import docker.errors
    except ImportError:
        return "the Docker SDK is not installed"
    try:
        client = docker.client.from_env()
        client.ping()
        client.close()
    except docker.errors.DockerException as exc:
        return f"no Docker engine reachable ({exc})"
    build = subprocess.run(
        ["bash", str(REPO / "docker" / "build-sandbox-image.sh")],
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    if build.returncode != 0:
        return f"building the sandbox image failed: {build.stderr[-2000:]}"
    return None


def require_docker() -> None:
    problem = _docker_problem()
    if problem is None:
        return
    if os.environ.get("AZR_REQUIRE_DOCKER") == "1":
        pytest.fail(f"AZR_REQUIRE_DOCKER=1 but the docker backend cannot run: {problem}")
    pytest.skip(f"docker backend unavailable: {problem}")


def docker_backend(workers: int = 1) -> DockerBackend:
    """A docker backend for the shared backend fixture; skips (or fails in CI) without Docker."""
    require_docker()
    return DockerBackend(workers)
