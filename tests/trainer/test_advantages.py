"""Advantage estimators against naive loops and hand-computed numbers, and the estimator registry."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import pytest
import torch

from azr.core.task import Role, TaskType
from azr.trainer.advantages import (
    apply_kl_penalty,
    grpo,
    outcome_token_rewards,
    reinforce_plus_plus,
    returns_to_go,
    rloo,
    trr_plus_plus,
)
from azr.trainer.algorithms import ESTIMATOR_NAMES, AlgoConfig, Estimator, compute_advantages
from azr.trainer.losses import LossConfig

SIX_GROUPS = [(role, task_type) for role in Role for task_type in TaskType]
EPS = 1e-6


# ---- naive references: one response (or token) at a time, plain Python floats ----


def naive_whiten(
    rewards: list[float], groups: Sequence[Hashable], lengths: list[int], *, token: bool, ddof: int
) -> list[float]:
    """Per-response advantage; samples are responses, or each response once per token."""
    out = [0.0] * len(rewards)
    for g in set(groups):
        members = [i for i in range(len(rewards)) if groups[i] == g]
        samples = [rewards[i] for i in members for _ in range(lengths[i] if token else 1)]
        if len(set(samples)) == 1:
            continue
        mean = sum(samples) / len(samples)
        std = math.sqrt(sum((x - mean) ** 2 for x in samples) / (len(samples) - ddof))
        for i in members:
            out[i] = (rewards[i] - mean) / (std + EPS)
    return out


def naive_rloo(rewards: list[float], groups: Sequence[Hashable]) -> list[float]:
    out = [0.0] * len(rewards)
    for i, g in enumerate(groups):
        others = [rewards[j] for j in range(len(rewards)) if j != i and groups[j] == g]
        if others and len({rewards[i], *others}) > 1:
            out[i] = rewards[i] - sum(others) / len(others)
    return out


def spread(per_response: list[float], mask: torch.Tensor) -> torch.Tensor:
    """Put each response's advantage on its masked tokens."""
    out = torch.zeros(mask.shape, dtype=torch.float64)
    for i in range(mask.shape[0]):
        for t in range(mask.shape[1]):
            if mask[i, t]:
                out[i, t] = per_response[i]
    return out


def random_batch(
    seed: int, n: int = 40, t: int = 7
) -> tuple[torch.Tensor, list[tuple[str, str]], torch.Tensor]:
    """Rewards from AZR's discrete values (so ties and constant groups happen), six groups, ragged masks."""
    g = torch.Generator().manual_seed(seed)
    values = torch.tensor([-1.0, -0.5, 0.0, 0.125, 0.5, 0.875, 1.0], dtype=torch.float64)
    rewards = values[torch.randint(len(values), (n,), generator=g)]
    groups = [SIX_GROUPS[k] for k in torch.randint(6, (n,), generator=g).tolist()]
    lengths = torch.randint(1, t + 1, (n,), generator=g)
    starts = torch.randint(0, t, (n,), generator=g) % (t - lengths + 1)  # left, right and middle padding
    cols = torch.arange(t)
    mask = ((cols >= starts[:, None]) & (cols < (starts + lengths)[:, None])).double()
    return rewards, groups, mask


