"""Choosing the advantage estimator: a registry keyed by a ``Literal``, consulted once per batch.

The default is the AZR paper's: TRR++ (rewards whitened within each (role, task type) group), per-sequence
statistics, PPO clip 0.2, entropy coefficient 0.001, no KL.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator
from torch import Tensor

from azr.trainer.advantages import (
    AdvantageForm,
    apply_kl_penalty,
    grpo,
    outcome_token_rewards,
    reinforce_plus_plus,
    rloo,
    trr_plus_plus,
)
from azr.trainer.losses import LossConfig

Estimator = Literal["trr++", "reinforce++", "grpo", "rloo"]
ESTIMATOR_NAMES: tuple[Estimator, ...] = get_args(Estimator)
GROUPED_BY_PROMPT: frozenset[Estimator] = frozenset({"grpo", "rloo"})
WHITENING: frozenset[Estimator] = frozenset({"trr++", "reinforce++"})


class AlgoConfig(BaseModel):
    """The RL algorithm: advantage estimator and policy loss."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    estimator: Estimator = "trr++"
    """trr++ (AZR), reinforce++ (one global whitening), grpo or rloo (both group by prompt)."""
    form: AdvantageForm = "sequence"
    """Whitening statistics over responses ("sequence", the paper) or tokens ("token", the reference code)."""
    eps: float = Field(default=1e-6, gt=0.0)
    """Added to the standard deviation when whitening."""
    advantage_floor: float | None = Field(default=None, le=0.0)
    """Advantages below it are raised to it. 0: only responses better than their group's baseline are
    reinforced and none is pushed down (filtered imitation of the policy's own successes), which moves a
    small model less far from what it can already do; None (the paper): no floor."""
    loss: LossConfig = LossConfig()
    """PPO clip, entropy bonus and KL settings."""

    @model_validator(mode="after")
    def _check(self) -> AlgoConfig:
        if self.form == "token" and self.estimator not in WHITENING:
            raise ValueError(
                f"form='token' applies to {sorted(WHITENING)} only; {self.estimator} uses per-sequence "
                "statistics: set form='sequence'"
            )
        if self.kl_in_reward and (self.estimator not in WHITENING or self.form != "token"):
            raise ValueError(
                "a KL penalty in the reward varies along a response and needs token returns: use an "
                f"estimator in {sorted(WHITENING)} with form='token', or put the KL in the loss "
                "(kl_in='loss')"
            )
        return self

    @property
    def kl_in_reward(self) -> bool:
        """Whether the advantages must be computed from KL-penalised token rewards."""
        return self.loss.kl_coef > 0.0 and self.loss.kl_in == "reward"


AdvantageFn = Callable[[AlgoConfig, Tensor, Tensor, Sequence[Hashable]], Tensor]
"""(cfg, rewards (N,) or token rewards (N, T), response_mask (N, T), groups) -> advantages (N, T)."""

REGISTRY: dict[Estimator, AdvantageFn] = {
    "trr++": lambda cfg, r, m, g: trr_plus_plus(r, g, m, form=cfg.form, eps=cfg.eps),
    "reinforce++": lambda cfg, r, m, _: reinforce_plus_plus(r, m, form=cfg.form, eps=cfg.eps),
    "grpo": lambda cfg, r, m, g: grpo(r, g, m, eps=cfg.eps),
    "rloo": lambda cfg, r, m, g: rloo(r, g, m),
}


def compute_advantages(
    cfg: AlgoConfig,
    rewards: Tensor,
    response_mask: Tensor,
    *,
    role_type_groups: Sequence[Hashable] | None = None,
    prompt_groups: Sequence[Hashable] | None = None,
    kl: Tensor | None = None,
) -> Tensor:
    """Advantages (N, T) for a batch of N responses with scalar rewards (N,).

    ``role_type_groups`` ((role, task type) per response, ``Experience.group``) is needed by TRR++,
    ignored by REINFORCE++,
    ``prompt_groups`` (any label shared by the responses to one prompt) by GRPO and RLOO. ``kl`` (N, T)
    is the per-token KL to the reference policy, needed only when the config puts the KL in the reward;
    it is subtracted from the token rewards, times ``kl_coef``, before the returns are whitened.
    """
    groups = prompt_groups if cfg.estimator in GROUPED_BY_PROMPT else role_type_groups
    if groups is None and cfg.estimator != "reinforce++":
        needed = "prompt_groups" if cfg.estimator in GROUPED_BY_PROMPT else "role_type_groups"
        raise ValueError(f"estimator {cfg.estimator!r} groups responses by {needed}=; pass it")
    if cfg.estimator in GROUPED_BY_PROMPT and groups is not None and len(set(groups)) == len(groups):
        raise ValueError(
            f"{cfg.estimator} compares the responses to one prompt, but every prompt here has a single "
            "response (AZR samples n=1 per task), so every advantage would be 0: use estimator='trr++', "
            "which whitens within (role, task type) groups, or sample several responses per prompt"
        )
    if cfg.kl_in_reward:
        if kl is None:
            raise ValueError("the config puts the KL in the reward (kl_in='reward'): pass kl=, (N, T)")
        token_rewards = outcome_token_rewards(rewards, response_mask)  # (N, T)
        rewards = apply_kl_penalty(token_rewards, kl * response_mask, cfg.loss.kl_coef)  # (N, T)
    advantages = REGISTRY[cfg.estimator](cfg, rewards, response_mask, groups or ())  # (N, T)
    if cfg.advantage_floor is None:
        return advantages
    return advantages.clamp(min=cfg.advantage_floor)  # padding's 0 is above any floor, so it stays 0
