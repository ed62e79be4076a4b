"""Invariants of the roles config, each refused with a message that says what to change."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from azr.executor.gate import DEFAULT_POLICY
from azr.executor.limits import SandboxLimits
from azr.roles.config import RolesConfig


def test_defaults_follow_the_paper_and_the_executor() -> None:
    config = RolesConfig()
    assert (config.n_references, config.n_learnability_rollouts, config.max_prompt_tokens) == (6, 8, 6_144)
    assert (config.min_induction_inputs, config.max_induction_inputs, config.induction_inputs_shown) == (
        10,
        10,
        5,
    )
    assert (config.template, config.strict_format, config.min_judged_fraction) == ("azr", False, 0.5)
    assert (config.propose_reward, config.constant_propose_reward) == ("learnability", 0.5)
    assert set(config.allowed_imports) == set(DEFAULT_POLICY.allowed_imports)
    assert config.program_timeout_s == SandboxLimits().timeout_s


def test_every_field_is_described() -> None:
    assert all(field.description for field in RolesConfig.model_fields.values())


def test_config_is_frozen() -> None:
    with pytest.raises(ValidationError, match="frozen"):
        RolesConfig().n_references = 3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_references": 0}, "n_references"),
        ({"n_learnability_rollouts": 1}, "always 0 or 1"),
        ({"min_induction_inputs": 1}, "min_induction_inputs"),
        ({"min_induction_inputs": 12, "max_induction_inputs": 11}, "max_induction_inputs"),
        ({"induction_inputs_shown": 6}, "would show judged pairs"),
        ({"min_judged_fraction": 0.0}, "min_judged_fraction"),
        ({"template": "r1"}, "template"),
        ({"propose_reward": "uniform"}, "propose_reward"),
        ({"constant_propose_reward": 1.5}, "constant_propose_reward"),
        ({"constant_propose_reward": -0.1}, "constant_propose_reward"),
        ({"constant_propose_reward": float("nan")}, "constant_propose_reward"),
        ({"max_input_chars": 0}, "max_input_chars"),
        ({"max_program_chars": 100_000}, "max_completion_chars"),
        ({"allowed_imports": ("os.path",)}, "module names"),
        ({"n_refs": 3}, "n_refs"),
    ],
)
def test_bad_config_is_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RolesConfig(**kwargs)  # type: ignore[arg-type]
