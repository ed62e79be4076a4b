"""The vLLM engine (GPU): paged attention, continuous batching and prefix caching.

Written against vLLM's public offline API (``vllm.LLM``); vLLM needs a GPU, so it is exercised on GPU
machines only and the CPU test suite covers the Hugging Face engine behind the same ``Sampler`` protocol.

- Log-probs: ``logprobs_mode="processed_logprobs"`` makes vLLM report each sampled token's log-prob
  after temperature and top-p, the same quantity the Hugging Face engine reports; ``logprobs=0`` asks for
  the sampled token's alone.
- Prefix caching is on: the n samples of a prompt, and the K references that proposer prompts share,
  are computed once. After new weights are loaded the cache holds keys and values of the old policy, so
  it is reset.
- Weights are loaded in place: every vLLM worker reads the published safetensors file itself and hands
  the tensors to the model's own ``load_weights`` (which fuses q/k/v and gate/up projections and re-ties
  shared embeddings), in one ``collective_rpc``. No engine restart, no copy through the driver.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from azr.rollout.config import RolloutConfig
from azr.rollout.sampler import Completion

log = logging.getLogger(__name__)


def _load_weights_in_worker(worker: Any, path: str) -> None:
    """Runs inside each vLLM worker process (``collective_rpc``): read the snapshot, load it in place."""
    from safetensors.torch import load_file

    weights = load_file(path, device=str(worker.device))
    worker.model_runner.model.load_weights(weights=weights.items())


class VLLMSampler:
    """One vLLM engine holding the policy."""

    def __init__(self, model: str | Path, config: RolloutConfig) -> None:
        from vllm import LLM

        self.config = config
        self.llm = LLM(
            model=str(model),
            enable_prefix_caching=True,
            gpu_memory_utilization=config.gpu_memory_utilization,
            max_model_len=config.max_model_len,
            logprobs_mode="processed_logprobs",
            seed=config.seed,
        )
        self._version = 0

    @property
    def policy_version(self) -> int:
        return self._version

    @property
    def temperature(self) -> float:
        return self.config.temperature

    def load_weights(self, version: int, path: str) -> None:
        self.llm.collective_rpc(_load_weights_in_worker, args=(path,))
        self.llm.reset_prefix_cache()  # cached keys/values belong to the previous weights
        self._version = version
        log.info("vLLM engine loaded policy version %d", version)

    def generate(self, prompts: Sequence[Sequence[int]], n: int = 1) -> list[list[Completion]]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        params = SamplingParams(
            n=n,
            temperature=self.config.temperature,
            top_p=self.config.top_p,
            max_tokens=self.config.max_new_tokens,
            logprobs=0,
        )
        requests = [TokensPrompt(prompt_token_ids=list(p)) for p in prompts]
        outputs = self.llm.generate(requests, params, use_tqdm=False)
        return [[_completion(sample) for sample in request.outputs] for request in outputs]


def _completion(sample: Any) -> Completion:
    """A vLLM ``CompletionOutput`` as a ``Completion``: the sampled token's log-prob at each position."""
    token_ids = tuple(int(t) for t in sample.token_ids)
    logprobs = tuple(float(step[t].logprob) for step, t in zip(sample.logprobs, token_ids, strict=True))
    return Completion(
        token_ids=token_ids,
        logprobs=logprobs,
        text=sample.text,
        finish_reason="length" if sample.finish_reason == "length" else "stop",
    )