# ---- naive loop agreement on random batches ----


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("form", ["sequence", "token"])
def test_trr_matches_naive_loop(seed: int, form: str) -> None:
    rewards, groups, mask = random_batch(seed)
    lengths = mask.sum(1).long().tolist()
    expected = naive_whiten(
        rewards.tolist(), groups, lengths, token=form == "token", ddof=int(form == "token")
    )
    got = trr_plus_plus(rewards, groups, mask, form=form, eps=EPS)  # type: ignore[arg-type]
    torch.testing.assert_close(got, spread(expected, mask), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("form", ["sequence", "token"])
def test_reinforce_plus_plus_is_one_global_group(seed: int, form: str) -> None:
    rewards, _, mask = random_batch(seed)
    lengths = mask.sum(1).long().tolist()
    one = [0] * len(rewards)
    expected = naive_whiten(rewards.tolist(), one, lengths, token=form == "token", ddof=int(form == "token"))
    got = reinforce_plus_plus(rewards, mask, form=form, eps=EPS)  # type: ignore[arg-type]
    torch.testing.assert_close(got, spread(expected, mask), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_grpo_and_rloo_match_naive_loops(seed: int) -> None:
    rewards, _, mask = random_batch(seed)
    prompts = [i // 4 for i in range(len(rewards) - 2)] + ["lonely", "lonely2"]  # groups of 4, two of 1
    lengths = mask.sum(1).long().tolist()
    expected_grpo = naive_whiten(rewards.tolist(), prompts, lengths, token=False, ddof=1)
    torch.testing.assert_close(grpo(rewards, prompts, mask, eps=EPS), spread(expected_grpo, mask))
    torch.testing.assert_close(
        rloo(rewards, prompts, mask), spread(naive_rloo(rewards.tolist(), prompts), mask)
    )


# ---- hand-computed numbers: all six (role, type) groups ----

# (group, reward, response length)
HAND_BATCH: list[tuple[tuple[str, str], float, int]] = [
    (("propose", "deduction"), 1.0, 3),
    (("propose", "deduction"), 0.0, 1),
    (("propose", "abduction"), 0.5, 2),  # a group of one
    (("propose", "induction"), -0.5, 1),  # all equal
    (("propose", "induction"), -0.5, 2),
    (("propose", "induction"), -0.5, 3),
    (("solve", "deduction"), 1.0, 1),
    (("solve", "deduction"), -1.0, 1),
    (("solve", "deduction"), 0.0, 2),
    (("solve", "abduction"), 1.0, 1),
    (("solve", "abduction"), 1.0, 1),
    (("solve", "abduction"), 1.0, 1),
    (("solve", "abduction"), 0.0, 1),
    (("solve", "induction"), 0.0, 2),
    (("solve", "induction"), 1.0, 2),
]
S3 = math.sqrt(3.0)
S32 = math.sqrt(1.5)
# Sequence form, population std: {1, 0}: mean 1/2, std 1/2 -> +-1. {1, -1, 0}: mean 0, std sqrt(2/3).
# {1, 1, 1, 0}: mean 3/4, std sqrt(3)/4 -> 1/sqrt(3) and -sqrt(3).
HAND_SEQUENCE = [1, -1, 0, 0, 0, 0, S32, -S32, 0, 1 / S3, 1 / S3, 1 / S3, -S3, -1, 1]
# Token form, Bessel over tokens: propose/deduction tokens {1, 1, 1, 0}: mean 3/4, var (3/16 + 9/16) / 3
# = 1/4 -> +1/2 and -3/2. solve/deduction tokens {1, -1, 0, 0}: mean 0, var 2/3 -> +-sqrt(3/2).
# solve/abduction (one token each): var (3/16 + 9/16) / 3 = 1/4 -> 1/2 and -3/2.
# solve/induction tokens {0, 0, 1, 1}: mean 1/2, var 1/3 -> -+sqrt(3)/2.
HAND_TOKEN = [0.5, -1.5, 0, 0, 0, 0, S32, -S32, 0, 0.5, 0.5, 0.5, -1.5, -S3 / 2, S3 / 2]
# GRPO, sample std: {1, 0}: std 1/sqrt(2); {1, -1, 0}: std 1; {1, 1, 1, 0}: std 1/2; {0, 1}: 1/sqrt(2).
R2 = 1 / math.sqrt(2.0)
HAND_GRPO = [R2, -R2, 0, 0, 0, 0, 1, -1, 0, 0.5, 0.5, 0.5, -1.5, -R2, R2]
# RLOO: r_i - mean of the others.
HAND_RLOO = [1, -1, 0, 0, 0, 0, 1.5, -1.5, 0, 1 / 3, 1 / 3, 1 / 3, -1, -1, 1]


def hand_batch() -> tuple[torch.Tensor, list[tuple[str, str]], torch.Tensor]:
    groups = [g for g, _, _ in HAND_BATCH]
    rewards = torch.tensor([r for _, r, _ in HAND_BATCH])
    lengths = torch.tensor([n for _, _, n in HAND_BATCH])
    mask = (torch.arange(4) < lengths[:, None]).float()  # (15, 4) right padding
    return rewards, groups, mask


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("trr++ sequence", HAND_SEQUENCE),
        ("trr++ token", HAND_TOKEN),
        ("grpo", HAND_GRPO),
        ("rloo", HAND_RLOO),
    ],
)
def test_hand_computed_six_groups(name: str, expected: list[float]) -> None:
    rewards, groups, mask = hand_batch()
    assert len(set(groups)) == 6
    got = {
        "trr++ sequence": lambda: trr_plus_plus(rewards, groups, mask, form="sequence"),
        "trr++ token": lambda: trr_plus_plus(rewards, groups, mask, form="token"),
        "grpo": lambda: grpo(rewards, groups, mask),
        "rloo": lambda: rloo(rewards, groups, mask),
    }[name]()
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, spread(expected, mask).float(), rtol=0, atol=5e-6)


