"""Configuration of the trainer: model, engine, optimizer, batching and checkpoints.

Defaults are the AZR paper's (Table 3): AdamW at a constant learning rate of 1e-6, gradient clipping at
1.0, one PPO epoch, mini-batches of 128 responses, sampling temperature 1.0. Values the paper does not
state are veRL's (the code AZR is built on) and say so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from azr.trainer.algorithms import AlgoConfig

EngineName = Literal["torch", "deepspeed"]
DeviceName = Literal["auto", "cpu", "cuda"]
DTypeName = Literal["auto", "float32", "bfloat16", "float16"]
OldLogprobs = Literal["recompute", "behaviour"]


@dataclass(frozen=True)
class TrainerConfig:
    """Everything the trainer needs to turn batches of experiences into optimizer steps."""

    model: str
    """Hugging Face model id or local model directory (the tiny preset passes ``build_tiny_model``'s path)."""
    device: DeviceName = "auto"
    """Where to train; "auto" picks CUDA when available, else the CPU."""
    dtype: DTypeName = "auto"
    """Compute dtype; "auto" is bfloat16 on CUDA and float32 on the CPU. Master weights stay float32."""
    gradient_checkpointing: bool = True
    """Recompute activations in the backward pass (trades compute for memory; veRL enables it)."""
    engine: EngineName = "torch"
    """"torch" (plain AdamW, one process) or "deepspeed" (ZeRO)."""
    zero_stage: int = 1
    """ZeRO stage for the DeepSpeed engine: 1 shards optimizer states, 2 also gradients, 3 also weights."""
    lr: float = 1e-6
    """AdamW learning rate (paper: 1e-6, constant)."""
    lr_warmup_steps: int = 0
    """Linear warm-up in optimizer steps before the constant rate (paper: none)."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW betas (paper: not stated; veRL and torch default)."""
    weight_decay: float = 0.01
    """AdamW decoupled weight decay (paper: not stated; veRL default 0.01)."""
    grad_clip: float = 1.0
    """Clip the global gradient norm to this value before each optimizer step (paper: 1.0)."""
    ppo_epochs: int = 1
    """Passes over each training batch (paper: 1)."""
    mini_batch_size: int = 128
    """Responses per optimizer step (paper: 128); a batch of 6 x 64 responses makes three steps."""
    micro_batch_size: int = 8
    """Most responses in one forward/backward pass; gradients accumulate exactly over micro-batches."""
    micro_batch_max_tokens: int | None = None
    """Most padded tokens (rows x longest row) in one forward/backward pass; None: no token budget."""
    shuffle: bool = True
    """Shuffle the responses (seeded) before cutting mini-batches, so each mixes all (role, type) groups."""
    old_logprobs: OldLogprobs = "behaviour"
    """The PPO ratio's denominator. "behaviour" (default): the rollout engine's log-probs, so the ratio
    corrects for the policy lag that ``max_staleness`` allows and for sampler/trainer numeric differences,
    and the clip bounds both; it also saves a forward pass. "recompute": log-probs recomputed by the
    trainer before the update, as veRL does for synchronous on-policy rollouts (the ratio starts at 1 and
    ignores the lag). Both report the behaviour-vs-trainer mismatch."""
    temperature: float = 1.0
    """Sampling temperature of the rollouts; log-probs are scored at the same temperature (paper: 1.0)."""
    seed: int = 0
    """Seeds the trainer's random number generators (shuffling)."""
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    """Advantage estimator and policy loss (TRR++, clip 0.2, entropy 0.001, no KL)."""
    checkpoint_dir: Path | None = None
    """Where checkpoints go; None: never checkpoint."""
    checkpoint_interval: int = 50
    """Save a checkpoint every this many training steps (with ``checkpoint_dir`` set)."""
    keep_checkpoints: int = 2
    """How many of the newest checkpoints to keep; older ones are deleted after a successful save."""

    def __post_init__(self) -> None:
        self._check_model_and_engine()
        self._check_optimizer()
        self._check_batching()
        if not self.temperature > 0:
            raise ValueError(
                f"temperature must be > 0 (the rollouts' sampling temperature), got {self.temperature}"
            )
        if self.checkpoint_interval < 1:
            raise ValueError(f"checkpoint_interval must be >= 1 step, got {self.checkpoint_interval}")
        if self.keep_checkpoints < 1:
            raise ValueError(f"keep_checkpoints must be >= 1, got {self.keep_checkpoints}")

    def _check_model_and_engine(self) -> None:
        if not self.model:
            raise ValueError("model is empty: give a Hugging Face model id or a local model directory")
        if self.engine not in ("torch", "deepspeed"):
            raise ValueError(f"engine must be 'torch' or 'deepspeed', got {self.engine!r}")
        if self.zero_stage not in (1, 2, 3):
            raise ValueError(f"zero_stage must be 1, 2 or 3, got {self.zero_stage}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {self.device!r}")
        if self.dtype not in ("auto", "float32", "bfloat16", "float16"):
            raise ValueError(f"dtype must be auto, float32, bfloat16 or float16, got {self.dtype!r}")

    def _check_optimizer(self) -> None:
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr} (the paper uses 1e-6)")
        if self.lr_warmup_steps < 0:
            raise ValueError(f"lr_warmup_steps must be >= 0, got {self.lr_warmup_steps}")
        if not all(0.0 <= b < 1.0 for b in self.betas) or len(self.betas) != 2:
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas}")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if not self.grad_clip > 0:
            raise ValueError(f"grad_clip must be > 0 (the paper clips at 1.0), got {self.grad_clip}")

    def _check_batching(self) -> None:
        if self.ppo_epochs < 1:
            raise ValueError(f"ppo_epochs must be >= 1, got {self.ppo_epochs}")
        if self.mini_batch_size < 1 or self.micro_batch_size < 1:
            raise ValueError(
                f"mini_batch_size ({self.mini_batch_size}) and micro_batch_size ({self.micro_batch_size}) "
                "must be >= 1"
            )
        if self.micro_batch_size > self.mini_batch_size:
            raise ValueError(
                f"micro_batch_size ({self.micro_batch_size}) must not exceed mini_batch_size "
                f"({self.mini_batch_size}): lower micro_batch_size"
            )
        if self.micro_batch_max_tokens is not None and self.micro_batch_max_tokens < 1:
            raise ValueError(
                f"micro_batch_max_tokens must be >= 1 or None, got {self.micro_batch_max_tokens}"
            )
        if self.old_logprobs not in ("recompute", "behaviour"):
            raise ValueError(f"old_logprobs must be 'recompute' or 'behaviour', got {self.old_logprobs!r}")
