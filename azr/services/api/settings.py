"""Settings of the REST API and dashboard, read once from the environment (prefix ``AZR_API_``)."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from azr.services.config import RedisConfig


class ApiSettings(BaseSettings):
    """One object for the whole API; every limit names its unit. Secrets have no default value."""

    model_config = SettingsConfigDict(env_prefix="AZR_API_", extra="forbid", frozen=True)

    redis_url: str = Field(
        default=RedisConfig().url, pattern=r"^(redis|rediss|unix)://", description="The run's Redis."
    )
    redis_prefix: str = Field(
        default=RedisConfig().prefix,
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="Key prefix of the run to serve (the self-play run's RedisConfig.prefix).",
    )
    token: SecretStr | None = Field(
        default=None,
        min_length=16,
        description="Bearer token required on writes (POST, DELETE), at least 16 characters; unset means "
        "writes are open (bind to 127.0.0.1 then).",
    )
    executor: Literal["pool", "service"] = Field(
        default="pool",
        description="Who validates seeds: an in-process executor pool, or the executor service over HTTP.",
    )
    executor_backend: Literal["local", "docker"] = Field(
        default="local", description="Backend of the in-process pool (executor='pool')."
    )
    executor_workers: int = Field(default=1, ge=1, le=64, description="Sandbox workers of the pool.")
    executor_allow_unisolated: bool = Field(
        default=False, description="Let the pool's local backend run with weaker isolation (development)."
    )
    executor_timeout_s: float = Field(
        default=5.0, gt=0, le=60, description="Wall-clock limit of one call of a seed's f in the pool, in s."
    )
    executor_url: str = Field(
        default="http://127.0.0.1:8100", description="Base URL of the executor service (executor='service')."
    )
    executor_token: SecretStr | None = Field(
        default=None, description="Bearer token of the executor service, when it requires one."
    )
    max_body_bytes: int = Field(
        default=256 * 1024, ge=1_024, le=64 * 1024**2, description="Largest request body (413 above)."
    )
    max_seeds_per_request: int = Field(
        default=32, ge=1, le=1_000, description="Most tasks in one POST /v1/seeds."
    )
    seed_rate_per_s: float = Field(
        default=2.0,
        gt=0,
        le=10_000,
        description="Seeds each client may submit per second, sustained (a token bucket per client "
        "address); seeds cost executor time.",
    )
    seed_burst: int = Field(
        default=32, ge=1, le=100_000, description="Seeds a client may submit at once before the rate applies."
    )
    refresh_s: float = Field(
        default=0.5,
        gt=0,
        le=60,
        description="How often the statistics follow the store (new metrics records, new tasks), in s.",
    )
    series_points: int = Field(
        default=600,
        ge=10,
        le=100_000,
        description="Most points per series in GET /v1/stats; longer histories are averaged in buckets.",
    )
    sse_heartbeat_s: float = Field(
        default=15.0, gt=0, le=600, description="Idle time after which the event stream sends a comment."
    )
    tasks_scan_limit: int = Field(
        default=4_096,
        ge=16,
        le=1_000_000,
        description="Most buffer entries one GET /v1/tasks page reads while filtering; a sparse filter "
        "may return a short page with a cursor to go on.",
    )

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.seed_burst < self.max_seeds_per_request:
            raise ValueError(
                f"seed_burst ({self.seed_burst}) is below max_seeds_per_request "
                f"({self.max_seeds_per_request}): a full request could never be admitted; raise seed_burst"
            )
        return self

    def redis_config(self) -> RedisConfig:
        # The API holds no experiences: whether Redis persists them is the self-play run's check.
        return RedisConfig(url=self.redis_url, prefix=self.redis_prefix, persistence="ignore")