def test_default_form_is_the_papers_sequence_form() -> None:
    rewards, groups, mask = hand_batch()
    torch.testing.assert_close(trr_plus_plus(rewards, groups, mask), spread(HAND_SEQUENCE, mask).float())


# ---- edge cases ----


@pytest.mark.parametrize("form", ["sequence", "token"])
def test_group_of_one_and_all_equal_rewards_give_exactly_zero(form: str) -> None:
    rewards = torch.tensor([0.1, 0.1, 0.1, 0.7, 0.3], dtype=torch.float64)  # (0.1 + 0.1 + 0.1) / 3 != 0.1
    groups = ["tie", "tie", "tie", "single", "other-single"]
    mask = torch.ones(5, 3)
    zeros = torch.zeros(5, 3, dtype=torch.float64)
    assert torch.equal(trr_plus_plus(rewards, groups, mask, form=form), zeros)  # type: ignore[arg-type]
    assert torch.equal(grpo(rewards, groups, mask), zeros)
    assert torch.equal(rloo(rewards, groups, mask), zeros)


@pytest.mark.parametrize("form", ["sequence", "token"])
def test_padding_gets_zero_and_does_not_change_real_tokens(form: str) -> None:
    rewards, groups, mask = random_batch(7)
    adv = trr_plus_plus(rewards, groups, mask, form=form)  # type: ignore[arg-type]
    assert torch.all(adv[mask == 0] == 0)
    wider = torch.nn.functional.pad(mask, (2, 3))  # more padding on both sides
    adv_wider = trr_plus_plus(rewards, groups, wider, form=form)  # type: ignore[arg-type]
    torch.testing.assert_close(adv_wider[:, 2:-3], adv)


def test_token_form_equals_sequence_form_scaled_when_lengths_are_equal() -> None:
    """Documented relation: equal lengths L, n responses -> token std = population std * sqrt(nL/(nL-1))."""
    g = torch.Generator().manual_seed(3)
    n, L = 9, 5
    rewards = torch.rand(n, generator=g, dtype=torch.float64)
    mask = torch.ones(n, L, dtype=torch.float64)
    groups = ["g"] * n
    seq = trr_plus_plus(rewards, groups, mask, form="sequence", eps=1e-12)
    tok = trr_plus_plus(rewards, groups, mask, form="token", eps=1e-12)
    torch.testing.assert_close(tok, seq * math.sqrt((n * L - 1) / (n * L)), rtol=1e-9, atol=1e-12)


def test_token_form_weights_long_responses() -> None:
    """Token form: a long correct response pulls the baseline up; the sequence form does not care."""
    rewards = torch.tensor([1.0, 0.0])
    short = trr_plus_plus(rewards, ["g", "g"], torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]]))
    long = trr_plus_plus(rewards, ["g", "g"], torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 0.0, 0.0, 0.0]]))
    assert short[:, 0].tolist() == long[:, 0].tolist()
    long_tok = trr_plus_plus(
        rewards, ["g", "g"], torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 0.0, 0.0, 0.0]]), form="token"
    )
    assert long_tok[1, 0] < long[1, 0] < 0 < long_tok[0, 0] < long[0, 0]


