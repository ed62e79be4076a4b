"""Advantage estimators: TRR++ (the AZR paper), REINFORCE++, GRPO and RLOO.

Based on Absolute Zero (Zhao et al., 2025, eq. 8), REINFORCE++ (Hu, 2025), DeepSeekMath's GRPO (Shao et
al., 2024) and RLOO (Ahmadian et al., 2024). Every response carries one scalar outcome reward given at its
last token; with gamma = 1 the return-to-go is that reward on every response token, so an advantage is a
per-sequence number broadcast over the response mask. Padding (mask 0) always gets advantage 0.

How this departs from the paper or the reference code, and why:

1. Two forms of whitening. ``"sequence"`` (the default) is the paper's eq. 8: the mean and standard
   deviation of a group are taken over its responses, one response one sample. ``"token"`` reproduces the
   reference code (veRL's masked whitening of returns): statistics over response tokens, so a response
   of L tokens counts L times and long responses pull the baseline toward their rewards. The default is
   the paper's because the reward is a property of the response, not of its length.
2. Standard deviations: the sequence form uses the population std (ddof 0), so each whitened group has
   mean 0 and variance 1 (up to ``eps``) and a group of one is well defined; the token form uses the
   Bessel-corrected token variance, as veRL does; GRPO uses the sample std (ddof 1), as TRL and veRL do.
   ``eps`` is added to the std, not under the square root as in veRL.
3. A group whose rewards are all equal, including a group of one response, carries no learning signal:
   its advantages are exactly 0 (a leave-one-out or whitened baseline would otherwise turn rounding noise
   of the mean into a signal).
4. Statistics are computed in float64 and the result is cast back to the rewards' dtype.
"""

# Upper-case names are the paper's symbols (A for advantages, N responses, T tokens).
# ruff: noqa: N806

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Literal

import torch
from torch import Tensor

AdvantageForm = Literal["sequence", "token"]
ADVANTAGE_FORMS: tuple[AdvantageForm, ...] = ("sequence", "token")


def outcome_token_rewards(rewards: Tensor, response_mask: Tensor) -> Tensor:
    """Place each scalar reward on the last response token of its sequence (zero elsewhere)."""
    _check_batch(rewards, response_mask, [None] * len(rewards))
    N, T = response_mask.shape
    positions = torch.arange(T, device=response_mask.device).expand(N, T)  # (N, T)
    last = torch.where(response_mask.bool(), positions, -1).amax(dim=1)  # (N,)
    token_rewards = torch.zeros(N, T, dtype=rewards.dtype, device=rewards.device)  # (N, T)
    token_rewards[torch.arange(N, device=rewards.device), last] = rewards
    return token_rewards


def apply_kl_penalty(token_rewards: Tensor, kl: Tensor, coef: float) -> Tensor:
    """KL in the reward: r_t - coef * KL_t on every token (InstructGPT, REINFORCE++)."""
    if token_rewards.shape != kl.shape:
        raise ValueError(f"token rewards {tuple(token_rewards.shape)} and KL {tuple(kl.shape)} must match")
    return token_rewards - coef * kl


def returns_to_go(token_rewards: Tensor, response_mask: Tensor) -> Tensor:
    """G_t = sum_{s >= t} r_s over response tokens (gamma = 1); padding gets 0."""
    masked = token_rewards * response_mask  # (N, T)
    return masked.flip(-1).cumsum(-1).flip(-1) * response_mask  # (N, T)


