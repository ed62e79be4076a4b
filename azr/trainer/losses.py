"""The PPO-clipped policy loss with entropy bonus and optional KL to a reference model, and the imitation
loss of demonstrations.

Based on PPO (Schulman et al., 2017) as used by AZR (one PPO epoch, clip 0.2, entropy coefficient 0.001,
no KL by default; paper Table 3), with the asymmetric clip range of DAPO (Yu et al., 2025), the dual clip
of Ye et al. (2020) and the KL estimators of Schulman's note "Approximating KL Divergence" (2020).

Per response token t, with ratio rho_t = pi(a_t) / pi_old(a_t) and advantage A_t:

    l_t = max(-A_t rho_t, -A_t clip(rho_t, 1 - clip_low, 1 + clip_high))
    l_t = min(l_t, -A_t dual_clip)                  if dual_clip is set and A_t < 0
    L   = sum_t mask_t (l_t - entropy_coef H_t + kl_coef KL_t) / token_count

Demonstrations (the executor's gold answers, ``ExperienceKind.DEMONSTRATION``) are not sampled from the
policy, so they have no advantage, ratio or KL estimate: they are imitated, by their negative
log-likelihood, averaged over their own tokens and weighted by ``imitation_coef``:

    L_imitation = -sum_t d_t log pi(a_t) / demonstration_token_count
    L_step      = L + imitation_coef L_imitation

Departures, and why:

1. Token-mean aggregation divides by ``token_count``, the number of response tokens in the whole
   mini-batch, not in the micro-batch at hand: summed micro-batch losses then equal the big-batch loss
   exactly, whatever the micro-batch lengths (dividing per micro-batch would weight short micro-batches up).
2. The log-ratio is clamped to [-20, 20] before ``exp`` (as veRL does): a token whose probability moved by
   a factor of e^20 is broken anyway, and the clamp keeps the loss finite instead of inf or NaN.
3. Padding (mask 0) may hold any value, NaN included: it is zeroed before any arithmetic, so it never
   reaches the loss or a gradient.
4. Metrics are computed apart from the loss, under ``no_grad``, in one host sync.
5. A KL in the loss always has the gradient of KL(pi || pi_ref), whatever estimator gives its value
   (``kl_penalty``): k3's own gradient is the reverse KL's, and k1's is zero in expectation.
6. With ``tis_cap`` set, each token's policy-gradient term is weighted by the truncated importance weight
   min(pi_old / pi_behaviour, tis_cap) (the "truncated IS" correction for a sampler that is not exactly
   the trainer's policy).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, model_validator
from torch import Tensor

KLEstimator = Literal["k1", "k2", "k3"]
KL_ESTIMATORS: tuple[KLEstimator, ...] = ("k1", "k2", "k3")
KLPlacement = Literal["reward", "loss"]
MAX_LOG_RATIO = 20.0
MAX_KL = 10.0
"""Per-token KL values in the loss are clamped to this (veRL's bound), so one outlier cannot dominate."""


class LossConfig(BaseModel):
    """Settings of the policy loss; defaults are the AZR paper's (Table 3)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    clip_low: float = Field(default=0.2, gt=0.0, lt=1.0)
    """The ratio is clipped below at 1 - clip_low (PPO epsilon), in (0, 1) so that 1 - clip_low > 0."""
    clip_high: float = Field(default=0.2, gt=0.0)
    """The ratio is clipped above at 1 + clip_high (DAPO's clip-higher uses e.g. 0.28)."""
    dual_clip: float | None = None
    """For negative advantages, bound the loss by dual_clip * |A| (Ye et al. 2020; e.g. 3.0); None: off."""
    entropy_coef: float = Field(default=0.001, ge=0.0)
    """Weight of the entropy bonus; the loss subtracts entropy_coef * H."""
    kl_coef: float = Field(default=0.0, ge=0.0)
    """Weight of the KL to the reference model; 0 turns it off (the paper uses no KL)."""
    kl_estimator: KLEstimator = "k3"
    """Which of Schulman's estimators (k1, k2, k3) measures KL(pi || pi_ref) per token. In the loss, k2
    and k3 both take k2's gradient (the one of KL(pi || pi_ref)); k1 is refused there."""
    kl_in: KLPlacement = "loss"
    """Where the KL goes: a penalty in the loss, or subtracted from the token rewards before advantages."""
    imitation_coef: float = Field(default=1.0, gt=0.0)
    """Weight of the imitation loss (mean negative log-likelihood per demonstration token) beside the
    policy loss; it acts only on batches that hold demonstrations (``selfplay.demonstrations`` > 0)."""
    tis_cap: float | None = Field(default=None, gt=1.0)
    """Truncated importance sampling: weight each token's loss by min(pi_old / pi_behaviour, tis_cap),
    correcting for the sampler's numeric and staleness mismatch; None: off (e.g. 2.0 when on)."""

    @model_validator(mode="after")
    def _check(self) -> LossConfig:
        if self.dual_clip is not None and not self.dual_clip > 1.0 + self.clip_high:
            raise ValueError(
                f"dual_clip must exceed 1 + clip_high = {1.0 + self.clip_high} to bound anything, got "
                f"{self.dual_clip}; use e.g. 3.0, or None to turn it off"
            )
        if self.kl_in_loss and self.kl_estimator == "k1":
            raise ValueError(
                "kl_estimator='k1' in the loss has an expected gradient of zero (E_pi[grad log pi] = 0), so "
                "it does not pull towards the reference: use 'k3' (k2's gradient) or 'k2', or kl_in='reward'"
            )
        return self

    @property
    def kl_in_loss(self) -> bool:
        """Whether the loss carries a KL term (rather than none, or one in the reward)."""
        return self.kl_coef > 0.0 and self.kl_in == "loss"


@dataclass(frozen=True)
class LossOutput:
    loss: Tensor
    """Scalar to call ``backward`` on; micro-batch losses sum to the mini-batch loss."""
    metrics: dict[str, float]
    """Diagnostics over this call's response tokens (means unless the name says otherwise)."""


def kl_estimate(logprobs: Tensor, ref_logprobs: Tensor, estimator: KLEstimator) -> Tensor:
    """Per-token estimate of KL(pi || pi_ref) from samples of pi (Schulman 2020).

    With log r = log pi_ref - log pi: k1 = -log r (unbiased, high variance, can be negative);
    k2 = (log r)^2 / 2 (biased, low variance); k3 = (r - 1) - log r (unbiased, low variance, >= 0).
    """
    log_r = ref_logprobs - logprobs  # (N, T)
    if estimator == "k1":
        return -log_r
    if estimator == "k2":
        return 0.5 * log_r**2
    if estimator == "k3":
        return torch.expm1(log_r) - log_r
    raise ValueError(f"estimator must be one of {KL_ESTIMATORS}, got {estimator!r}")


def kl_penalty(logprobs: Tensor, ref_logprobs: Tensor, estimator: KLEstimator) -> Tensor:
    """The KL term of the loss: the estimator's value with the gradient of KL(pi || pi_ref).

    Over samples of pi, grad k2 = (log pi - log pi_ref) grad log pi has expectation grad KL(pi || pi_ref),
    while grad k3 = (1 - r) grad log pi has expectation -sum_x pi_ref(x) grad log pi(x), the gradient of
    the reverse KL(pi_ref || pi), and grad k1 = grad log pi has expectation 0 (Tang & Munos, 2025, "On a
    few pitfalls in KL divergence gradient estimation for RL"). So k2 is used as is, and k3 keeps its
    value (>= 0, low variance, clamped at ``MAX_KL``) but takes k2's gradient (a straight-through
    estimator); k1 is refused.
    """
    if estimator == "k1":
        raise ValueError("k1's expected gradient is zero: use 'k2' or 'k3' for a KL in the loss")
    k2 = kl_estimate(logprobs, ref_logprobs, "k2")  # (N, T)
    if estimator == "k2":
        return k2
    k3 = kl_estimate(logprobs.detach(), ref_logprobs, "k3").clamp(max=MAX_KL)  # (N, T)
    return k3 + (k2 - k2.detach())  # value k3, gradient k2


def clipped_surrogate(ratio: Tensor, advantages: Tensor, cfg: LossConfig) -> Tensor:
    """Per-token PPO loss: the pessimistic (max) of the unclipped and clipped surrogate, dual-clipped."""
    pg_loss1 = -advantages * ratio  # (N, T)
    pg_loss2 = -advantages * ratio.clamp(1.0 - cfg.clip_low, 1.0 + cfg.clip_high)  # (N, T)
    pg_loss = torch.maximum(pg_loss1, pg_loss2)  # (N, T)
    if cfg.dual_clip is None:
        return pg_loss
    pg_loss3 = -advantages * cfg.dual_clip  # (N, T)
    return torch.where(advantages < 0, torch.minimum(pg_loss, pg_loss3), pg_loss)


def token_mean(x: Tensor, mask: Tensor, token_count: float) -> Tensor:
    """Sum of x over masked tokens divided by the batch-wide token count."""
    return torch.where(mask.bool(), x, 0.0).sum() / token_count


def imitation_loss(logprobs: Tensor, mask: Tensor, *, token_count: float) -> Tensor:
    """Negative log-likelihood of the masked (demonstration) tokens, summed and divided by the
    mini-batch's ``token_count``, so that micro-batch losses sum to the mini-batch's mean."""
    if logprobs.shape != mask.shape:
        raise ValueError(f"logprobs {tuple(logprobs.shape)} and mask {tuple(mask.shape)} must match")
    if not token_count > 0:
        raise ValueError(
            f"token_count must be the (positive) number of demonstration tokens, got {token_count}"
        )
    return token_mean(-logprobs, mask, token_count)


def policy_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    cfg: LossConfig,
    *,
    token_count: float,
    entropy: Tensor | None = None,
    ref_logprobs: Tensor | None = None,
    is_weights: Tensor | None = None,
) -> LossOutput:
    """PPO-clipped policy loss, entropy bonus and optional KL, token-mean over ``token_count`` tokens.

    ``token_count`` is the number of response tokens in the mini-batch that one optimizer step averages
    over, summed over all of its micro-batches. Under data parallelism with gradients averaged over W
    ranks, pass (response tokens on all ranks) / W. ``entropy`` (N, T) is needed when ``entropy_coef`` > 0
    and ``ref_logprobs`` when the KL is in the loss. ``is_weights`` (N, T), the truncated importance
    weights min(pi_old / pi_behaviour, cap), scale each token's policy-gradient term (no gradient).
    """
    _check_inputs(logprobs, old_logprobs, advantages, mask, token_count)
    if cfg.entropy_coef > 0.0 and entropy is None:
        raise ValueError("entropy_coef > 0 needs the per-token entropy: pass entropy=, or set entropy_coef=0")
    if cfg.kl_in_loss and ref_logprobs is None:
        raise ValueError("kl_coef > 0 with kl_in='loss' needs ref_logprobs=, or set kl_coef=0")

    # Padding may hold anything, even NaN; zero it first so that nothing of it reaches a gradient.
    m = mask.bool()  # (N, T)
    logprobs, old_logprobs, advantages = (
        torch.where(m, x, 0.0) for x in (logprobs, old_logprobs, advantages)
    )
    entropy = None if entropy is None else torch.where(m, entropy, 0.0)  # (N, T)
    ref_logprobs = None if ref_logprobs is None else torch.where(m, ref_logprobs, 0.0)  # (N, T)

    log_ratio = (logprobs - old_logprobs).clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO)  # (N, T)
    ratio = torch.exp(log_ratio)  # (N, T)
    pg_losses = clipped_surrogate(ratio, advantages, cfg)  # (N, T)
    per_token = pg_losses  # (N, T)
    if is_weights is not None:
        per_token = per_token * torch.where(m, is_weights.detach(), 0.0)
    if entropy is not None and cfg.entropy_coef > 0.0:
        per_token = per_token - cfg.entropy_coef * entropy
    kl = None
    if ref_logprobs is not None:  # the value, for the metric; the loss term carries the right gradient
        kl = kl_estimate(logprobs.detach(), ref_logprobs, cfg.kl_estimator)  # (N, T)
        if cfg.kl_in_loss:
            per_token = per_token + cfg.kl_coef * kl_penalty(logprobs, ref_logprobs, cfg.kl_estimator)
    loss = token_mean(per_token, mask, token_count)

    metrics = loss_metrics(
        logprobs, old_logprobs, advantages, mask, cfg, pg_losses=pg_losses, entropy=entropy, kl=kl
    )
    return LossOutput(loss=loss, metrics=metrics)