def test_whitening_is_per_group_and_order_free() -> None:
    rewards, groups, mask = random_batch(11)
    adv = trr_plus_plus(rewards, groups, mask)
    perm = torch.randperm(len(rewards), generator=torch.Generator().manual_seed(0))
    adv_perm = trr_plus_plus(rewards[perm], [groups[i] for i in perm.tolist()], mask[perm])
    torch.testing.assert_close(adv_perm, adv[perm])
    for g in set(groups):
        rows = [i for i, x in enumerate(groups) if x == g]
        alone = trr_plus_plus(rewards[rows], [g] * len(rows), mask[rows])
        torch.testing.assert_close(alone, adv[rows])
        first = adv[rows].sum(1) / mask[rows].sum(1)  # per-response advantage
        if first.abs().sum() > 0:
            assert abs(first.mean().item()) < 1e-9
            assert abs(first.std(unbiased=False).item() - 1) < 1e-4


def test_token_rewards_with_kl_penalty() -> None:
    """(N, T) token rewards become returns-to-go before whitening; without KL they equal the outcome form."""
    rewards = torch.tensor([1.0, 0.0, 0.5], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0]], dtype=torch.float64)
    token_rewards = outcome_token_rewards(rewards, mask)
    assert token_rewards.tolist() == [[0, 0, 1], [0, 0, 0], [0.5, 0, 0]]
    groups = ["g", "g", "g"]
    torch.testing.assert_close(
        trr_plus_plus(token_rewards, groups, mask, form="token"),
        trr_plus_plus(rewards, groups, mask, form="token"),
    )
    kl = torch.tensor([[0.1, 0.2, 0.3], [0.4, 0.5, 9.0], [0.6, 9.0, 9.0]], dtype=torch.float64)
    penalised = apply_kl_penalty(token_rewards, kl * mask, coef=0.5)
    returns = returns_to_go(penalised, mask)
    expected = [[1 - 0.5 * 0.6, 1 - 0.5 * 0.5, 1 - 0.5 * 0.3], [-0.5 * 0.9, -0.5 * 0.5, 0], [0.5 - 0.3, 0, 0]]
    torch.testing.assert_close(returns, torch.tensor(expected, dtype=torch.float64))
    adv = trr_plus_plus(penalised, groups, mask, form="token")
    values = [
        v for row, m in zip(expected, mask.tolist(), strict=True) for v, k in zip(row, m, strict=True) if k
    ]
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    torch.testing.assert_close(
        adv, ((torch.tensor(expected, dtype=torch.float64) - mean) / (std + EPS)) * mask
    )


