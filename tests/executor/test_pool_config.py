"""One pool configuration for the CLI, the executor service and the loop; nothing read behind it."""

from __future__ import annotations

from pathlib import Path

import pytest

from azr.executor.backends.docker import DockerBackend
from azr.executor.pool import PoolConfig, make_backend


def test_docker_options_reach_the_backend_and_the_environment_does_not(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("AZR_DOCKER_IMAGE", "AZR_DOCKER_RUNTIME", "AZR_DOCKER_SECCOMP_PROFILE"):
        monkeypatch.setenv(name, "from-the-environment")
    profile = tmp_path / "seccomp.json"
    profile.write_text("{}")
    config = PoolConfig(backend="docker", docker_image="sandbox:test", docker_runtime="runsc")
    backend = make_backend(config)
    assert isinstance(backend, DockerBackend)
    assert backend.image == "sandbox:test"
    plain = make_backend(PoolConfig(backend="docker"))
    assert isinstance(plain, DockerBackend) and plain.image != "from-the-environment"


@pytest.mark.parametrize("field", ["docker_image", "docker_runtime", "docker_seccomp_profile"])
def test_docker_options_with_another_backend_are_refused(field: str) -> None:
    with pytest.raises(ValueError, match=f"{field} only apply to the docker backend"):
        PoolConfig(backend="local", **{field: "x" if field != "docker_seccomp_profile" else Path("p")})
