"""Publishing the policy's weights to rollout actors, tagged with a policy version.

After every training step the trainer publishes a ``WeightSnapshot``: all weights at once, so an actor
updates in one call, never parameter by parameter. Two transports:

- ``DirectoryPublisher`` writes one flat safetensors file per version, ``policy-v00000042.safetensors``,
  first under a temporary name and then renamed into place (rename is atomic within a filesystem), so a
  reader sees a complete file or none. The version is in the name and in the file's metadata. Only the
  newest ``keep`` files are kept; the newest complete file is found by listing, so there is no pointer
  file to race with.
- ``InMemoryPublisher`` hands the CPU tensors themselves to actors in the same process.

How a Hugging Face actor loads a snapshot: ``load_into(model, snapshot.tensors())``.

How a vLLM actor loads one (not run here: vLLM needs a GPU): every vLLM worker reads the file itself and
feeds vLLM's own loader, in one RPC:

    def update(worker, path):            # runs inside each vLLM worker process
        weights = safetensors.torch.load_file(path, device="cuda")
        worker.model_runner.model.load_weights(weights=weights.items())
    llm.collective_rpc(update, args=(str(snapshot.path),))

``load_weights`` takes Hugging Face parameter names (as published here) and does vLLM's own fusing of
q/k/v and gate/up projections; tied LM heads are re-tied by vLLM from the config, which is why the
published state dict carries each shared tensor once.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torch import Tensor

log = logging.getLogger(__name__)

FILE_PATTERN = re.compile(r"^policy-v(\d{8})\.safetensors$")
VERSION_KEY = "policy_version"


@dataclass(frozen=True)
class WeightSnapshot:
    """The policy's full weights at one policy version: a file, or tensors in memory."""

    version: int
    path: Path | None = None
    """A flat safetensors file holding every tensor (``DirectoryPublisher``)."""
    state_dict: Mapping[str, Tensor] | None = None
    """The tensors themselves, on the CPU (``InMemoryPublisher``); treat as read-only."""

    def __post_init__(self) -> None:
        if (self.path is None) == (self.state_dict is None):
            raise ValueError("a WeightSnapshot holds either a path or a state_dict, exactly one of them")
        if self.version < 0:
            raise ValueError(f"policy versions start at 0, got {self.version}")

    def tensors(self, device: str | torch.device = "cpu") -> dict[str, Tensor]:
        """All weights, read in one call."""
        if self.state_dict is not None:
            return {k: v.to(device) for k, v in self.state_dict.items()}
        assert self.path is not None
        return load_file(self.path, device=str(device))


class DirectoryPublisher:
    """Atomic safetensors files in a directory, one per policy version."""

    def __init__(self, directory: Path, *, keep: int = 2) -> None:
        if keep < 1:
            raise ValueError(f"keep must be >= 1 so that the newest snapshot stays readable, got {keep}")
        self.directory = Path(directory)
        self.keep = keep
        self.directory.mkdir(parents=True, exist_ok=True)

    def publish(self, version: int, state_dict: Mapping[str, Tensor]) -> WeightSnapshot:
        final = self.directory / f"policy-v{version:08d}.safetensors"
        tmp = self.directory / f".{final.name}.{os.getpid()}.tmp"
        try:
            save_file(dict(state_dict), tmp, metadata={VERSION_KEY: str(version)})
            tmp.replace(final)
        finally:
            tmp.unlink(missing_ok=True)
        self._prune()
        return WeightSnapshot(version=version, path=final)

    def latest(self) -> WeightSnapshot | None:
        return latest_snapshot(self.directory)

    def _prune(self) -> None:
        for path in _snapshot_files(self.directory)[: -self.keep]:
            path.unlink(missing_ok=True)


class InMemoryPublisher:
    """The newest snapshot, kept as CPU tensors for actors in the same process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: WeightSnapshot | None = None

    def publish(self, version: int, state_dict: Mapping[str, Tensor]) -> WeightSnapshot:
        snapshot = WeightSnapshot(version=version, state_dict=dict(state_dict))
        with self._lock:
            self._latest = snapshot
        return snapshot

    def latest(self) -> WeightSnapshot | None:
        with self._lock:
            return self._latest


def latest_snapshot(directory: Path) -> WeightSnapshot | None:
    """The newest complete snapshot file in ``directory``, or None if there is none yet."""
    files = _snapshot_files(Path(directory))
    if not files:
        return None
    path = files[-1]
    with safe_open(path, framework="pt") as f:
        version = int((f.metadata() or {})[VERSION_KEY])
    return WeightSnapshot(version=version, path=path)


def _snapshot_files(directory: Path) -> list[Path]:
    """Snapshot files sorted by version (zero-padded names sort numerically)."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if FILE_PATTERN.match(p.name))


def read_model_dir(directory: Path) -> dict[str, Tensor]:
    """Every tensor of a Hugging Face model directory (one or several safetensors shards)."""
    shards = sorted(Path(directory).glob("*.safetensors"))
    if not shards:
        raise FileNotFoundError(f"no *.safetensors files in {directory}: not a saved model directory")
    tensors: dict[str, Tensor] = {}
    for shard in shards:
        tensors.update(load_file(shard))
    return tensors


def load_into(model: torch.nn.Module, tensors: Mapping[str, Tensor]) -> None:
    """Copy ``tensors`` into ``model`` in place; every weight must be covered, tied ones once.

    Raises ``ValueError`` naming the keys if a tensor is unknown to the model or a weight is missing.
    """
    result = model.load_state_dict(dict(tensors), strict=False)
    state = model.state_dict()
    given = {state[k].data_ptr() for k in tensors if k in state}
    missing = [k for k in result.missing_keys if state[k].data_ptr() not in given]
    if missing or result.unexpected_keys:
        raise ValueError(
            f"weights do not match the model: missing {missing[:5]}, unexpected {result.unexpected_keys[:5]}"
            " (was the snapshot published by a different model?)"
        )


class Publisher(Protocol):
    """Where the trainer publishes weights after each step."""

    def publish(self, version: int, state_dict: Mapping[str, Tensor]) -> WeightSnapshot: ...

    def latest(self) -> WeightSnapshot | None: ...