def trr_plus_plus(
    rewards: Tensor,
    groups: Sequence[Hashable],
    response_mask: Tensor,
    *,
    form: AdvantageForm = "sequence",
    eps: float = 1e-6,
) -> Tensor:
    """Task-Relative REINFORCE++: whiten rewards within each (role, task type) group (AZR eq. 8).

    A_i = (r_i - mean_g) / (std_g + eps) for response i in group g, on every response token. Six groups in
    AZR (two roles x three task types), but any hashable labels work.

    ``rewards`` is (N,) outcome rewards, or (N, T) token rewards (for example after ``apply_kl_penalty``),
    which are turned into returns-to-go and need ``form="token"`` since they vary along a response.
    ``form`` is ``"sequence"`` (paper, default) or ``"token"`` (reference code); see the module docstring.
    """
    _check_form(form)
    _check_batch(rewards, response_mask, groups, eps, token_rewards=True)
    index, num_groups = _group_index(groups, response_mask.device)
    mask = response_mask.to(torch.float64)  # (N, T)
    if rewards.dim() == 2:
        if form != "token":
            raise ValueError("token rewards vary along a response: use form='token' with (N, T) rewards")
        returns = returns_to_go(rewards.to(torch.float64), mask)  # (N, T)
        return _whiten_tokens(returns, index, num_groups, mask, eps).to(rewards.dtype)
    r = rewards.to(torch.float64)  # (N,)
    if form == "token":
        returns = _broadcast(r, response_mask)  # (N, T) gamma = 1: the reward on every response token
        return _whiten_tokens(returns, index, num_groups, mask, eps).to(rewards.dtype)
    A = _whiten_sequences(r, index, num_groups, eps, ddof=0)  # (N,)
    return _broadcast(A, response_mask).to(rewards.dtype)  # (N, T)


def reinforce_plus_plus(
    rewards: Tensor,
    response_mask: Tensor,
    *,
    form: AdvantageForm = "sequence",
    eps: float = 1e-6,
) -> Tensor:
    """REINFORCE++: one global whitening over the batch, i.e. TRR++ with a single group."""
    return trr_plus_plus(rewards, [None] * response_mask.shape[0], response_mask, form=form, eps=eps)


def grpo(
    rewards: Tensor,
    prompt_groups: Sequence[Hashable],
    response_mask: Tensor,
    *,
    eps: float = 1e-6,
) -> Tensor:
    """GRPO outcome supervision: A_i = (r_i - mean) / (std + eps) over the responses to one prompt.

    The sample std (ddof 1) is used, as in TRL and veRL, so a group of one response gets advantage 0.
    """
    _check_batch(rewards, response_mask, prompt_groups, eps)
    index, num_groups = _group_index(prompt_groups, response_mask.device)
    A = _whiten_sequences(rewards.to(torch.float64), index, num_groups, eps, ddof=1)  # (N,)
    return _broadcast(A, response_mask).to(rewards.dtype)  # (N, T)


def rloo(rewards: Tensor, prompt_groups: Sequence[Hashable], response_mask: Tensor) -> Tensor:
    """REINFORCE leave-one-out: A_i = r_i - mean of the other responses to the same prompt.

    Equal to n / (n - 1) * (r_i - mean); a group of one response has no baseline and gets 0.
    """
    _check_batch(rewards, response_mask, prompt_groups)
    index, num_groups = _group_index(prompt_groups, response_mask.device)
    r = rewards.to(torch.float64)  # (N,)
    n = _scatter_sum(torch.ones_like(r), index, num_groups)[index]  # (N,) size of each response's group
    others_mean = (_scatter_sum(r, index, num_groups)[index] - r) / (n - 1).clamp(min=1)  # (N,)
    A = torch.where(_constant_groups(r, index, num_groups), 0.0, r - others_mean)  # (N,)
    return _broadcast(A, response_mask).to(rewards.dtype)  # (N, T)


def _whiten_sequences(r: Tensor, index: Tensor, num_groups: int, eps: float, *, ddof: int) -> Tensor:
    """(r - mean_g) / (std_g + eps) with statistics over the responses of each group."""
    n = _scatter_sum(torch.ones_like(r), index, num_groups)  # (G,)
    mean = _scatter_sum(r, index, num_groups) / n  # (G,)
    centred = r - mean[index]  # (N,)
    var = _scatter_sum(centred**2, index, num_groups) / (n - ddof).clamp(min=1)  # (G,)
    A = centred / (var.sqrt()[index] + eps)  # (N,)
    return torch.where(_constant_groups(r, index, num_groups), 0.0, A)


