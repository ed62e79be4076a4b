"""The Hugging Face engine on the real tiny model: processed log-probs, left padding, n samples, stops,
weight loading."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from azr.rollout.config import RolloutConfig
from azr.rollout.hf import HFSampler
from azr.trainer.logprobs import sequence_logprobs


@pytest.fixture(scope="module")
def sampler(tiny_model_dir: Path) -> HFSampler:
    return HFSampler(tiny_model_dir, RolloutConfig(max_new_tokens=24, temperature=0.7, device="cpu", seed=1))


def _prompt(sampler: HFSampler, text: str) -> list[int]:
    return [int(i) for i in sampler.tokenizer(text, add_special_tokens=False)["input_ids"]]


def test_logprobs_are_the_processed_logprobs_the_trainer_scores(sampler: HFSampler) -> None:
    """Prompts of different lengths in one call (left padding): every sampled token's log-prob equals
    the trainer's score of that token at the sampling temperature, computed on the unpadded sequence."""
    prompts = [_prompt(sampler, "def f(x):"), _prompt(sampler, "A much longer prompt about a program f(x)")]
    rows = sampler.generate(prompts, n=2)
    assert [len(r) for r in rows] == [2, 2]
    for prompt, row in zip(prompts, rows, strict=True):
        for completion in row:
            ids = torch.tensor([prompt + list(completion.token_ids)])
            scored, _ = sequence_logprobs(
                sampler.model, ids, torch.ones_like(ids), temperature=0.7, with_entropy=False
            )
            torch.testing.assert_close(
                scored[0, len(prompt) :], torch.tensor(completion.logprobs), atol=1e-4, rtol=0
            )


def test_completions_stop_on_the_end_token_or_the_length_limit(sampler: HFSampler) -> None:
    eos = next(iter(sampler.eos_token_ids))
    rows = sampler.generate([_prompt(sampler, "x")], n=16)
    for completion in rows[0]:
        if completion.finish_reason == "stop":
            assert completion.token_ids[-1] == eos and eos not in completion.token_ids[:-1]
        else:
            assert len(completion.token_ids) == 24 and eos not in completion.token_ids


def test_loading_published_weights_changes_the_policy_and_its_version(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    sampler = HFSampler(tiny_model_dir, RolloutConfig(max_new_tokens=4, device="cpu"))
    prompt = _prompt(sampler, "def f(x): return")
    ids = torch.tensor([prompt])
    before = sampler.model(input_ids=ids).logits.detach()
    zeroed = {k: torch.zeros_like(v) for k, v in sampler.model.state_dict().items()}
    path = tmp_path / "policy.safetensors"
    save_file({k: v.contiguous() for k, v in zeroed.items() if k != "lm_head.weight"}, path)
    sampler.load_weights(7, str(path))
    after = sampler.model(input_ids=ids).logits.detach()
    assert sampler.policy_version == 7
    assert not torch.equal(before, after) and torch.count_nonzero(after) == 0
