"""The engine interface: what the trainer asks of plain torch and of DeepSpeed alike.

One optimizer step accumulates the gradients of several micro-batches:

    for i, micro in enumerate(micro_batches):
        engine.begin_micro_batch(last=i == len(micro_batches) - 1)
        logprobs, entropy = engine.forward_logprobs(micro.input_ids, micro.attention_mask, ...)
        engine.backward(loss)          # loss already divided by the mini-batch's token count
    grad_norm = engine.step()          # clip, update, schedule, zero the gradients

Losses are normalised by the caller (token-mean over the whole mini-batch), so engines never rescale them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from torch import Tensor
from transformers import PreTrainedModel

from azr.trainer.config import TrainerConfig
from azr.trainer.logprobs import sequence_logprobs

MODEL_DIR = "model"
"""Sub-directory of a checkpoint that holds the model in Hugging Face format."""


class Engine(ABC):
    """Owns the policy's parameters, optimizer and learning-rate schedule."""

    def __init__(self, cfg: TrainerConfig, device: torch.device, compute_dtype: torch.dtype) -> None:
        self.cfg = cfg
        self.device = device
        self.compute_dtype = compute_dtype

    @property
    @abstractmethod
    def module(self) -> PreTrainedModel:
        """The Hugging Face model being trained (unwrapped)."""

    @property
    @abstractmethod
    def forward_module(self) -> torch.nn.Module:
        """What forward passes go through (the model, or the engine that wraps it)."""

    @property
    @abstractmethod
    def lr(self) -> float:
        """The learning rate of the next optimizer step."""

    def forward_logprobs(
        self,
        input_ids: Tensor,
        attention_mask: Tensor,
        *,
        temperature: float,
        with_entropy: bool,
        score_mask: Tensor | None,
    ) -> tuple[Tensor, Tensor | None]:
        """(N, L) log-probs (and entropies) aligned with ``input_ids``; with ``score_mask`` (N, L) only
        the masked-in tokens are scored (the others are 0) and only they go through the LM head."""
        with self.autocast():
            return sequence_logprobs(
                self.forward_module,
                input_ids,
                attention_mask,
                temperature=temperature,
                with_entropy=with_entropy,
                score_mask=score_mask,
            )

    @contextmanager
    def autocast(self) -> Iterator[None]:
        """Mixed precision for engines that keep float32 weights; a no-op by default."""
        yield

    @abstractmethod
    def begin_micro_batch(self, *, last: bool) -> None:
        """Announce a micro-batch; ``last`` marks the one whose backward completes the accumulation."""

    @abstractmethod
    def backward(self, loss: Tensor) -> None:
        """Accumulate the gradients of ``loss`` (not rescaled)."""

    @abstractmethod
    def step(self) -> float:
        """Clip, apply one optimizer update, advance the schedule, zero the gradients.

        Returns the global gradient norm before clipping.
        """

    @abstractmethod
    def state_dict_for_publishing(self, dtype: torch.dtype) -> dict[str, Tensor]:
        """Full weights on the CPU in ``dtype``, tied duplicates dropped, for rollout actors.

        Every rank must call it (ZeRO-3 gathers the shards); only rank 0 gets the weights, the others an
        empty dict.
        """

    @abstractmethod
    def save(self, directory: Path) -> None:
        """Write the model (Hugging Face format, in ``directory / MODEL_DIR``) and the optimizer state.

        Every rank calls it; rank 0 writes the model, each rank its share of the optimizer state.
        """

    @abstractmethod
    def load(self, directory: Path) -> None:
        """Restore what ``save`` wrote: weights, optimizer and schedule."""


def build_optimizer(params: list[torch.nn.Parameter], cfg: TrainerConfig) -> torch.optim.AdamW:
    """AdamW with the configured rate, betas and decoupled weight decay (fused kernels on CUDA)."""
    on_cuda = bool(params) and params[0].is_cuda
    return torch.optim.AdamW(
        params,
        lr=cfg.lr,
        betas=cfg.betas,
        weight_decay=cfg.weight_decay,
        fused=on_cuda or None,
    )


def build_scheduler(optimizer: torch.optim.Optimizer, warmup_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up over ``warmup_steps`` optimizer steps, then constant (the paper: constant)."""

    def factor(step: int) -> float:
        return min(1.0, (step + 1) / warmup_steps) if warmup_steps > 0 else 1.0

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def unique_state_dict(module: torch.nn.Module, dtype: torch.dtype) -> dict[str, Tensor]:
    """``module``'s state dict on the CPU in ``dtype``, each shared tensor once (the first name wins).

    Tied weights (Qwen's small models tie the LM head to the embedding) appear under two names sharing one
    storage; safetensors refuses such aliases, and loaders re-tie them from the config.
    """
    out: dict[str, Tensor] = {}
    seen: set[int] = set()
    for name, tensor in module.state_dict().items():
        ptr = tensor.data_ptr()
        if ptr in seen:
            continue
        seen.add(ptr)
        value = tensor.detach()
        out[name] = value.to(device="cpu", dtype=dtype if value.is_floating_point() else value.dtype).clone()
    return out
