"""Checkpoints that resume exactly: the same next loss, bit for bit on the CPU.

A checkpoint is a directory ``step-00000042/`` holding

    model/               the policy in Hugging Face format (loads with from_pretrained and in vLLM as is)
    optimizer.pt         torch engine: optimizer and schedule state
    deepspeed/           DeepSpeed engine: its own checkpoint (sharded optimizer states, schedule)
    trainer_state.json   step, policy version, experiences consumed
    rng.pt               python, numpy and torch random states, and the trainer's shuffling generator

It is written under a temporary name and renamed into place, so a crash never leaves a directory that
looks complete but is not; only the newest ``keep`` checkpoints are kept. With several ranks every rank
calls ``save_checkpoint`` (each writes its share of a sharded optimizer state); rank 0 alone creates,
completes, renames and prunes the directory, with barriers between the phases, so no rank writes into a
directory that is not there yet or is already renamed. The directory must be on a filesystem all ranks
see.
"""

from __future__ import annotations

import json
import random
import re
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase

from azr.trainer import distributed
from azr.trainer.engines.base import MODEL_DIR, Engine

CHECKPOINT_PATTERN = re.compile(r"^step-(\d{8})$")
STATE_FILE = "trainer_state.json"
RNG_FILE = "rng.pt"


@dataclass
class TrainerState:
    """Where training stands; saved with every checkpoint."""

    step: int = 0
    """Training steps done (one per ``train_step`` call)."""
    policy_version: int = 0
    """Version of the current weights: 0 is the initial model, +1 per training step."""
    consumed_experiences: int = 0
    """Experiences trained on so far."""
    optimizer_steps: int = 0
    """Optimizer updates so far (mini-batches x PPO epochs per training step)."""


def save_checkpoint(
    root: Path,
    engine: Engine,
    state: TrainerState,
    generator: torch.Generator,
    *,
    keep: int,
    tokenizer: PreTrainedTokenizerBase | None = None,
) -> Path:
    """Write a checkpoint of the current step under ``root``; returns its directory.

    With ``tokenizer`` its files go next to the model, so that ``model/`` is a complete model directory.
    """
    final = root / f"step-{state.step:08d}"
    tmp = root / f".{final.name}.tmp"
    main = distributed.is_main()
    if main:
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
    distributed.barrier()
    try:
        engine.save(tmp)
        distributed.barrier()
        if main:
            if tokenizer is not None:
                tokenizer.save_pretrained(tmp / MODEL_DIR)
            (tmp / STATE_FILE).write_text(json.dumps(asdict(state), indent=1))
            torch.save(rng_state(generator), tmp / RNG_FILE)
            if final.exists():
                shutil.rmtree(final)
            tmp.rename(final)
    finally:
        if main:
            shutil.rmtree(tmp, ignore_errors=True)
    if main:
        for old in list_checkpoints(root)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    distributed.barrier()
    return final


def load_checkpoint(directory: Path, engine: Engine, generator: torch.Generator) -> TrainerState:
    """Restore weights, optimizer, schedule, random states and position from ``directory``."""
    if not (directory / STATE_FILE).is_file():
        raise FileNotFoundError(f"{directory} is not a checkpoint: {STATE_FILE} is missing")
    engine.load(directory)
    state = TrainerState(**json.loads((directory / STATE_FILE).read_text()))
    set_rng_state(torch.load(directory / RNG_FILE, weights_only=True), generator)
    return state


def list_checkpoints(root: Path) -> list[Path]:
    """Complete checkpoints under ``root``, oldest first."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if CHECKPOINT_PATTERN.match(p.name) and p.is_dir())


def latest_checkpoint(root: Path) -> Path | None:
    found = list_checkpoints(root)
    return found[-1] if found else None


def rng_state(generator: torch.Generator) -> dict[str, Any]:
    """Every random state training depends on, as types ``torch.load(weights_only=True)`` accepts."""
    kind, keys, pos, has_gauss, gauss = cast(tuple[str, np.ndarray, int, int, float], np.random.get_state())
    return {
        "python": random.getstate(),
        "numpy": (kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "generator": generator.get_state(),
    }


def set_rng_state(state: dict[str, Any], generator: torch.Generator) -> None:
    version, internal, gauss_next = state["python"]
    random.setstate((version, tuple(internal), gauss_next))
    kind, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    generator.set_state(state["generator"])