def _whiten_tokens(values: Tensor, index: Tensor, num_groups: int, mask: Tensor, eps: float) -> Tensor:
    """Masked whitening within each group, every response token one sample (Bessel-corrected)."""
    n = _scatter_sum(mask.sum(1), index, num_groups)  # (G,) response tokens per group
    mean = _scatter_sum((values * mask).sum(1), index, num_groups) / n  # (G,)
    centred = (values - mean[index, None]) * mask  # (N, T)
    var = _scatter_sum((centred**2).sum(1), index, num_groups) / (n - 1).clamp(min=1)  # (G,)
    A = centred / (var.sqrt()[index, None] + eps)  # (N, T)
    hi = torch.where(mask.bool(), values, -torch.inf).amax(1)  # (N,)
    lo = torch.where(mask.bool(), values, torch.inf).amin(1)  # (N,)
    constant = _scatter_max(hi, index, num_groups) == -_scatter_max(-lo, index, num_groups)  # (G,)
    return torch.where(constant[index, None] | ~mask.bool(), 0.0, A)


def _broadcast(per_response: Tensor, response_mask: Tensor) -> Tensor:
    """(N,) per-response values onto their response tokens (N, T); padding 0."""
    return torch.where(response_mask.bool(), per_response[:, None], 0.0)


def _constant_groups(r: Tensor, index: Tensor, num_groups: int) -> Tensor:
    """(N,) True where every reward in the response's group is equal (exact comparison)."""
    return (_scatter_max(r, index, num_groups) == -_scatter_max(-r, index, num_groups))[index]


def _scatter_sum(x: Tensor, index: Tensor, num_groups: int) -> Tensor:
    return torch.zeros(num_groups, dtype=x.dtype, device=x.device).index_add_(0, index, x)


def _scatter_max(x: Tensor, index: Tensor, num_groups: int) -> Tensor:
    out = torch.full((num_groups,), -torch.inf, dtype=x.dtype, device=x.device)
    return out.scatter_reduce_(0, index, x, reduce="amax")


def _group_index(groups: Sequence[Hashable], device: torch.device) -> tuple[Tensor, int]:
    """Map arbitrary hashable labels to dense group ids, in order of first appearance."""
    ids: dict[Hashable, int] = {}
    index = [ids.setdefault(g, len(ids)) for g in groups]
    return torch.tensor(index, dtype=torch.long, device=device), len(ids)


def _check_form(form: str) -> None:
    if form not in ADVANTAGE_FORMS:
        raise ValueError(f"form must be one of {ADVANTAGE_FORMS}, got {form!r}")


def _check_batch(
    rewards: Tensor,
    response_mask: Tensor,
    groups: Sequence[Hashable],
    eps: float = 1.0,
    *,
    token_rewards: bool = False,
) -> None:
    """Reject malformed batches with a message that says what to fix."""
    if response_mask.dim() != 2:
        raise ValueError(f"response_mask must be (N, T), got shape {tuple(response_mask.shape)}")
    N = response_mask.shape[0]
    shapes = ((N,), response_mask.shape) if token_rewards else ((N,),)
    if rewards.shape not in shapes:
        raise ValueError(
            f"rewards must have shape {' or '.join(str(tuple(s)) for s in shapes)} for a response mask of "
            f"shape {tuple(response_mask.shape)}, got {tuple(rewards.shape)}"
        )
    if not torch.is_floating_point(rewards):
        raise ValueError(f"rewards must be a floating-point tensor, got {rewards.dtype}")
    if len(groups) != N:
        raise ValueError(f"one group label per response: {len(groups)} labels for {N} responses")
    if not eps > 0:
        raise ValueError(f"eps must be > 0 so that whitening never divides by zero, got {eps}")
    empty = (response_mask.sum(1) == 0).nonzero().flatten().tolist()
    if empty:
        raise ValueError(f"responses {empty} have no token in the response mask; drop them before training")
