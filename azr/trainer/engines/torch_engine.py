"""Plain torch: AdamW, float32 master weights with autocast to the compute dtype; DDP over several ranks.

Launched as one of several ranks (``WORLD_SIZE`` > 1, e.g. by torchrun) the model is wrapped in
``DistributedDataParallel``, which averages the gradients over ranks in the backward pass of the last
micro-batch of each optimizer step (the others accumulate locally, without communication). One process
creates no process group at all.

Keeping the weights in float32 and running the forward pass under autocast is what makes a learning rate
of 1e-6 work: a bfloat16 weight near 1.0 cannot move by less than ~4e-3, so pure-bf16 AdamW updates at the
paper's rate would round to nothing.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from torch import Tensor
from torch.nn.parallel import DistributedDataParallel
from transformers import PreTrainedModel

from azr.trainer.config import TrainerConfig
from azr.trainer.distributed import ensure_process_group, is_main, launched_with_ranks
from azr.trainer.engines.base import MODEL_DIR, Engine, build_optimizer, build_scheduler, unique_state_dict
from azr.trainer.models import load_policy, record_dtype
from azr.trainer.weights import load_into, read_model_dir

log = logging.getLogger(__name__)

OPTIMIZER_FILE = "optimizer.pt"


class TorchEngine(Engine):
    def __init__(self, cfg: TrainerConfig, device: torch.device, compute_dtype: torch.dtype) -> None:
        super().__init__(cfg, device, compute_dtype)
        self._model = load_policy(
            cfg.model, dtype=torch.float32, gradient_checkpointing=cfg.gradient_checkpointing, device=device
        )
        self._ddp: DistributedDataParallel | None = None
        if launched_with_ranks():
            ensure_process_group(device)
            # Buffers (rotary frequencies) are the same on every rank: no broadcast in each forward.
            self._ddp = DistributedDataParallel(
                self._model, device_ids=[device] if device.type == "cuda" else None, broadcast_buffers=False
            )
        self._params = [p for p in self._model.parameters() if p.requires_grad]
        self.optimizer = build_optimizer(self._params, cfg)
        self.scheduler = build_scheduler(self.optimizer, cfg.lr_warmup_steps)

    @property
    def module(self) -> PreTrainedModel:
        return self._model

    @property
    def forward_module(self) -> torch.nn.Module:
        return self._ddp if self._ddp is not None else self._model

    @property
    def lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    @contextmanager
    def autocast(self) -> Iterator[None]:
        if self.compute_dtype == torch.float32:
            yield
            return
        with torch.autocast(device_type=self.device.type, dtype=self.compute_dtype):
            yield

    def begin_micro_batch(self, *, last: bool) -> None:
        """Gradients accumulate in ``.grad``; under DDP only the last backward averages them over ranks."""
        if self._ddp is not None:
            self._ddp.require_backward_grad_sync = last  # what ``no_sync()`` toggles, read at forward time

    def backward(self, loss: Tensor) -> None:
        loss.backward()  # type: ignore[no-untyped-call]

    def step(self) -> float:
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self._params, self.cfg.grad_clip))
        if math.isfinite(grad_norm):
            self.optimizer.step()
            self.scheduler.step()
        else:
            # One bad batch must not turn every weight into NaN; the step is skipped and reported.
            log.warning("gradient norm is %s: optimizer step skipped", grad_norm)
        self.optimizer.zero_grad(set_to_none=True)
        return grad_norm

    def state_dict_for_publishing(self, dtype: torch.dtype) -> dict[str, Tensor]:
        return unique_state_dict(self._model, dtype) if is_main() else {}

    def save(self, directory: Path) -> None:
        if not is_main():  # the weights and the optimizer state are the same on every rank
            return
        record_dtype(self._model)
        self._model.save_pretrained(directory / MODEL_DIR)
        torch.save(
            {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict()},
            directory / OPTIMIZER_FILE,
        )

    def load(self, directory: Path) -> None:
        load_into(self._model, read_model_dir(directory / MODEL_DIR))
        state = torch.load(directory / OPTIMIZER_FILE, map_location=self.device, weights_only=True)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
