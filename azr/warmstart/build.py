"""Building (or reusing) the warm-started tiny model: data, training, a cached model directory.

``build_warm_start(cache_dir, config, directory=...)`` returns a Hugging Face model directory that
``from_pretrained`` loads, like the tiny model it starts from. The build is cached under a fingerprint of
everything that determines it (the base model's build, the configuration, the examples themselves and the
held-out suite they exclude): a directory holding the same fingerprint is reused as is. A fresh build is
written to a temporary sibling and renamed into place, so concurrent builders never see a half-written
model.

Beside the model, ``tasks.jsonl`` lists the tasks its solver examples teach, in the order they were drawn:
a run from the warm start can seed its buffers with them (``warm_start_tasks``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import shutil
import tempfile
import time
from contextlib import AbstractAsyncContextManager
from dataclasses import asdict, dataclass
from importlib.resources import files
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, PreTrainedModel

from azr.core.task import Role, Task, TaskType
from azr.eval.suites import load_suite, load_tasks_file, task_line
from azr.executor.api import Executor
from azr.executor.pool import ExecutorPool, PoolConfig
from azr.selfplay.rendering import PromptRenderer
from azr.trainer.models import load_tokenizer
from azr.trainer.tiny import MARKER as TINY_MARKER
from azr.trainer.tiny import build_tiny_model, tiny_model_dir
from azr.warmstart.config import EXECUTOR_FIELDS, WarmStartConfig, recipe_settings
from azr.warmstart.data import DataReport, build_examples, data_fingerprint
from azr.warmstart.examples import Example
from azr.warmstart.train import SFTSchedule, tokenise, train

log = logging.getLogger(__name__)

MARKER = "azr-warm-start.json"
TASKS_FILE = "tasks.jsonl"
"""The warm start's solver tasks, as executor job lines, beside the model."""
RECIPE_PACKAGES = ("azr.warmstart", "azr.roles", "azr.proposer", "azr.solver", "azr.executor", "azr.core")
"""The code the warm start's examples come from (``recipe_fingerprint``)."""


@dataclass(frozen=True, slots=True)
class WarmStartResult:
    directory: Path
    reused: bool
    fingerprint: str
    report: DataReport | None
    losses: tuple[float, ...]
    seconds: float


def build_warm_start(
    cache_dir: Path,
    config: WarmStartConfig,
    *,
    directory: Path,
    force: bool = False,
    executor: AbstractAsyncContextManager[Executor] | None = None,
) -> WarmStartResult:
    """Build the warm-started tiny model in ``directory``, or reuse the one already there when its
    fingerprint matches; its untrained base is built (or reused) under ``cache_dir``. ``executor`` labels
    the data (entered here); by default, a pool on this host as ``config`` describes."""
    base = build_tiny_model(tiny_model_dir(cache_dir, config.tiny), config.tiny)
    started = time.perf_counter()
    recipe = recipe_fingerprint(config, base)
    built = _marker(directory)
    if (
        not force
        and built.get("recipe") == recipe
        and isinstance(fingerprint := built.get("fingerprint"), str)
        and (directory / TASKS_FILE).exists()
    ):
        log.info("reusing the warm start in %s (same recipe)", directory)
        return WarmStartResult(directory, True, fingerprint, None, (), time.perf_counter() - started)
    examples, report = draw_examples(config, executor)
    want = _fingerprint(config, base, data_fingerprint(examples))
    if not force and built.get("fingerprint") == want:
        log.info("reusing the warm start in %s (same data)", directory)
        _write_tasks(directory, examples)
        _write_marker(directory, built | {"recipe": recipe})  # the next call skips drawing the data
        return WarmStartResult(directory, True, want, report, (), time.perf_counter() - started)
    log.info("warm start: %d examples %s", report.examples, report.by_group)
    tokenizer = load_tokenizer(str(base))
    rows = tokenise(examples, tokenizer, PromptRenderer(tokenizer, config.prompt_format), config.max_tokens)
    torch.manual_seed(config.seed)
    model = AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32)
    if not isinstance(model, PreTrainedModel):
        raise TypeError(f"{base} did not load as a transformers model")
    schedule = SFTSchedule.of(config)
    losses = train(model, rows, int(tokenizer.pad_token_id), schedule)
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}-", dir=directory.parent))
    try:
        tmp.chmod(0o755)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        _write_tasks(tmp, examples)
        marker = {
            "fingerprint": want,
            "recipe": recipe,
            "config": config.model_dump(mode="json"),
            "data": asdict(report),
        }
        (tmp / MARKER).write_text(json.dumps(marker | {"losses": losses}, indent=1))
        if directory.exists():
            shutil.rmtree(directory)
        tmp.rename(directory)
    except OSError:
        if _marker(directory).get("fingerprint") != want:  # another builder renamed the same build first
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    seconds = time.perf_counter() - started
    log.info("built the warm start in %s (%.0f s)", directory, seconds)
    return WarmStartResult(directory, False, want, report, tuple(losses), seconds)


