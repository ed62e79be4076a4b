"""The run directory: everything a self-play run leaves behind, in one place.

config.json      the resolved settings (``--resume`` reads them back)
metrics.jsonl    one JSON object per step (the keys of ``azr.selfplay.metrics`` and the learner's, and
                 ``eval/...`` where the policy was scored); a run that evaluates starts with the row of
                 step -1, the initial policy's scores
samples.jsonl    a few proposals and answers per step, with their rewards, for reading
tensorboard/     the same metrics as TensorBoard event files
checkpoints/     Hugging Face checkpoints with optimizer and training state
weights/         the newest published policy weights (what rollout workers load)
redis/           the private Redis of the run (AOF), when no Redis URL is given
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from torch.utils.tensorboard import SummaryWriter


class RunDirectory:
    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()
        self.config = self.root / "config.json"
        self.metrics = self.root / "metrics.jsonl"
        self.samples = self.root / "samples.jsonl"
        self.tensorboard = self.root / "tensorboard"
        self.checkpoints = self.root / "checkpoints"
        self.weights = self.root / "weights"
        self.redis = self.root / "redis"

    def create(self) -> None:
        for path in (self.root, self.checkpoints, self.weights):
            path.mkdir(parents=True, exist_ok=True)

    def write_config(self, data: Mapping[str, Any]) -> None:
        tmp = self.config.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        tmp.replace(self.config)

    def read_config(self) -> dict[str, Any]:
        try:
            data = json.loads(self.config.read_text())
        except FileNotFoundError:
            raise FileNotFoundError(
                f"{self.config} does not exist: nothing to resume in {self.root}"
            ) from None
        if not isinstance(data, dict):
            raise ValueError(f"{self.config} does not hold a settings object")
        return data

    def last_step(self) -> int | None:
        """The last step recorded in metrics.jsonl (None when no row was written)."""
        if not self.metrics.exists():
            return None
        last = None
        with self.metrics.open() as f:
            for line in f:
                if line.strip():
                    last = int(json.loads(line)["step"])
        return last


class StepWriter:
    """Appends each finished step to metrics.jsonl, samples.jsonl and TensorBoard."""

    def __init__(self, run_dir: RunDirectory) -> None:
        self._metrics = run_dir.metrics.open("a", encoding="utf-8")
        self._samples = run_dir.samples.open("a", encoding="utf-8")
        self._tensorboard = SummaryWriter(str(run_dir.tensorboard))

    def write(self, step: int, metrics: Mapping[str, float], samples: Sequence[Mapping[str, object]]) -> None:
        finite = {k: (v if math.isfinite(v) else None) for k, v in metrics.items()}
        self._metrics.write(json.dumps(finite, sort_keys=True) + "\n")
        self._metrics.flush()
        for sample in samples:
            self._samples.write(json.dumps(sample, ensure_ascii=False) + "\n")
        self._samples.flush()
        for key, value in metrics.items():
            if math.isfinite(value) and key != "step":
                self._tensorboard.add_scalar(key, value, global_step=step)
        self._tensorboard.flush()

    def close(self) -> None:
        self._metrics.close()
        self._samples.close()
        self._tensorboard.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
