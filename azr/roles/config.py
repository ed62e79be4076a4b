"""Configuration of the two roles: templates, prompt sizes, the propose reward and the parsers' caps.

Defaults are the Absolute Zero paper's where it states them (K=6 references, the learnability reward over
n=8 rollouts, 10 induction inputs with half of them shown, 6,144 prompt tokens) and say so.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from azr.executor.gate import DEFAULT_POLICY
from azr.executor.limits import SandboxLimits

DEFAULT_ALLOWED_IMPORTS = tuple(sorted(DEFAULT_POLICY.allowed_imports))
"""Modules the prompts say a program may import: the executor's static gate allowlist."""

TemplateName = Literal["azr", "paper"]
Wording = Literal["full", "compact"]
ProposeReward = Literal["learnability", "constant"]


class RolesConfig(BaseModel):
    """What the proposer and solver roles need: how prompts are written and how completions are read."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    template: TemplateName = Field(
        default="azr",
        description='"azr": our wording, a system message with the format rule in chat form; "paper": the '
        "R1 template of the paper verbatim around the task, as one user message for the tokenizer's chat "
        "template (replicates the paper with Qwen2.5 models).",
    )
    wording: Wording = Field(
        default="full",
        description='"full": the task with its rules, goals and an answer example, as the paper\'s prompts '
        'give them; "compact": the task\'s blocks under a one-line instruction, for small models whose '
        "context and attention cannot carry the full rules (the tiny preset). The completion format is the "
        "same.",
    )
    strict_format: bool = Field(
        default=False,
        description="Read completions as the reference code does: the reasoning must end with </think>, "
        "followed by nothing but whitespace and <answer>, and the answer must be closed by </answer>. "
        "Off by default: engines strip the </answer> stop string, and the lenient reader already refuses "
        "every completion whose answer it cannot locate unambiguously.",
    )
    n_references: int = Field(
        default=6,
        ge=1,
        description="K: reference tasks shown in a deduction or abduction proposer prompt (paper: 6).",
    )
    max_prompt_tokens: int = Field(
        default=6_144,
        ge=16,
        description="Longest prompt in tokens (paper: 6,144); ``fit_references`` drops references one by "
        "one until a proposer prompt fits.",
    )
    propose_reward: ProposeReward = Field(
        default="learnability",
        description='What a valid proposal earns. "learnability": 1 - the solve rate of n solver rollouts, '
        '0 when the rate is 0 or 1 (paper). "constant": ``constant_propose_reward`` for every valid '
        "proposal and no learnability rollouts; the ablation that measures what learnability adds (the "
        "format and validity penalties stay, so the proposer still learns to write valid tasks).",
    )
    constant_propose_reward: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description='Reward of a valid proposal when propose_reward is "constant"; within learnability\'s '
        "range [0, 1], by default its middle.",
    )
    n_learnability_rollouts: int = Field(
        default=8,
        description="n: solver rollouts per valid proposal that estimate its solve rate (paper: 8).",
    )
    induction_message_check: bool = Field(
        default=False,
        description="Also roll out each valid induction proposal n times with its message removed; a message "
        "under which the solver does worse than without it is misleading, and its proposal earns 0 instead "
        "of its learnability (the task joins its buffer without the message). Off as in the paper, where a "
        "wrong message makes a task harder and so earns more.",
    )
    min_judged_fraction: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="Fewest of the n learnability rollouts that must be judged (not infra errors) for a "
        "propose reward; below it the proposal gets no reward rather than a rate from a few rollouts.",
    )
    min_induction_inputs: int = Field(
        default=10,
        description="Fewest distinct inputs an induction proposal gives (paper: 10).",
    )
    max_induction_inputs: int = Field(
        default=10,
        description="Most inputs an induction proposal gives. Equal to the minimum by default (exactly 10, "
        "as the paper): a proposer cannot lower the solve rate by adding hidden cases.",
    )
    induction_inputs_shown: int = Field(
        default=5,
        ge=1,
        description="Input/output pairs an induction solver prompt shows (paper: half of 10). The executor "
        "judges on the pairs after the first half, rounded up (``Task.induction_split``).",
    )
    program_timeout_s: float = Field(
        default=SandboxLimits().timeout_s,
        gt=0,
        description="The time limit of one call of f that the prompts state; keep it equal to the "
        "executor's ``SandboxLimits.timeout_s``, which is what is enforced.",
    )
    allowed_imports: tuple[str, ...] = Field(
        default=DEFAULT_ALLOWED_IMPORTS,
        description="Modules named as importable in the prompts (the executor's gate enforces its own).",
    )
    max_completion_chars: int = Field(
        default=65_536,
        ge=1,
        description="Longest completion the parsers read at all; longer is ``too_long`` before scanning.",
    )
    max_program_chars: int = Field(
        default=8_192, ge=1, description="Longest program a proposal or an induction answer may hold."
    )
    max_input_chars: int = Field(
        default=4_096,
        ge=1,
        description="Longest argument-list text of one input (proposals and abduction answers).",
    )
    max_message_chars: int = Field(default=2_048, ge=1, description="Longest induction message.")
    max_output_chars: int = Field(
        default=65_536,
        ge=1,
        description="Longest predicted output of a deduction answer (long gold outputs stay answerable).",
    )
    max_reference_chars: int = Field(
        default=8_192,
        ge=1,
        description="References whose program plus input/output texts are longer are never shown.",
    )

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.n_learnability_rollouts < 2:
            raise ValueError(
                "n_learnability_rollouts must be at least 2, or the solve rate is always 0 or 1 and the "
                "learnability reward always 0"
            )
        if self.induction_message_check and self.propose_reward != "learnability":
            raise ValueError(
                "induction_message_check compares learnability rollouts with and without the message; the "
                "constant propose reward samples none: turn one of them off"
            )
        if not 2 <= self.min_induction_inputs <= self.max_induction_inputs:
            raise ValueError(
                "need 2 <= min_induction_inputs <= max_induction_inputs: an induction task shows some of "
                "its pairs and judges on the rest"
            )
        visible = (self.min_induction_inputs + 1) // 2
        if self.induction_inputs_shown > visible:
            raise ValueError(
                f"induction_inputs_shown={self.induction_inputs_shown} would show judged pairs: the "
                f"executor judges on the pairs after the first {visible} of {self.min_induction_inputs}; "
                f"lower it to at most {visible} or raise min_induction_inputs"
            )
        caps = (
            self.max_program_chars,
            self.max_input_chars,
            self.max_message_chars,
            self.max_output_chars,
            self.max_reference_chars,
        )
        if max(caps) > self.max_completion_chars:
            raise ValueError("a field cap above max_completion_chars can never be reached; raise the latter")
        if not all(name.isidentifier() for name in self.allowed_imports):
            raise ValueError("allowed_imports must hold module names such as 'math'")
        return self
