"""Configuration of the rollout engines: how completions are sampled."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

EngineName = Literal["hf", "vllm"]


class RolloutConfig(BaseModel):
    """How the policy samples completions. Defaults are the AZR paper's (Table 3) where it states them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    engine: EngineName = Field(
        default="hf",
        description='"hf": Hugging Face generate (CPU or GPU, batched with a KV cache); "vllm": vLLM (GPU).',
    )
    temperature: float = Field(
        default=1.0,
        gt=0,
        le=10,
        description="Sampling temperature of every rollout, learnability rollouts included (paper: 1.0). "
        "Must equal the trainer's, which scores log-probs at the same temperature.",
    )
    top_p: float = Field(default=1.0, gt=0, le=1, description="Nucleus sampling mass (paper: 1.0).")
    max_new_tokens: int = Field(
        default=8_096, ge=1, le=131_072, description="Longest completion in tokens (paper: 8,096)."
    )
    max_batch_prompts: int = Field(
        default=64,
        ge=1,
        le=65_536,
        description="Most prompts in one generate call of the Hugging Face engine (memory bound).",
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        default="auto", description='Where the Hugging Face engine runs; "auto" picks CUDA when present.'
    )
    gpu_memory_utilization: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="vLLM: fraction of GPU memory its cache may take (the rest is the learner's when "
        "they share a GPU).",
    )
    max_model_len: int | None = Field(
        default=None,
        ge=32,
        le=1_048_576,
        description="vLLM: longest prompt + completion it reserves cache for; None: the model's own limit.",
    )
    seed: int = Field(default=0, ge=0, description="Seeds the sampling random number generator.")
