"""Evaluating a checkpoint end to end: find the model, start an executor, generate, score."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from azr.core.task import Task
from azr.eval.generation import EvalModel, Response
from azr.eval.scoring import EvalReport, evaluate
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


async def evaluate_checkpoint(
    checkpoint: Path,
    tasks: Sequence[Task],
    *,
    suite: str,
    roles: RolesConfig | None = None,
    prompt_format: PromptFormat = "chat",
    samples: int = 1,
    temperature: float = 0.0,
    max_new_tokens: int = 96,
    seed: int = 0,
    executor: PoolConfig | None = None,
    device: str = "cpu",
) -> EvalReport:
    """Score the solver of ``checkpoint`` on ``tasks``."""
    roles = roles or RolesConfig()
    directory = model_directory(checkpoint)
    model = EvalModel.load(directory, device=device)
    render = PromptRenderer(model.tokenizer, prompt_format)

    def generate(prompts: Sequence[Prompt], n: int) -> list[list[Response]]:
        ids = [render(p) for p in prompts]
        return model.generate(ids, n=n, temperature=temperature, max_new_tokens=max_new_tokens, seed=seed)

    async with ExecutorPool.from_config(executor or PoolConfig()) as pool:
        return await evaluate(
            tasks,
            generate,
            pool,
            roles,
            samples=samples,
            suite=suite,
            checkpoint=str(directory),
            temperature=temperature,
        )
