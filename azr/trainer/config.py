"""Configuration of the trainer: model, engine, optimizer, batching and checkpoints.

Defaults are the AZR paper's (Table 3): AdamW at a constant learning rate of 1e-6, gradient clipping at
1.0, one PPO epoch, mini-batches of 128 responses, sampling temperature 1.0. Values the paper does not
state are veRL's (the code AZR is built on) and say so. ``TrainerConfig``, ``AlgoConfig`` and
``LossConfig`` are frozen pydantic models: ``Literal`` fields and bounds are validated by pydantic, the
invariants that span several fields by a validator whose message says what to change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from azr.trainer.algorithms import AlgoConfig

EngineName = Literal["torch", "deepspeed"]
DeviceName = Literal["auto", "cpu", "cuda"]
DTypeName = Literal["auto", "float32", "bfloat16", "float16"]
OldLogprobs = Literal["recompute", "behaviour"]

DEFAULT_MICRO_BATCH_MAX_TOKENS = 16_384
"""Padded tokens per forward/backward pass by default: one paper-sized sequence (6,144 + 8,096 tokens)."""


class TrainerConfig(BaseModel):
    """Everything the trainer needs to turn batches of experiences into optimizer steps."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    model: str = Field(min_length=1)
    """Hugging Face model id or local model directory (the tiny preset passes ``build_tiny_model``'s path)."""
    device: DeviceName = "auto"
    """Where to train; "auto" picks CUDA when available, else the CPU."""
    dtype: DTypeName = "auto"
    """Compute dtype; "auto" is bfloat16 on CUDA and float32 on the CPU. Master weights stay float32."""
    gradient_checkpointing: bool = True
    """Recompute activations in the backward pass (trades compute for memory; veRL enables it)."""
    engine: EngineName = "torch"
    """"torch" (AdamW; DDP when launched on several ranks) or "deepspeed" (ZeRO)."""
    zero_stage: Literal[1, 2, 3] = 1
    """ZeRO stage for the DeepSpeed engine: 1 shards optimizer states, 2 also gradients, 3 also weights."""
    lr: float = Field(default=1e-6, gt=0.0)
    """AdamW learning rate (paper: 1e-6, constant)."""
    lr_warmup_steps: int = Field(default=0, ge=0)
    """Linear warm-up in optimizer steps before the constant rate (paper: none)."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW betas, each in [0, 1) (paper: not stated; veRL and torch default)."""
    weight_decay: float = Field(default=0.01, ge=0.0)
    """AdamW decoupled weight decay (paper: not stated; veRL default 0.01)."""
    grad_clip: float = Field(default=1.0, gt=0.0)
    """Clip the global gradient norm to this value before each optimizer step (paper: 1.0)."""
    ppo_epochs: int = Field(default=1, ge=1)
    """Passes over each training batch (paper: 1)."""
    mini_batch_size: int = Field(default=128, ge=1)
    """Responses per optimizer step over all ranks, demonstrations included (paper: 128); a batch of
    6 x 64 responses makes three steps."""
    micro_batch_size: int = Field(default=8, ge=1)
    """Most responses in one forward/backward pass; gradients accumulate exactly over micro-batches."""
    micro_batch_max_tokens: int | None = Field(default=DEFAULT_MICRO_BATCH_MAX_TOKENS, ge=1)
    """Most padded tokens (rows x longest row) in one forward/backward pass; a longer row gets a pass of
    its own; None: no token budget."""
    response_only_lm_head: bool = True
    """Send only the hidden states that predict response tokens through the LM head, so the (tokens, V)
    logits cover the response alone (with a 152k vocabulary the logits dominate activation memory)."""
    shuffle: bool = True
    """Shuffle the responses (seeded) before cutting mini-batches, so each mixes all (role, type) groups."""
    old_logprobs: OldLogprobs = "recompute"
    """The PPO ratio's denominator. "recompute" (default, veRL's choice): the trainer's own log-probs of
    the batch before the update, so the ratio starts at exactly 1 and measures only this step's change;
    the sampler's log-probs then feed the mismatch metric and, with ``algo.loss.tis_cap``, a truncated
    importance weight. "behaviour": the sampler's log-probs themselves (saves a forward pass; the clip
    then also bounds the sampler/trainer mismatch and the policy lag)."""
    temperature: float = Field(default=1.0, gt=0.0)
    """Sampling temperature of the rollouts; log-probs are scored at the same temperature (paper: 1.0).
    The learner checks the sampler's with ``Trainer.check_sampler_temperature``."""
    seed: int = 0
    """Seeds the trainer's random number generators (shuffling)."""
    algo: AlgoConfig = AlgoConfig()
    """Advantage estimator and policy loss (TRR++, clip 0.2, entropy 0.001, no KL)."""
    checkpoint_dir: Path | None = None
    """Where checkpoints go; None: never checkpoint."""
    checkpoint_interval: int = Field(default=50, ge=1)
    """Save a checkpoint every this many training steps (with ``checkpoint_dir`` set)."""
    keep_checkpoints: int = Field(default=2, ge=1)
    """How many of the newest checkpoints to keep; older ones are deleted after a successful save."""

    @model_validator(mode="after")
    def _check(self) -> TrainerConfig:
        if not all(0.0 <= b < 1.0 for b in self.betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas}: try (0.9, 0.999)")
        if self.micro_batch_size > self.mini_batch_size:
            raise ValueError(
                f"micro_batch_size ({self.micro_batch_size}) must not exceed mini_batch_size "
                f"({self.mini_batch_size}): lower micro_batch_size"
            )
        if self.algo.loss.tis_cap is not None and self.old_logprobs != "recompute":
            raise ValueError(
                "algo.loss.tis_cap weights by pi_old / pi_behaviour, which is 1 when the ratio's "
                "denominator is the behaviour log-probs: set old_logprobs='recompute' or tis_cap=None"
            )
        return self
