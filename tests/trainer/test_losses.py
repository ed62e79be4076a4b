"""The policy loss: hand-computed clip cases, KL estimators, masks, and exact gradient accumulation."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from azr.trainer.logprobs import entropy_from_logits, token_logprobs
from azr.trainer.losses import MAX_KL, LossConfig, kl_estimate, kl_penalty, policy_loss

NO_BONUS = LossConfig(entropy_coef=0.0)
Rows = list[list[float]]


def one_token(ratio: float, advantage: float, cfg: LossConfig) -> tuple[float, float, dict[str, float]]:
    """Loss and d loss / d logprob for a single token with the given ratio and advantage."""
    old = torch.tensor([[math.log(0.3)]], dtype=torch.float64)
    logprobs = (old + math.log(ratio)).requires_grad_(True)
    out = policy_loss(logprobs, old, torch.tensor([[advantage]]), torch.ones(1, 1), cfg, token_count=1)
    torch.autograd.backward(out.loss)
    assert logprobs.grad is not None
    return out.loss.item(), logprobs.grad.item(), out.metrics


# (ratio, advantage, config, loss, gradient, active clip); d(-A rho) / d log pi = -A rho when unclipped.
CLIP_CASES = [
    pytest.param(1.1, 1.0, NO_BONUS, -1.1, -1.1, None, id="A>0 inside the range"),
    pytest.param(1.5, 1.0, NO_BONUS, -1.2, 0.0, "high", id="A>0 above 1+eps: clipped, no gradient"),
    pytest.param(0.5, 1.0, NO_BONUS, -0.5, -0.5, None, id="A>0 below 1-eps: not clipped (pessimistic)"),
    pytest.param(0.5, -1.0, NO_BONUS, 0.8, 0.0, "low", id="A<0 below 1-eps: clipped, no gradient"),
    pytest.param(1.5, -1.0, NO_BONUS, 1.5, 1.5, None, id="A<0 above 1+eps: not clipped (pessimistic)"),
    pytest.param(0.9, -2.0, NO_BONUS, 1.8, 1.8, None, id="A<0 inside the range"),
    pytest.param(5.0, -1.0, NO_BONUS, 5.0, 5.0, None, id="A<0 far above: unbounded without dual clip"),
    pytest.param(
        5.0, -1.0, LossConfig(entropy_coef=0, dual_clip=3.0), 3.0, 0.0, "dual", id="dual clip bounds"
    ),
    pytest.param(
        2.0, -1.0, LossConfig(entropy_coef=0, dual_clip=3.0), 2.0, 2.0, None, id="dual clip not reached"
    ),
    pytest.param(
        5.0, 1.0, LossConfig(entropy_coef=0, dual_clip=3.0), -1.2, 0.0, "high", id="dual clip ignores A>0"
    ),
    pytest.param(
        1.25, 1.0, LossConfig(entropy_coef=0, clip_high=0.28), -1.25, -1.25, None, id="clip-higher inside"
    ),
    pytest.param(
        1.3, 1.0, LossConfig(entropy_coef=0, clip_high=0.28), -1.28, 0.0, "high", id="clip-higher above"
    ),
    pytest.param(0.85, -1.0, LossConfig(entropy_coef=0, clip_low=0.1), 0.9, 0.0, "low", id="asymmetric low"),
    pytest.param(3.0, 0.0, NO_BONUS, 0.0, 0.0, None, id="zero advantage"),
]


@pytest.mark.parametrize(("ratio", "adv", "cfg", "loss", "grad", "clip"), CLIP_CASES)
def test_clipped_objective_hand_computed(  # noqa: PLR0917 (one parameter per table column)
    ratio: float, adv: float, cfg: LossConfig, loss: float, grad: float, clip: str | None
) -> None:
    got_loss, got_grad, metrics = one_token(ratio, adv, cfg)
    assert got_loss == pytest.approx(loss, abs=1e-6)
    assert got_grad == pytest.approx(grad, abs=1e-6)
    for which in ("low", "high", "dual"):
        expected = 1.0 if which == clip else 0.0
        assert metrics.get(f"losses/clipfrac_{which}", 0.0) == expected, which
    assert metrics["policy/ratio_mean"] == pytest.approx(ratio)


def test_kl_estimators_match_schulmans_formulas() -> None:
    logprobs, ref = torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)])  # r = pi_ref / pi = 1/2
    assert kl_estimate(logprobs, ref, "k1").item() == pytest.approx(math.log(2))
    assert kl_estimate(logprobs, ref, "k2").item() == pytest.approx(0.5 * math.log(2) ** 2)
    assert kl_estimate(logprobs, ref, "k3").item() == pytest.approx(0.5 - 1 + math.log(2))


def test_k1_and_k3_are_unbiased_for_kl_pi_to_ref() -> None:
    """E_{x~pi}[k] over a whole categorical distribution equals KL(pi || pi_ref) for k1 and k3."""
    g = torch.Generator().manual_seed(0)
    log_pi = torch.log_softmax(torch.randn(50, generator=g, dtype=torch.float64), 0)
    log_ref = torch.log_softmax(torch.randn(50, generator=g, dtype=torch.float64), 0)
    kl = (log_pi.exp() * (log_pi - log_ref)).sum()
    for estimator in ("k1", "k3"):
        expectation = (log_pi.exp() * kl_estimate(log_pi, log_ref, estimator)).sum()
        torch.testing.assert_close(expectation, kl)
    assert torch.all(kl_estimate(log_pi, log_ref, "k3") >= 0)
    assert torch.all(kl_estimate(log_pi, log_ref, "k2") >= 0)


def exact_kl_gradient(theta: torch.Tensor, log_ref: torch.Tensor) -> torch.Tensor:
    """d KL(pi || ref) / d theta for pi = softmax(theta), by hand: pi * (log pi - log ref - KL)."""
    log_pi = torch.log_softmax(theta, 0)
    pi = log_pi.exp()
    kl = (pi * (log_pi - log_ref)).sum()
    return pi * (log_pi - log_ref - kl)


@pytest.mark.parametrize("estimator", ["k2", "k3"])
def test_kl_in_the_loss_has_the_gradient_of_kl_pi_to_ref(estimator: str) -> None:
    """On a small categorical, E_{x~pi}[grad of the loss's KL term at x] is grad KL(pi || ref), by hand.

    The expectation is taken exactly, weighting each outcome x by pi(x) (held constant, as sampling is).
    """
    g = torch.Generator().manual_seed(1)
    theta = torch.randn(5, generator=g, dtype=torch.float64, requires_grad=True)
    log_ref = torch.log_softmax(torch.randn(5, generator=g, dtype=torch.float64), 0)
    log_pi = torch.log_softmax(theta, 0)
    assert kl_estimate(log_pi, log_ref, "k3").max() < MAX_KL  # no clamp: the value stays k3's
    term = kl_penalty(log_pi, log_ref, estimator)  # type: ignore[arg-type]
    expected_grad = (log_pi.exp().detach() * term).sum()
    (got,) = torch.autograd.grad(expected_grad, theta)
    torch.testing.assert_close(got, exact_kl_gradient(theta.detach(), log_ref))
    # k3's value is the estimator's own (unbiased for the KL) even though its gradient is k2's.
    torch.testing.assert_close(term.detach(), kl_estimate(log_pi.detach(), log_ref, estimator))  # type: ignore[arg-type]


def test_k3s_own_gradient_would_be_the_reverse_kls() -> None:
    """Why k3 takes k2's gradient: differentiated as is, k3 follows KL(ref || pi), not KL(pi || ref)."""
    g = torch.Generator().manual_seed(0)
    theta = torch.randn(5, generator=g, dtype=torch.float64, requires_grad=True)
    log_ref = torch.log_softmax(torch.randn(5, generator=g, dtype=torch.float64), 0)
    log_pi = torch.log_softmax(theta, 0)
    (naive,) = torch.autograd.grad((log_pi.exp().detach() * kl_estimate(log_pi, log_ref, "k3")).sum(), theta)
    reverse = (log_ref.exp() * (log_ref - torch.log_softmax(theta, 0))).sum()
    (reverse_grad,) = torch.autograd.grad(reverse, theta)
    torch.testing.assert_close(naive, reverse_grad)
    assert not torch.allclose(naive, exact_kl_gradient(theta.detach(), log_ref))


def test_k1_is_refused_in_the_loss_and_k3_is_clamped() -> None:
    x = torch.zeros(3)
    with pytest.raises(ValueError, match="expected gradient is zero"):
        kl_penalty(x, x, "k1")
    far = kl_penalty(torch.zeros(1), torch.tensor([30.0]), "k3")  # k3 = e^30 - 31, unclamped
    assert far.item() == MAX_KL


def test_entropy_bonus_lowers_the_loss_and_its_gradient_raises_entropy() -> None:
    logprobs = torch.zeros(1, 2, requires_grad=True)
    entropy = torch.tensor([[1.5, 0.5]], requires_grad=True)
    cfg = LossConfig(entropy_coef=0.01)
    out = policy_loss(
        logprobs, torch.zeros(1, 2), torch.zeros(1, 2), torch.ones(1, 2), cfg, token_count=2, entropy=entropy
    )
    torch.autograd.backward(out.loss)
    assert out.loss.item() == pytest.approx(-0.01 * (1.5 + 0.5) / 2)
    assert entropy.grad is not None
    assert entropy.grad[0].tolist() == pytest.approx([-0.005, -0.005])  # descending the loss raises entropy
    assert out.metrics["losses/entropy"] == pytest.approx(1.0)


def test_kl_goes_into_the_loss_only_when_configured() -> None:
    logprobs = torch.full((1, 2), math.log(0.5))
    ref = torch.full((1, 2), math.log(0.25))
    kl = 0.5 - 1 + math.log(2)  # k3
    args = (logprobs, logprobs, torch.zeros(1, 2), torch.ones(1, 2))
    in_loss = policy_loss(*args, LossConfig(entropy_coef=0, kl_coef=0.1), token_count=2, ref_logprobs=ref)
    in_reward = policy_loss(
        *args, LossConfig(entropy_coef=0, kl_coef=0.1, kl_in="reward"), token_count=2, ref_logprobs=ref
    )
    assert in_loss.loss.item() == pytest.approx(0.1 * kl)
    assert in_reward.loss.item() == 0.0
    assert in_loss.metrics["losses/kl"] == in_reward.metrics["losses/kl"] == pytest.approx(kl)


def test_padding_is_ignored_even_when_it_holds_nan() -> None:
    g = torch.Generator().manual_seed(1)
    logprobs = (-torch.rand(3, 5, generator=g)).requires_grad_(True)
    old = logprobs.detach() + 0.3 * torch.randn(3, 5, generator=g)
    adv, ref, ent = (
        torch.randn(3, 5, generator=g),
        -torch.rand(3, 5, generator=g),
        torch.rand(3, 5, generator=g),
    )
    mask = torch.tensor([[1, 1, 1, 0, 0], [0, 1, 1, 1, 1], [1, 0, 0, 0, 0]], dtype=torch.float32)
    cfg = LossConfig(kl_coef=0.05, dual_clip=3.0)

    def run(fill: float) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
        logprobs.grad = None
        dirty = [torch.where(mask.bool(), x, fill) for x in (old, adv, ref, ent)]
        out = policy_loss(
            logprobs, dirty[0], dirty[1], mask, cfg, token_count=9, ref_logprobs=dirty[2], entropy=dirty[3]
        )
        torch.autograd.backward(out.loss)
        assert logprobs.grad is not None
        return out.loss.detach(), logprobs.grad.clone(), out.metrics

    clean_loss, clean_grad, clean_metrics = run(0.0)
    nan_loss, nan_grad, nan_metrics = run(math.nan)
    assert torch.isfinite(nan_loss)
    torch.testing.assert_close(nan_loss, clean_loss)
    torch.testing.assert_close(nan_grad, clean_grad)
    assert torch.all(nan_grad[mask == 0] == 0)
    assert nan_metrics == pytest.approx(clean_metrics)


def naive_loss(batch: dict[str, Rows], cfg: LossConfig, token_count: float) -> float:
    """The loss one token at a time in plain Python."""
    lp, old, adv, mask, ent, ref = (batch[k] for k in ("lp", "old", "adv", "mask", "ent", "ref"))
    total = 0.0
    for i in range(len(lp)):
        for t in range(len(lp[i])):
            if not mask[i][t]:
                continue
            a, ratio = adv[i][t], math.exp(lp[i][t] - old[i][t])
            clipped = min(max(ratio, 1 - cfg.clip_low), 1 + cfg.clip_high)
            loss = max(-a * ratio, -a * clipped)
            if cfg.dual_clip is not None and a < 0:
                loss = min(loss, -a * cfg.dual_clip)
            log_r = ref[i][t] - lp[i][t]
            total += loss - cfg.entropy_coef * ent[i][t] + cfg.kl_coef * (math.exp(log_r) - 1 - log_r)
    return total / token_count


@pytest.mark.parametrize("seed", range(4))
def test_vectorised_loss_matches_naive_loop(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    shape = (6, 8)
    lp = -torch.rand(shape, generator=g, dtype=torch.float64) * 3
    old = lp + 0.5 * torch.randn(shape, generator=g, dtype=torch.float64)  # ratios from ~0.2 to ~5
    adv = torch.randn(shape, generator=g, dtype=torch.float64)
    ref = lp + 0.2 * torch.randn(shape, generator=g, dtype=torch.float64)
    ent = torch.rand(shape, generator=g, dtype=torch.float64)
    mask = (torch.rand(shape, generator=g) < 0.7).double()
    cfg = LossConfig(clip_low=0.2, clip_high=0.28, dual_clip=3.0, entropy_coef=0.01, kl_coef=0.1)
    out = policy_loss(lp, old, adv, mask, cfg, token_count=100.0, entropy=ent, ref_logprobs=ref)
    rows = {"lp": lp, "old": old, "adv": adv, "mask": mask, "ent": ent, "ref": ref}
    expected = naive_loss({k: v.tolist() for k, v in rows.items()}, cfg, token_count=100.0)
    assert out.loss.item() == pytest.approx(expected, rel=1e-12)
    ratio = (lp - old).exp()[mask.bool()]
    assert out.metrics["policy/ratio_max"] == pytest.approx(ratio.max().item())
    assert out.metrics["policy/tokens"] == mask.sum().item()
    assert out.metrics["losses/approx_kl"] == pytest.approx(((ratio - 1) - ratio.log()).mean().item())


class TinyLM(nn.Module):
    """An embedding and a linear head: a language model with no context, enough to test the loss."""

    def __init__(self, vocab: int = 17, dim: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.head(self.embed(ids))  # (N, L, V)
        return logits


def accumulate(model: TinyLM, batch: dict[str, torch.Tensor], splits: list[int], token_count: float) -> None:
    """Backward over micro-batches of the given sizes, summing the losses' gradients."""
    cfg = LossConfig(dual_clip=3.0, entropy_coef=0.01, kl_coef=0.1)
    start = 0
    for size in splits:
        mb = {k: v[start : start + size] for k, v in batch.items()}
        start += size
        logits = model(mb["inputs"])
        logprobs = token_logprobs(logits, mb["labels"])
        out = policy_loss(
            logprobs, mb["old"], mb["adv"], mb["mask"], cfg, token_count=token_count,
            entropy=entropy_from_logits(logits), ref_logprobs=mb["ref"],
        )  # fmt: skip
        torch.autograd.backward(out.loss)


def test_micro_batches_give_the_big_batch_gradient_exactly() -> None:
    torch.manual_seed(0)
    model = TinyLM()
    N, L = 10, 6
    inputs, labels = torch.randint(17, (N, L)), torch.randint(17, (N, L))
    with torch.no_grad():
        lp = token_logprobs(model(inputs), labels)
    lengths = torch.tensor([1, 6, 2, 5, 3, 6, 1, 4, 2, 6])  # very uneven micro-batch token counts
    batch = {
        "inputs": inputs, "labels": labels, "mask": (torch.arange(L) < lengths[:, None]).float(),
        "old": lp + 0.3 * torch.randn(N, L), "ref": lp + 0.1 * torch.randn(N, L), "adv": torch.randn(N, L),
    }  # fmt: skip
    tokens = float(lengths.sum())

    def grads(splits: list[int], token_counts: list[float] | None = None) -> list[torch.Tensor]:
        model.zero_grad()
        if token_counts is None:
            accumulate(model, batch, splits, tokens)
        else:  # per-micro-batch mean, averaged over micro-batches: the common mistake
            start = 0
            for size, count in zip(splits, token_counts, strict=True):
                sub = {k: v[start : start + size] for k, v in batch.items()}
                start += size
                accumulate(model, sub, [size], count * len(splits))
        return [p.grad.clone() for p in model.parameters() if p.grad is not None]

    big = grads([N])
    for splits in ([5, 5], [1, 3, 6], [1] * N):
        for g_big, g_micro in zip(big, grads(splits), strict=True):
            torch.testing.assert_close(g_micro, g_big, rtol=1e-5, atol=1e-7)
    # The test can tell: normalising each micro-batch by its own token count gives another gradient.
    wrong = grads([1, 3, 6], [float(lengths[:1].sum()), float(lengths[1:4].sum()), float(lengths[4:].sum())])
    assert not all(torch.allclose(a, b, rtol=1e-3) for a, b in zip(big, wrong, strict=True))


def test_on_policy_metrics() -> None:
    lp = -torch.rand(4, 3)
    out = policy_loss(lp, lp.clone(), torch.randn(4, 3), torch.ones(4, 3), NO_BONUS, token_count=12)
    m = out.metrics
    assert m["policy/ratio_mean"] == m["policy/ratio_max"] == m["policy/ratio_min"] == 1.0
    assert m["losses/approx_kl"] == m["losses/clipfrac_low"] == m["losses/clipfrac_high"] == 0.0
    assert m["policy/logprob_absdiff_max"] == 0.0
    assert set(m) >= {"losses/pg_loss", "losses/approx_kl", "policy/ratio_mean", "policy/logprob_diff_mean"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"clip_low": 1.0}, "clip_low\n  Input should be less than 1"),
        ({"clip_high": 0.0}, "clip_high\n  Input should be greater than 0"),
        ({"dual_clip": 1.1}, "dual_clip must exceed"),
        ({"entropy_coef": -0.1}, "entropy_coef\n  Input should be greater than or equal to 0"),
        ({"kl_coef": -1.0}, "kl_coef\n  Input should be greater than or equal to 0"),
        ({"kl_estimator": "k4"}, "kl_estimator\n  Input should be 'k1', 'k2' or 'k3'"),
        ({"kl_in": "advantage"}, "kl_in\n  Input should be 'reward' or 'loss'"),
        ({"kl_coef": 0.1, "kl_estimator": "k1"}, "expected gradient of zero"),
        ({"tis_cap": 1.0}, "tis_cap\n  Input should be greater than 1"),
        ({"unknown": 1.0}, "Extra inputs are not permitted"),
    ],
)
def test_bad_config_is_rejected(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LossConfig(**kwargs)  # type: ignore[arg-type]


def test_missing_inputs_are_rejected() -> None:
    x = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="needs the per-token entropy"):
        policy_loss(x, x, x, x, LossConfig(), token_count=1)
    with pytest.raises(ValueError, match="needs ref_logprobs"):
        policy_loss(x, x, x, x, LossConfig(entropy_coef=0, kl_coef=0.1), token_count=1)
    with pytest.raises(ValueError, match="share one"):
        policy_loss(x, x, torch.zeros(2, 4), x, NO_BONUS, token_count=1)
    with pytest.raises(ValueError, match="token_count"):
        policy_loss(x, x, x, x, NO_BONUS, token_count=0)


def test_truncated_importance_weights_scale_the_policy_gradient_term() -> None:
    logprobs = torch.zeros(1, 3, requires_grad=True)
    weights = torch.tensor([[0.5, 2.0, float("nan")]])  # the padded column may hold anything
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    out = policy_loss(
        logprobs, torch.zeros(1, 3), torch.ones(1, 3), mask, NO_BONUS, token_count=2, is_weights=weights
    )
    torch.autograd.backward(out.loss)
    assert out.loss.item() == pytest.approx(-(0.5 + 2.0) / 2)
    assert logprobs.grad is not None
    assert logprobs.grad[0].tolist() == pytest.approx([-0.25, -1.0, 0.0])  # d(-w rho)/d log pi = -w / 2
