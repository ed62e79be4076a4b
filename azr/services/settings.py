"""The settings root of a self-play run: one typed object, built from a preset plus overrides.

``azr selfplay --preset tiny --set selfplay.batch_size=8 --set trainer.lr=1e-5`` resolves to a
``RunSettings``: the preset's values, then each ``--set`` (dotted path = value, the value read as JSON
when it parses, else as a string), validated as a whole. The resolved settings are written to the run
directory, and ``--resume`` reads them back from there.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from azr.eval.suites import BUILT_IN
from azr.roles.config import RolesConfig
from azr.rollout.config import RolloutConfig
from azr.selfplay.config import SelfPlayConfig
from azr.services.config import BufferConfig, MetricsConfig, RedisConfig, StreamConfig
from azr.trainer.algorithms import GROUPED_BY_PROMPT
from azr.trainer.config import TrainerConfig
from azr.warmstart.config import WarmStartConfig, recipe_settings

TINY_MODEL = "tiny"
"""The model name that stands for the tiny model the project builds itself (``azr.trainer.tiny``)."""
TINY_WARM_MODEL = "tiny-warm"
"""The tiny model warm-started on the project's own executor-labelled tasks (``azr.warmstart``), built with
the run's prompts and its ``warm_start`` settings, and cached (``RunSettings.warm_start_dir``)."""
WARM_MODEL_DIR = Path("models") / TINY_WARM_MODEL
"""Where, under the cache directory, the warm start of the tiny preset's recipe lives."""
TINY_WARM_TASKS_PER_TYPE = 1000
"""Tasks per type the tiny preset's warm start is built from, and so the seeds per type that take all of
them (fewer are left once the executor refuses some: 2,655 in all)."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ExecutorSettings(_Section):
    """Which executor checks tasks and answers: a pool in this cluster, or the executor service."""

    backend: Literal["local", "docker"] = Field(default="local", description="Sandbox backend of the pool.")
    workers: int = Field(default=2, ge=1, le=1024, description="Sandbox workers of the pool.")
    allow_unisolated: bool = Field(
        default=False,
        description="Let the local backend run without namespace isolation (development machines only).",
    )
    url: str | None = Field(
        default=None,
        pattern=r"^https?://",
        description="Base URL of an executor service (`azr executor serve`); set, it replaces the pool.",
    )
    token: SecretStr | None = Field(default=None, description="Bearer token of the executor service.")


class RaySettings(_Section):
    """Where the actors run."""

    address: str | None = Field(
        default=None,
        description='Ray cluster to join (e.g. "ray-head:6379" or "auto"); None starts one here.',
    )
    rollout_workers: int = Field(
        default=1, ge=1, le=1024, description="Rollout worker actors (one model each)."
    )
    num_cpus: int | None = Field(
        default=None, ge=1, description="CPUs of the Ray node started here (None: Ray counts them)."
    )
    min_nodes: int = Field(
        default=1,
        ge=1,
        le=4096,
        description="Live Ray nodes to wait for (up to five minutes) before the actors are placed over them.",
    )
    rollout_gpus: float = Field(default=0.0, ge=0, description="GPUs per rollout worker (vLLM: 1).")
    learner_gpus: float = Field(default=0.0, ge=0, description="GPUs of the learner.")


class RunSettings(_Section):
    """Everything a self-play run is configured by."""

    model: str = Field(
        default=TINY_MODEL,
        min_length=1,
        description='Hugging Face model id or local directory; "tiny" builds the project\'s tiny model '
        '(random weights), "tiny-warm" its warm start (``azr pretrain``).',
    )
    cache_dir: Path = Field(
        default=Path("~/.cache/azr").expanduser(),
        description="Where built models (the tiny one and its warm start) are cached between runs.",
    )
    warm_start: dict[str, Any] = Field(
        default_factory=dict,
        description='WarmStartConfig fields (steps, tasks_per_type, lr, ...) of the "tiny-warm" model; its '
        "prompts and executor are the run's.",
    )
    selfplay: SelfPlayConfig = Field(default_factory=SelfPlayConfig)
    roles: RolesConfig = Field(default_factory=RolesConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    trainer: dict[str, Any] = Field(
        default_factory=dict,
        description="TrainerConfig fields (lr, engine, mini_batch_size, ...); model and checkpoint_dir come "
        "from the run.",
    )
    executor: ExecutorSettings = Field(default_factory=ExecutorSettings)
    ray: RaySettings = Field(default_factory=RaySettings)
    redis: RedisConfig | None = Field(
        default=None, description="Redis to use; None starts a private redis-server in the run directory."
    )
    stream: StreamConfig = Field(default_factory=StreamConfig)
    buffer: BufferConfig = Field(default_factory=BufferConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)

    @model_validator(mode="after")
    def _check(self) -> Self:
        if "model" in self.trainer or "checkpoint_dir" in self.trainer:
            raise ValueError(
                "set the model with `model=` and not inside trainer; checkpoints go to the run dir"
            )
        config = self.trainer_config(Path("checkpoints"))  # validates the trainer section now, not mid-run
        self.warm_start_config()  # likewise the warm start's
        if config.temperature != self.rollout.temperature:
            raise ValueError(
                f"trainer.temperature ({config.temperature}) differs from rollout.temperature "
                f"({self.rollout.temperature}): the trainer scores log-probs at the sampling temperature"
            )
        if self.selfplay.max_staleness != self.stream.max_staleness:
            raise ValueError(
                f"stream.max_staleness ({self.stream.max_staleness}) differs from selfplay.max_staleness "
                f"({self.selfplay.max_staleness}): set selfplay.max_staleness only; the stream follows it"
            )
        if config.algo.estimator in GROUPED_BY_PROMPT:
            self._check_prompt_groups(config.algo.estimator)
        unknown = [name for name in self.selfplay.eval_suites if name not in BUILT_IN]
        if unknown:
            raise ValueError(
                f"selfplay.eval_suites names no built-in suite {', '.join(map(repr, unknown))}: choose from "
                f"{', '.join(BUILT_IN)}"
            )
        return self

    def _check_prompt_groups(self, estimator: str) -> None:
        """GRPO and RLOO compare the answers to one prompt: only a solver that answers each task more than
        once gives them anything to compare, and a proposal (one per prompt) would never be trained."""
        if self.selfplay.propose:
            raise ValueError(
                f"trainer.algo.estimator={estimator} compares answers to one prompt, but each proposer "
                "prompt gets one response, so the proposer would never learn: use trr++ or reinforce++, or "
                "train the solver alone (selfplay.propose=false)"
            )
        if self.selfplay.solve_samples < 2:
            raise ValueError(
                f"trainer.algo.estimator={estimator} compares answers to one prompt: set "
                "selfplay.solve_samples to 2 or more"
            )

    @model_validator(mode="before")
    @classmethod
    def _stream_follows_schedule(cls, data: Any) -> Any:
        """The staleness bound is set once, in ``selfplay``; the stream's drop rule follows it."""
        if isinstance(data, dict) and "max_staleness" in data.get("selfplay", {}):
            stream = dict(data.get("stream", {}))
            stream.setdefault("max_staleness", data["selfplay"]["max_staleness"])
            data = {**data, "stream": stream}
        return data

    def warm_start_config(self) -> WarmStartConfig:
        """The warm start this run's "tiny-warm" model is built by: its prompts are the run's prompts."""
        return WarmStartConfig(
            roles=self.roles,
            prompt_format=self.selfplay.prompt_format,
            executor_backend=self.executor.backend,
            executor_workers=self.executor.workers,
            allow_unisolated=self.executor.allow_unisolated,
            **self.warm_start,
        )

    def warm_start_dir(self) -> Path:
        """Where this run's "tiny-warm" model is cached: ``models/tiny-warm`` for the tiny preset's recipe,
        a sibling named for the recipe otherwise (``tiny-warm-<hash>``), so that a run or ``azr pretrain``
        with other warm-start settings or prompts never replaces the preset's build, nor another's."""
        recipe = recipe_settings(self.warm_start_config())
        if recipe == recipe_settings(resolve("tiny", {}).warm_start_config()):
            return self.cache_dir / WARM_MODEL_DIR
        digest = hashlib.sha256(recipe.encode()).hexdigest()[:12]
        return self.cache_dir / WARM_MODEL_DIR.with_name(f"{WARM_MODEL_DIR.name}-{digest}")

    def trainer_config(self, checkpoint_dir: Path, model_path: str | None = None) -> TrainerConfig:
        return TrainerConfig(model=model_path or self.model, checkpoint_dir=checkpoint_dir, **self.trainer)


