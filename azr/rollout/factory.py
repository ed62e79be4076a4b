"""Choosing a rollout engine by name (``RolloutConfig.engine``)."""

from __future__ import annotations

from pathlib import Path

from azr.rollout.config import RolloutConfig
from azr.rollout.sampler import Sampler


def make_sampler(model: str | Path, config: RolloutConfig) -> Sampler:
    """The configured engine holding ``model`` (a Hugging Face id or directory)."""
    if config.engine == "vllm":
        from azr.rollout.vllm import VLLMSampler

        return VLLMSampler(model, config)
    from azr.rollout.hf import HFSampler

    return HFSampler(model, config)
