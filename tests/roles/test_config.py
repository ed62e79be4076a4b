"""Invariants of the roles config, each refused with a message that says what to change."""

from __future__ import annotations

import pytest

from azr.executor.gate import DEFAULT_POLICY
from azr.roles.config import RolesConfig


def test_defaults_follow_the_paper_and_the_gate() -> None:
    config = RolesConfig()
    assert (config.n_references, config.n_learnability_rollouts, config.min_induction_inputs) == (6, 8, 10)
    assert set(config.allowed_imports) == set(DEFAULT_POLICY.allowed_imports)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_references": 0}, "n_references"),
        ({"n_learnability_rollouts": 1}, "always 0 or 1"),
        ({"min_induction_inputs": 1}, "min_induction_inputs"),
        ({"min_induction_inputs": 12, "max_induction_inputs": 11}, "max_induction_inputs"),
        ({"max_input_chars": 0}, "positive"),
        ({"max_program_chars": 100_000}, "max_completion_chars"),
        ({"allowed_imports": ("os.path",)}, "module names"),
    ],
)
def test_bad_config_is_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RolesConfig(**kwargs)  # type: ignore[arg-type]