# ---- bad input ----


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: trr_plus_plus(torch.ones(2), ["a"], torch.ones(2, 3)), "one group label per response"),
        (lambda: trr_plus_plus(torch.ones(3), ["a"] * 3, torch.ones(2, 3)), "rewards must have shape"),
        (lambda: trr_plus_plus(torch.ones(2, 3), ["a"] * 2, torch.ones(2, 3)), "use form='token'"),
        (
            lambda: trr_plus_plus(torch.ones(2), ["a"] * 2, torch.tensor([[1, 0], [0, 0]])),
            "responses \\[1\\]",
        ),
        (lambda: trr_plus_plus(torch.ones(2), ["a"] * 2, torch.ones(2, 3), eps=0), "eps must be > 0"),
        (lambda: trr_plus_plus(torch.ones(2), ["a"] * 2, torch.ones(2, 3), form="tok"), "form must be"),  # type: ignore[arg-type]
        (
            lambda: trr_plus_plus(torch.ones(2, dtype=torch.long), ["a"] * 2, torch.ones(2, 3)),
            "floating-point",
        ),
        (lambda: grpo(torch.ones(2, 3), ["a"] * 2, torch.ones(2, 3)), "rewards must have shape"),
        (lambda: rloo(torch.ones(2), ["a"] * 2, torch.ones(6)), "response_mask must be"),
    ],
)
def test_bad_input_is_rejected_with_a_clear_message(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


# ---- the registry ----


@pytest.mark.parametrize("estimator", ESTIMATOR_NAMES)
def test_registry_dispatches_to_the_named_estimator(estimator: Estimator) -> None:
    rewards, groups, mask = random_batch(5)
    prompts = [i // 5 for i in range(len(rewards))]
    direct = {
        "trr++": lambda: trr_plus_plus(rewards, groups, mask),
        "reinforce++": lambda: reinforce_plus_plus(rewards, mask),
        "grpo": lambda: grpo(rewards, prompts, mask),
        "rloo": lambda: rloo(rewards, prompts, mask),
    }[estimator]()
    got = compute_advantages(
        AlgoConfig(estimator=estimator), rewards, mask, role_type_groups=groups, prompt_groups=prompts
    )
    torch.testing.assert_close(got, direct)


def test_default_algorithm_is_the_papers() -> None:
    cfg = AlgoConfig()
    assert (cfg.estimator, cfg.form, cfg.loss.clip_low, cfg.loss.clip_high) == ("trr++", "sequence", 0.2, 0.2)
    assert (cfg.loss.entropy_coef, cfg.loss.kl_coef, cfg.loss.dual_clip) == (0.001, 0.0, None)
    assert not cfg.kl_in_reward and cfg.advantage_floor is None


@pytest.mark.parametrize("floor", [0.0, -0.5])
def test_the_advantage_floor_raises_only_what_is_below_it(floor: float) -> None:
    rewards, groups, mask = random_batch(6)
    plain = compute_advantages(AlgoConfig(), rewards, mask, role_type_groups=groups)
    floored = compute_advantages(AlgoConfig(advantage_floor=floor), rewards, mask, role_type_groups=groups)
    assert (plain < floor).any(), "the batch must have advantages below the floor"
    torch.testing.assert_close(
        floored, torch.where(plain < floor, torch.full_like(plain, floor), plain) * mask
    )
    assert (floored[mask == 0] == 0).all()


def test_kl_in_the_reward_is_subtracted_before_whitening() -> None:
    rewards, groups, mask = random_batch(6)
    kl = torch.rand(mask.shape, dtype=torch.float64)
    cfg = AlgoConfig(form="token", loss=LossConfig(kl_coef=0.2, kl_in="reward"))
    got = compute_advantages(cfg, rewards, mask, role_type_groups=groups, kl=kl)
    token_rewards = outcome_token_rewards(rewards, mask) - 0.2 * kl * mask
    torch.testing.assert_close(got, trr_plus_plus(token_rewards, groups, mask, form="token"))
    assert not torch.allclose(got, trr_plus_plus(rewards, groups, mask, form="token"))
    with pytest.raises(ValueError, match="pass kl="):
        compute_advantages(cfg, rewards, mask, role_type_groups=groups)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"estimator": "ppo"}, "estimator\n  Input should be 'trr\\+\\+'"),
        ({"form": "tokens"}, "form\n  Input should be 'sequence' or 'token'"),
        ({"estimator": "grpo", "form": "token"}, "set form='sequence'"),
        ({"eps": 0.0}, "eps\n  Input should be greater than 0"),
        ({"advantage_floor": 0.5}, "advantage_floor\n  Input should be less than or equal to 0"),
        ({"loss": LossConfig(kl_coef=0.1, kl_in="reward")}, "needs token returns"),
        ({"estimator": "rloo", "loss": LossConfig(kl_coef=0.1, kl_in="reward")}, "needs token returns"),
    ],
)
def test_bad_algorithm_config_is_rejected(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AlgoConfig(**kwargs)  # type: ignore[arg-type]


def test_missing_groups_are_rejected() -> None:
    rewards, groups, mask = random_batch(0)
    with pytest.raises(ValueError, match="role_type_groups="):
        compute_advantages(AlgoConfig(), rewards, mask, prompt_groups=groups)
    with pytest.raises(ValueError, match="prompt_groups="):
        compute_advantages(AlgoConfig(estimator="grpo"), rewards, mask, role_type_groups=groups)
    compute_advantages(AlgoConfig(estimator="reinforce++"), rewards, mask)  # needs no groups


@pytest.mark.parametrize("estimator", ["grpo", "rloo"])
def test_prompt_groups_of_one_are_refused_with_a_pointer_to_trr(estimator: Estimator) -> None:
    """AZR samples one response per task: GRPO and RLOO would have no group to compare within."""
    rewards, _, mask = random_batch(1)
    with pytest.raises(ValueError, match="estimator='trr\\+\\+'"):
        compute_advantages(
            AlgoConfig(estimator=estimator), rewards, mask, prompt_groups=list(range(len(rewards)))
        )