PRESETS: dict[str, dict[str, Any]] = {
    "tiny": {
        "model": TINY_WARM_MODEL,
        "warm_start": {"tasks_per_type": TINY_WARM_TASKS_PER_TYPE, "steps": 2000},
        "selfplay": {
            "batch_size": 4,
            "seed_factor": 1,
            "max_seed_rounds": 1,
            "steps": 20,
            "samples_per_step": 1,
            "demonstrations": 16,
            "warm_start_seeds": TINY_WARM_TASKS_PER_TYPE,
        },
        "roles": {"wording": "compact", "n_learnability_rollouts": 4, "max_prompt_tokens": 1024},
        "rollout": {"max_new_tokens": 192, "device": "cpu"},
        "trainer": {
            "device": "cpu",
            "lr": 5e-5,
            "mini_batch_size": 24,
            "micro_batch_size": 4,
            "gradient_checkpointing": False,
            "checkpoint_interval": 5,
        },
        "executor": {"backend": "local", "workers": 2},
        "ray": {"rollout_workers": 1},
    },
    "qwen2.5-7b": {
        "model": "Qwen/Qwen2.5-7B",
        "rollout": {"engine": "vllm", "device": "cuda", "gpu_memory_utilization": 0.5},
        "trainer": {"engine": "deepspeed", "zero_stage": 2, "device": "cuda", "dtype": "bfloat16"},
        "executor": {"backend": "docker", "workers": 16},
        "ray": {"rollout_workers": 1, "rollout_gpus": 1, "learner_gpus": 1},
    },
    "coder-7b": {
        "model": "Qwen/Qwen2.5-Coder-7B",
        "rollout": {"engine": "vllm", "device": "cuda", "gpu_memory_utilization": 0.5},
        "trainer": {"engine": "deepspeed", "zero_stage": 2, "device": "cuda", "dtype": "bfloat16"},
        "executor": {"backend": "docker", "workers": 16},
        "ray": {"rollout_workers": 1, "rollout_gpus": 1, "learner_gpus": 1},
    },
}
"""Named starting points. ``tiny`` runs the whole loop on a 2-core CPU: the warm-started tiny model (built on
first use; 2,000 steps, a start short of what self-play reaches in 30 minutes, where 3,000 already copy the
prompt's values about as well as 30 minutes of self-play do), compact prompts, 192-token responses (an
induction proposal's ten inputs and message need about 170),
buffers seeded with every task the warm start was trained on (up to 1,000 per type; its 2,655), the
executor's gold answers to 16 buffer tasks per type imitated each step beside TRR++ (in 30 minutes:
held-out accuracy above the warm start's, where TRR++ alone ends below it; the seeds' induction messages,
unlike many a proposer's, describe their programs exactly), and a learning rate for a few million
parameters rather than billions: 5e-5, the rate the warm start's schedule ends on (two thirds of each
update imitate gold answers, which hold the policy where TRR++ alone at this rate collapses onto a few
rewarded answers; at 2e-5 a run gains a third as much in 10 minutes), and micro-batches of 4 responses (a
step's rows run from short solver answers to proposer prompts with six references, and a micro-batch of 8
pads more short rows to a long one's length: 6.6 s of training a step against 5.9 s). The Qwen presets are
the paper's setting (B=64, n=8, K=6, lr 1e-6, 8,096 response tokens, no demonstrations) on GPUs."""


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """``["selfplay.batch_size=8", "trainer.lr=1e-5"]`` as a nested dict; values are JSON where they parse."""
    out: dict[str, Any] = {}
    for item in items:
        path, sep, raw = item.partition("=")
        if not sep or not path or any(not part for part in path.split(".")):
            raise ValueError(f"--set takes KEY.PATH=VALUE, got {item!r}")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        node = out
        *parents, leaf = path.split(".")
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f"--set {item!r}: {part} is set to a value and cannot hold keys")
        node[leaf] = value
    return out


def merge(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Deep merge: mappings merge key by key, anything else replaces."""
    out = dict(base)
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def resolve(preset: str, overrides: Mapping[str, Any]) -> RunSettings:
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    return RunSettings.model_validate(merge(PRESETS[preset], overrides))


def dump(settings: RunSettings) -> dict[str, Any]:
    """The settings as JSON data for the run directory, without secrets: a token comes from the
    environment (``AZR_EXECUTOR_TOKEN``) each time a run starts or resumes, never from a file."""
    data = settings.model_dump(mode="json")
    data["executor"]["token"] = None
    return data
