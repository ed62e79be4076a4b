"""DeepSpeed ZeRO (stages 1-3): optimizer states, gradients and weights sharded over data-parallel ranks.

- The ZeRO config is built from ``TrainerConfig`` (``ds_config``): stage, gradient clipping, bf16/fp16 on
  GPU (DeepSpeed keeps float32 master weights in the optimizer) and float32 on the CPU.
- Gradient accumulation: the number of micro-batches per optimizer step varies with the token budget, so
  the engine does not count micro-steps. Each micro-batch announces whether it is the last one
  (``set_gradient_accumulation_boundary``) and losses are passed to ``backward`` unscaled
  (``scale_wrt_gas=False``): the caller already divided them by the mini-batch's token count.
- The optimizer is torch's AdamW handed to ``deepspeed.initialize`` (which wraps it in the ZeRO
  optimizer). DeepSpeed's CPU Adam does build on a CPU-only machine (its first use JIT-compiles it, about
  45 s), but it only pays off with optimizer offload, which this engine does not configure.
- Outside a launcher (one process: tests, the tiny preset) a single-rank process group is created: gloo on
  the CPU, NCCL on CUDA, on 127.0.0.1 with a free port. DeepSpeed picks its CPU accelerator by itself on a
  machine without a GPU.
- No rank moves the whole model to a device before DeepSpeed places it: the model is built on the CPU
  and ``deepspeed.initialize`` moves it; under ZeRO-3 it is partitioned as it loads (``zero.Init``
  through ``HfDeepSpeedConfig``), so a model larger than one device's memory loads at all.
- bf16 keeps float32 gradient accumulation (``data_types.grad_accum_dtype``): summing micro-batch
  gradients in bf16 loses the small ones.
- ZeRO-3 gathers the sharded weights to publish or save them (every rank takes part; rank 0 writes).
- The first DeepSpeed engine in a process JIT-builds DeepSpeed's shared-memory communication op on the
  CPU (about 30 s once; cached under ~/.cache/torch_extensions).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from transformers import PreTrainedModel

from azr.trainer.config import TrainerConfig
from azr.trainer.distributed import ensure_process_group, is_main
from azr.trainer.engines.base import MODEL_DIR, Engine, build_optimizer, build_scheduler, unique_state_dict
from azr.trainer.models import load_policy, record_dtype

log = logging.getLogger(__name__)

DEEPSPEED_DIR = "deepspeed"
TAG = "state"


def ds_config(cfg: TrainerConfig, compute_dtype: torch.dtype) -> dict[str, Any]:
    """The DeepSpeed config for ``cfg``; batch sizes are nominal since the trainer feeds micro-batches."""
    return {
        "train_micro_batch_size_per_gpu": 1,
        "gradient_accumulation_steps": 1,
        "gradient_clipping": cfg.grad_clip,
        "zero_optimization": {"stage": cfg.zero_stage, "overlap_comm": False, "contiguous_gradients": True},
        "bf16": {"enabled": compute_dtype == torch.bfloat16},
        "fp16": {"enabled": compute_dtype == torch.float16},
        "data_types": {"grad_accum_dtype": "fp32"},
        "steps_per_print": 2**31 - 1,  # the trainer reports its own metrics
        "wall_clock_breakdown": False,
    }


class DeepSpeedEngine(Engine):
    def __init__(self, cfg: TrainerConfig, device: torch.device, compute_dtype: torch.dtype) -> None:
        super().__init__(cfg, device, compute_dtype)
        import deepspeed

        ensure_process_group(device)
        deepspeed.init_distributed(dist_backend="nccl" if device.type == "cuda" else "gloo")
        config = ds_config(cfg, compute_dtype)
        model = load_policy(
            cfg.model,
            dtype=compute_dtype,
            gradient_checkpointing=cfg.gradient_checkpointing,
            device=None,
            zero3_config=config if cfg.zero_stage == 3 else None,
        )
        optimizer = build_optimizer([p for p in model.parameters() if p.requires_grad], cfg)
        self._engine, self.optimizer, _, self.scheduler = deepspeed.initialize(
            model=model,
            optimizer=optimizer,
            lr_scheduler=lambda opt: build_scheduler(opt, cfg.lr_warmup_steps),
            config=config,
        )
        self._model = model

    @property
    def module(self) -> PreTrainedModel:
        return self._model

    @property
    def forward_module(self) -> torch.nn.Module:
        return self._engine  # type: ignore[no-any-return]

    @property
    def lr(self) -> float:
        return float(self._engine.get_lr()[0])

    def begin_micro_batch(self, *, last: bool) -> None:
        self._engine.set_gradient_accumulation_boundary(last)

    def backward(self, loss: Tensor) -> None:
        self._engine.backward(loss, scale_wrt_gas=False)

    def step(self) -> float:
        self._engine.step()
        norm = self._engine.get_global_grad_norm()
        return float(norm) if norm is not None else float("nan")

    def state_dict_for_publishing(self, dtype: torch.dtype) -> dict[str, Tensor]:
        if self.cfg.zero_stage < 3:
            return unique_state_dict(self._model, dtype) if is_main() else {}
        import deepspeed

        with deepspeed.zero.GatheredParameters(list(self._model.parameters()), modifier_rank=None):
            return unique_state_dict(self._model, dtype) if is_main() else {}

    def save(self, directory: Path) -> None:
        record_dtype(self._model)
        if self.cfg.zero_stage < 3:
            if is_main():
                self._model.save_pretrained(directory / MODEL_DIR)
        else:
            state = self._engine._zero3_consolidated_16bit_state_dict()  # every rank gathers
            if is_main():
                self._model.save_pretrained(directory / MODEL_DIR, state_dict=state)
        self._engine.save_checkpoint(str(directory / DEEPSPEED_DIR), tag=TAG)

    def load(self, directory: Path) -> None:
        path, _ = self._engine.load_checkpoint(
            str(directory / DEEPSPEED_DIR), tag=TAG, load_optimizer_states=True, load_lr_scheduler_states=True
        )
        if path is None:
            raise FileNotFoundError(f"no DeepSpeed checkpoint under {directory / DEEPSPEED_DIR}")
