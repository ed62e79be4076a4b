"""Settings of the executor service, read once from the environment (prefix ``AZR_EXECUTOR_``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Self

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from azr.executor.pool import PoolConfig


class ExecutorServiceSettings(BaseSettings):
    """One object for the whole service; every limit names its unit."""

    model_config = SettingsConfigDict(env_prefix="AZR_EXECUTOR_", extra="forbid", frozen=True)

    backend: Literal["local", "docker"] = Field(
        default="local", description="Where programs run: 'local' (namespaced processes) or 'docker'."
    )
    workers: int = Field(default=2, ge=1, le=256, description="Sandbox workers kept warm per hash-seed slot.")
    allow_unisolated: bool = Field(
        default=False, description="Let the local backend run with weaker isolation (development only)."
    )
    gate: bool = Field(default=True, description="Screen programs with the static gate before running them.")
    docker_image: str | None = Field(
        default=None, description="Docker backend: sandbox image (default: the one built from this checkout)."
    )
    docker_runtime: str | None = Field(
        default=None, description="Docker backend: OCI runtime such as 'runsc' (default: the engine's)."
    )
    docker_seccomp_profile: Path | None = Field(
        default=None, description="Docker backend: seccomp profile (JSON) instead of the engine's default."
    )
    token: SecretStr | None = Field(
        default=None,
        description="Bearer token required on every /v1 request; unset means no authentication "
        "(bind to 127.0.0.1 then).",
    )
    max_pending_jobs: int = Field(
        default=1_024,
        ge=1,
        le=1_000_000,
        description="Jobs admitted but not finished, across all batches; a batch that would exceed it "
        "is refused with 429 and Retry-After (backpressure).",
    )
    max_batch_jobs: int = Field(default=512, ge=1, le=100_000, description="Most jobs in one batch request.")
    max_body_bytes: int = Field(
        default=8 * 1024**2, ge=1_024, le=1024**3, description="Largest request body accepted (413 above)."
    )
    retry_after_s: int = Field(
        default=1, ge=1, le=3_600, description="Retry-After sent with 429/503 answers, in seconds."
    )
    result_ttl_s: float = Field(
        default=600.0,
        gt=0,
        le=86_400,
        description="How long results of a finished polled batch are kept for polling, in seconds.",
    )
    max_poll_wait_s: float = Field(
        default=30.0, gt=0, le=600, description="Longest a poll request may wait for results, in seconds."
    )

    def pool_config(self) -> PoolConfig:
        """The executor pool these settings describe (the same config the CLI builds)."""
        return PoolConfig(
            backend=self.backend,
            workers=self.workers,
            gate=self.gate,
            allow_unisolated=self.allow_unisolated,
            docker_image=self.docker_image,
            docker_runtime=self.docker_runtime,
            docker_seccomp_profile=self.docker_seccomp_profile,
        )

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.max_batch_jobs > self.max_pending_jobs:
            raise ValueError(
                f"max_batch_jobs ({self.max_batch_jobs}) exceeds max_pending_jobs ({self.max_pending_jobs}): "
                "such a batch could never be admitted; lower max_batch_jobs or raise max_pending_jobs"
            )
        self.pool_config()  # the pool's own checks (docker options with another backend, ...)
        return self
