"""Configuration of the warm start (``azr pretrain``)."""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from azr.roles.config import RolesConfig
from azr.selfplay.config import PromptFormat
from azr.trainer.tiny import TinySpec
from azr.warmstart.programs import FAMILY_NAMES, family_weights


class WarmStartConfig(BaseModel):
    """How the warm-start data is drawn and how long the model is trained on it.

    The defaults fit the tiny model on a 2-core CPU in a few minutes and stop well short of what the
    model could learn from this data: the warm start teaches the formats and a start, self-play the rest.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    tiny: TinySpec = Field(
        default_factory=TinySpec,
        description='Sizes of the tiny model that is warm-started (and that the model "tiny" names): '
        "hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads, ...",
    )
    tasks_per_type: int = Field(
        default=200, ge=2, le=100_000, description="Tasks drawn per task type (each gives two examples)."
    )
    family_weights: dict[str, float] = Field(
        default_factory=dict,
        description=f"Relative weight of each program family in the drawn tasks, by name "
        f"({', '.join(FAMILY_NAMES)}); a family not named weighs 1 and one weighing 0 is left out. Empty, "
        "every family is drawn equally often.",
    )
    seed: int = Field(default=0, ge=0, description="Seeds the task stream, the references and the shuffle.")
    steps: int = Field(default=60, ge=1, le=1_000_000, description="Optimizer steps of supervised training.")
    batch_size: int = Field(default=8, ge=1, le=4_096, description="Examples per optimizer step.")
    prompt_gradient: bool = Field(
        default=False,
        description="Back-propagate through the preamble every prompt shares too; off, it is read without "
        "gradient (it holds nothing an answer copies) and each prompt's own tokens and the completion are "
        "trained through.",
    )
    prompt_loss: bool = Field(
        default=True,
        description="Train next-token prediction on each prompt's own tokens (after the preamble every "
        "prompt shares) as well as on the completion: the programs and values an answer copies from are "
        "learnt as text, at no extra cost per step.",
    )
    lr: float = Field(
        default=5e-4,
        gt=0,
        le=1,
        description="Peak AdamW learning rate. Most answers start by copying a value from the prompt, and "
        "the tiny model learns that at 5e-4 but not at 2e-3, where its loss stalls on a plain copy task.",
    )
    warmup_steps: int = Field(default=5, ge=1, description="Steps of linear warm-up to the peak rate.")
    max_tokens: int = Field(
        default=2048,
        ge=32,
        description="Longest example (prompt and completion) in tokens; longer are dropped.",
    )
    roles: RolesConfig = Field(
        default_factory=RolesConfig, description="The prompts' settings: use the run's, so formats match."
    )
    prompt_format: PromptFormat = Field(default="chat", description="As ``SelfPlayConfig.prompt_format``.")
    executor_backend: Literal["local", "docker"] = Field(default="local", description="Sandbox that labels.")
    executor_workers: int = Field(default=2, ge=1, le=1024, description="Sandbox workers.")
    allow_unisolated: bool = Field(
        default=False, description="Let the local sandbox run without namespaces (development machines)."
    )

    @field_validator("family_weights")
    @classmethod
    def _known_families(cls, weights: dict[str, float]) -> dict[str, float]:
        family_weights(weights)
        return weights


REWARD_ONLY_ROLES_FIELDS = frozenset(
    {"propose_reward", "constant_propose_reward", "n_learnability_rollouts", "min_judged_fraction"}
)
"""Roles settings that change rewards, never a prompt or a parse: a comparison's arms share a warm start."""
EXECUTOR_FIELDS = frozenset({"executor_backend", "executor_workers", "allow_unisolated"})
"""Settings of the sandbox that labels the data: every sandbox computes the same gold values."""


def recipe_settings(config: WarmStartConfig) -> str:
    """The settings a build follows, as canonical JSON: the configuration without the reward's and the
    executor's settings (neither changes an example), with the families' weights as they draw. Equal
    recipe settings build the same warm start, given the same code and libraries on the same machine."""
    recipe = config.model_dump(mode="json", exclude={"roles", "family_weights", *EXECUTOR_FIELDS})
    recipe["roles"] = config.roles.model_dump(mode="json", exclude=set(REWARD_ONLY_ROLES_FIELDS))
    recipe["family_weights"] = family_weights(config.family_weights)
    return json.dumps(recipe, sort_keys=True)