@torch.no_grad()
def loss_metrics(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    cfg: LossConfig,
    *,
    pg_losses: Tensor,
    entropy: Tensor | None = None,
    kl: Tensor | None = None,
) -> dict[str, float]:
    """Diagnostics over the masked tokens of one call, namespaced like CleanRL.

    ``losses/clipfrac_low`` is the fraction of tokens whose gradient the lower clip zeroes (A < 0 and
    ratio < 1 - clip_low), ``losses/clipfrac_high`` the same for the upper clip (A > 0 and ratio >
    1 + clip_high), ``losses/clipfrac_dual`` for the dual clip (A < 0 and ratio > dual_clip).
    ``policy/logprob_diff_*`` compare the trainer's log-probs with the behaviour log-probs: before the
    first update of a step they measure the mismatch between the rollout engine and the trainer.
    """
    m = mask.bool()  # (N, T)
    n = m.sum().clamp(min=1)
    log_ratio = logprobs.detach() - old_logprobs  # (N, T)
    clamped = log_ratio.clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO)  # (N, T)
    ratio = clamped.exp()  # (N, T)

    def mean(x: Tensor) -> Tensor:
        return torch.where(m, x.float(), 0.0).sum() / n

    stats: dict[str, Tensor] = {
        "losses/pg_loss": mean(pg_losses.detach()),
        "losses/approx_kl": mean(torch.expm1(clamped) - clamped),  # k3 of KL(pi_old || pi), as CleanRL
        "losses/clipfrac_low": mean(((advantages < 0) & (ratio < 1.0 - cfg.clip_low)).float()),
        "losses/clipfrac_high": mean(((advantages > 0) & (ratio > 1.0 + cfg.clip_high)).float()),
        "policy/ratio_mean": mean(ratio),
        "policy/ratio_max": torch.where(m, ratio, -torch.inf).max(),
        "policy/ratio_min": torch.where(m, ratio, torch.inf).min(),
        "policy/logprob_diff_mean": mean(log_ratio),
        "policy/logprob_absdiff_mean": mean(log_ratio.abs()),
        "policy/logprob_absdiff_max": torch.where(m, log_ratio.abs(), 0.0).max(),
        "policy/tokens": m.sum().float(),
    }
    if cfg.dual_clip is not None:
        stats["losses/clipfrac_dual"] = mean(((advantages < 0) & (ratio > cfg.dual_clip)).float())
    if entropy is not None:
        stats["losses/entropy"] = mean(entropy.detach())
    if kl is not None:
        stats["losses/kl"] = mean(kl.detach())
    values = torch.stack([v.float() for v in stats.values()]).tolist()  # the one host sync
    return dict(zip(stats, values, strict=True))


def _check_inputs(
    logprobs: Tensor, old_logprobs: Tensor, advantages: Tensor, mask: Tensor, token_count: float
) -> None:
    shapes = {tuple(t.shape) for t in (logprobs, old_logprobs, advantages, mask)}
    if len(shapes) != 1:
        raise ValueError(
            f"logprobs, old_logprobs, advantages and mask must share one (N, T) shape, got "
            f"{tuple(logprobs.shape)}, {tuple(old_logprobs.shape)}, {tuple(advantages.shape)}, "
            f"{tuple(mask.shape)}"
        )
    if not token_count > 0:
        raise ValueError(
            f"token_count must be the (positive) number of response tokens in the batch, got {token_count}"
        )
