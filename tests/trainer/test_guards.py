"""What the trainer refuses, and what it loads for RL: each guard fails loudly before anything changes."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from azr.trainer.algorithms import AlgoConfig
from azr.trainer.config import TrainerConfig
from azr.trainer.logprobs import Float32LMHead, sequence_logprobs
from azr.trainer.models import load_policy
from azr.trainer.trainer import Trainer
from tests.trainer.conftest import params_of, random_experiences


@pytest.fixture(scope="module")
def trainer(tiny_model_dir: Path) -> Trainer:
    return Trainer(
        TrainerConfig(
            model=str(tiny_model_dir), device="cpu", gradient_checkpointing=False, mini_batch_size=12
        )
    )


@pytest.mark.parametrize("reward", [math.nan, math.inf, -math.inf])
def test_non_finite_rewards_refuse_the_step(trainer: Trainer, reward: float) -> None:
    experiences = random_experiences()
    experiences[3].reward = reward
    before = params_of(trainer.engine.module)
    with pytest.raises(ValueError, match="non-finite rewards in experiences"):
        trainer.train_step(experiences)
    assert trainer.state.step == trainer.state.policy_version == 0
    after = params_of(trainer.engine.module)
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_a_sampler_at_another_temperature_is_refused(trainer: Trainer) -> None:
    trainer.check_sampler_temperature(1.0)
    with pytest.raises(
        ValueError, match=r"sampler draws at temperature 0\.7 .* set TrainerConfig\.temperature"
    ):
        trainer.check_sampler_temperature(0.7)


@pytest.mark.parametrize("estimator", ["grpo", "rloo"])
def test_grouping_by_prompt_with_one_response_per_prompt_points_to_trr(
    make_config: Callable[..., TrainerConfig], estimator: str
) -> None:
    trainer = Trainer(make_config(algo=AlgoConfig(estimator=estimator)))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"single response .* estimator='trr\+\+'"):
        trainer.train_step(random_experiences())  # every prompt is distinct: groups of one
    assert trainer.state.policy_version == 0


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"micro_batch_size": 16, "mini_batch_size": 8}, "lower micro_batch_size"),
        ({"old_logprobs": "behaviour", "algo": {"loss": {"tis_cap": 2.0}}}, "set old_logprobs='recompute'"),
        ({"old_logprobs": "sampler"}, "old_logprobs\n  Input should be 'recompute' or 'behaviour'"),
        ({"zero_stage": 4}, "zero_stage\n  Input should be 1, 2 or 3"),
        ({"betas": (0.9, 1.0)}, r"betas must be two numbers in \[0, 1\)"),
        ({"temperature": 0.0}, "temperature\n  Input should be greater than 0"),
        ({"learning_rate": 1e-6}, "learning_rate\n  Extra inputs are not permitted"),
        ({"model": ""}, "model\n  String should have at least 1 character"),
    ],
)
def test_bad_trainer_config_is_rejected_with_a_fix(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TrainerConfig(**({"model": "m"} | overrides))


def test_defaults_are_the_papers_with_recomputed_old_logprobs() -> None:
    cfg = TrainerConfig(model="m")
    assert (cfg.lr, cfg.grad_clip, cfg.ppo_epochs, cfg.mini_batch_size, cfg.temperature) == (
        1e-6,
        1.0,
        1,
        128,
        1.0,
    )
    assert cfg.old_logprobs == "recompute"
    assert cfg.algo == AlgoConfig()
    assert all(f.description for f in TrainerConfig.model_fields.values())  # every field documented
    with pytest.raises(ValueError, match="frozen"):
        cfg.lr = 1.0  # type: ignore[misc]


def test_dropout_is_off_and_the_head_is_float32_when_loaded_for_rl(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    source = load_policy(str(tiny_model_dir), dtype=torch.float32, gradient_checkpointing=False, device=None)
    source.config.attention_dropout = 0.3
    source.save_pretrained(tmp_path)
    model = load_policy(str(tmp_path), dtype=torch.bfloat16, gradient_checkpointing=False, device=None)
    assert model.config.attention_dropout == 0.0
    assert isinstance(model.get_output_embeddings(), Float32LMHead)
    ids = torch.tensor([[5, 17, 99, 3, 42]])
    out = model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False)
    assert out.logits.dtype == torch.float32  # the bf16 model's logits come out of a float32 matmul


def test_response_only_head_scores_only_response_tokens_with_the_same_numbers(tiny_model_dir: Path) -> None:
    """Memory: the LM head sees M response positions, not N x L; log-probs and gradients are unchanged."""
    model = load_policy(str(tiny_model_dir), dtype=torch.float32, gradient_checkpointing=False, device=None)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 500, (3, 12), generator=g)
    attention = torch.ones_like(ids)
    attention[2, 9:] = 0  # a right-padded row
    response = torch.zeros(3, 12)
    response[0, 8:], response[1, 5:], response[2, 6:9] = 1, 1, 1  # (N, L) 4 + 7 + 3 tokens
    head = model.get_output_embeddings()
    shapes: list[tuple[int, ...]] = []
    hook = head.register_forward_hook(lambda _m, _i, out: shapes.append(tuple(out.shape)))

    def score(score_mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        model.zero_grad()
        logprobs, entropy = sequence_logprobs(
            model, ids, attention, temperature=0.7, with_entropy=True, score_mask=score_mask
        )
        assert entropy is not None
        logprobs, entropy = logprobs * response, entropy * response
        (logprobs.sum() + entropy.sum()).backward()
        return logprobs.detach(), entropy.detach(), [p.grad.clone() for p in model.parameters()]

    full = score(None)
    only = score(response)
    hook.remove()
    vocab = model.config.vocab_size
    # every position followed by a real token (3 x 11 minus 3 padded), then the 14 response tokens only
    assert shapes == [(30, vocab), (14, vocab)]
    torch.testing.assert_close(only[0], full[0])
    torch.testing.assert_close(only[1], full[1])
    for a, b in zip(only[2], full[2], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
