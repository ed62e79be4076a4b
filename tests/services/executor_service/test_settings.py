"""The service's settings describe the same pool configuration the CLI builds."""

from __future__ import annotations

import pytest

from azr.executor.pool import PoolConfig
from azr.services.executor_service.settings import ExecutorServiceSettings


def test_service_settings_describe_the_same_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZR_EXECUTOR_DOCKER_RUNTIME", "runsc")
    settings = ExecutorServiceSettings(backend="docker", workers=3, gate=False)
    assert settings.pool_config() == PoolConfig(
        backend="docker", workers=3, gate=False, docker_runtime="runsc"
    )
    with pytest.raises(ValueError, match="only apply to the docker backend"):
        ExecutorServiceSettings(backend="local")