def warm_start_tasks(directory: Path, per_type: int) -> list[Task]:
    """The first ``per_type`` tasks of each type that the warm start in ``directory`` was taught to solve
    (fewer where it has fewer), without gold outputs: seed tasks from the program families, whose
    induction messages describe their programs exactly."""
    counts = dict.fromkeys(TaskType, 0)
    chosen = []
    for task in load_tasks_file(directory / TASKS_FILE):
        if counts[task.type] < per_type:
            counts[task.type] += 1
            chosen.append(task)
    return chosen


def _write_tasks(directory: Path, examples: list[Example]) -> None:
    tasks = {e.task.id: e.task for e in examples if e.role is Role.SOLVE}
    _replace_file(directory / TASKS_FILE, "".join(task_line(t) + "\n" for t in tasks.values()))


def draw_examples(
    config: WarmStartConfig, executor: AbstractAsyncContextManager[Executor] | None = None
) -> tuple[list[Example], DataReport]:
    """The warm start's examples (deterministic for ``config``), labelled by ``executor`` (entered here;
    by default a pool on this host as ``config`` describes), none from the held-out suite."""
    return asyncio.run(_examples(config, executor))


async def _examples(
    config: WarmStartConfig, given: AbstractAsyncContextManager[Executor] | None
) -> tuple[list[Example], DataReport]:
    pool_config = PoolConfig(
        backend=config.executor_backend,
        workers=config.executor_workers,
        allow_unisolated=config.allow_unisolated,
    )
    async with given or ExecutorPool.from_config(pool_config) as executor:
        return await build_examples(
            executor,
            config.roles,
            per_type=config.tasks_per_type,
            seed=config.seed,
            held_out=load_suite("heldout"),
            family_weights=config.family_weights,
        )


def _fingerprint(config: WarmStartConfig, base: Path, data: str) -> str:
    h = hashlib.sha256()
    base_marker = (base / TINY_MARKER).read_text() if (base / TINY_MARKER).exists() else str(base)
    # The prompts, the families' weights and the executor reach the model only through the examples'
    # text, which ``data`` covers: a run that changes its rewards (or its executor) reuses the same warm
    # start. The base model's marker covers its sizes.
    settings = config.model_dump_json(exclude={"tiny", "roles", "family_weights", *EXECUTOR_FIELDS})
    for part in (settings, base_marker, data, torch.__version__):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def recipe_fingerprint(config: WarmStartConfig, base: Path) -> str:
    """Hash of everything the examples are made from, known without drawing them: the configuration (the
    prompts' settings but not the reward's; the families' weights as they draw), the base model, the
    held-out suite and the source of the code that draws, writes, checks and labels examples. A match
    skips drawing the data (minutes of labelling); a mismatch falls back to comparing the data itself, so
    a change that leaves it alone reuses the model."""
    h = hashlib.sha256()
    h.update(_fingerprint(config, base, recipe_settings(config)).encode())
    h.update(files("azr.eval").joinpath("suites/heldout.jsonl").read_bytes())
    for package in RECIPE_PACKAGES:
        for source in sorted(Path(str(files(package))).rglob("*.py")):
            h.update(source.read_bytes())
    return h.hexdigest()


def _write_marker(directory: Path, marker: dict[str, object]) -> None:
    _replace_file(directory / MARKER, json.dumps(marker, indent=1))


def _replace_file(path: Path, text: str) -> None:
    """Write ``path`` through a hidden sibling renamed into place: a reader sees the old file or the new."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _marker(directory: Path) -> dict[str, object]:
    try:
        data = json.loads((directory / MARKER).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
