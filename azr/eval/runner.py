"""Evaluating a checkpoint end to end: find the model, start an executor, generate, score (the solver or
the proposer)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from azr.core.task import Task
from azr.eval.generation import EvalModel, Response
from azr.eval.proposals import ProposerReport, evaluate_proposer
from azr.eval.scoring import EvalReport, Generate, evaluate
from azr.executor.pool import ExecutorPool, PoolConfig
from azr.roles.config import RolesConfig
from azr.roles.templates import Prompt
from azr.selfplay.config import PromptFormat
from azr.selfplay.rendering import PromptRenderer

_STEP_DIR = re.compile(r"^step-(\d{8})$")


def model_directory(path: Path) -> Path:
    """The Hugging Face model directory behind ``path``: a model directory itself, a training checkpoint
    (``step-N/model``), or a run directory (its newest checkpoint)."""
    # A run directory holds a config.json too (the run's settings): its checkpoints decide first.
    if (path / "checkpoints").is_dir():
        return model_directory(path / "checkpoints")
    if (path / "config.json").is_file():
        return path
    if (path / "model" / "config.json").is_file():
        return path / "model"
    steps = sorted(p for p in path.glob("step-*") if _STEP_DIR.match(p.name) and (p / "model").is_dir())
    if steps:
        return steps[-1] / "model"
    raise FileNotFoundError(f"{path} is neither a model directory, a checkpoint nor a run directory")


@dataclass(frozen=True, slots=True)
class Sampling:
    """How a checkpoint answers: responses per prompt, temperature, length limit, prompt format, seed."""

    samples: int = 1
    temperature: float = 0.0
    max_new_tokens: int = 96
    seed: int = 0
    prompt_format: PromptFormat = "chat"


@dataclass(frozen=True, slots=True)
class LoadedPolicy:
    """A checkpoint's model behind the two callables the scorers take."""

    directory: Path
    generate: Generate
    count_tokens: Callable[[Prompt], int]

    @classmethod
    def load(cls, checkpoint: Path, sampling: Sampling, *, device: str = "cpu") -> LoadedPolicy:
        directory = model_directory(checkpoint)
        model = EvalModel.load(directory, device=device)
        render = PromptRenderer(model.tokenizer, sampling.prompt_format)

        def generate(prompts: Sequence[Prompt], n: int) -> list[list[Response]]:
            return model.generate(
                [render(p) for p in prompts],
                n=n,
                temperature=sampling.temperature,
                max_new_tokens=sampling.max_new_tokens,
                seed=sampling.seed,
            )

        return cls(directory, generate, lambda prompt: len(render(prompt)))


@asynccontextmanager
async def _policy_and_executor(
    checkpoint: Path, sampling: Sampling, executor: PoolConfig | None, device: str
) -> AsyncIterator[tuple[LoadedPolicy, ExecutorPool]]:
    """The checkpoint loaded for ``sampling``, and an executor pool for the scorer, closed afterwards."""
    policy = LoadedPolicy.load(checkpoint, sampling, device=device)
    async with ExecutorPool.from_config(executor or PoolConfig()) as pool:
        yield policy, pool


async def evaluate_checkpoint(
    checkpoint: Path,
    tasks: Sequence[Task],
    *,
    suite: str,
    roles: RolesConfig | None = None,
    sampling: Sampling | None = None,
    executor: PoolConfig | None = None,
    device: str = "cpu",
) -> EvalReport:
    """Score the solver of ``checkpoint`` on ``tasks``."""
    sampling = sampling or Sampling()
    async with _policy_and_executor(checkpoint, sampling, executor, device) as (policy, pool):
        return await evaluate(
            tasks,
            policy.generate,
            pool,
            roles or RolesConfig(),
            samples=sampling.samples,
            suite=suite,
            checkpoint=str(policy.directory),
            temperature=sampling.temperature,
        )


async def evaluate_proposer_checkpoint(
    checkpoint: Path,
    tasks: Sequence[Task],
    *,
    suite: str,
    roles: RolesConfig | None = None,
    sampling: Sampling | None = None,
    executor: PoolConfig | None = None,
    device: str = "cpu",
) -> ProposerReport:
    """Score the proposer of ``checkpoint`` on requests built from ``tasks`` (``azr.eval.proposals``)."""
    sampling = sampling or Sampling(temperature=1.0)
    async with _policy_and_executor(checkpoint, sampling, executor, device) as (policy, pool):
        return await evaluate_proposer(
            tasks,
            policy.generate,
            policy.count_tokens,
            pool,
            roles or RolesConfig(),
            samples=sampling.samples,
            suite=suite,
            checkpoint=str(policy.directory),
            temperature=sampling.temperature,
            seed=sampling.seed,
        )
