"""Training engines behind one interface (``Engine``): plain torch, or DeepSpeed ZeRO."""

from __future__ import annotations

import torch

from azr.trainer.config import TrainerConfig
from azr.trainer.engines.base import Engine


def make_engine(cfg: TrainerConfig, device: torch.device, compute_dtype: torch.dtype) -> Engine:
    """The engine named by ``cfg.engine``; DeepSpeed is imported only when chosen."""
    if cfg.engine == "torch":
        from azr.trainer.engines.torch_engine import TorchEngine

        return TorchEngine(cfg, device, compute_dtype)
    if cfg.engine == "deepspeed":
        from azr.trainer.engines.deepspeed_engine import DeepSpeedEngine

        return DeepSpeedEngine(cfg, device, compute_dtype)
    raise ValueError(f"engine must be 'torch' or 'deepspeed', got {cfg.engine!r}")


__all__ = ["Engine", "make_engine"]
