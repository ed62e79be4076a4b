"""Configuration of the two roles: prompt sizes, learnability rollouts and the caps of the parsers."""

from __future__ import annotations

from dataclasses import dataclass

from azr.executor.gate import DEFAULT_POLICY

DEFAULT_ALLOWED_IMPORTS = tuple(sorted(DEFAULT_POLICY.allowed_imports))
"""Modules the prompts say a program may import: the executor's static gate allowlist."""


@dataclass(frozen=True, slots=True)
class RolesConfig:
    n_references: int = 6
    """K: reference snippets shown in a deduction or abduction proposer prompt (paper: 6)."""
    n_learnability_rollouts: int = 8
    """n: solver rollouts per valid proposal that estimate its solve rate (paper: 8)."""
    min_induction_inputs: int = 10
    """N: distinct inputs an induction proposal must give (paper: at least 10)."""
    max_induction_inputs: int = 32
    """Most inputs an induction proposal may give; more is a format error, never silently cut."""
    allowed_imports: tuple[str, ...] = DEFAULT_ALLOWED_IMPORTS
    """Modules named as importable in the prompts (the executor's gate enforces its own policy)."""
    max_completion_chars: int = 65_536
    """Longest completion the parsers read at all; longer is ``too_long`` before any scanning."""
    max_program_chars: int = 8_192
    """Longest program a proposal or an induction answer may hold."""
    max_input_chars: int = 4_096
    """Longest argument-list text of one input (proposals and abduction answers)."""
    max_message_chars: int = 2_048
    """Longest induction message."""
    max_output_chars: int = 65_536
    """Longest predicted output of a deduction answer (long gold outputs must stay answerable)."""
    max_reference_chars: int = 8_192
    """References whose program plus input/output texts are longer are left out of proposer prompts."""

    def __post_init__(self) -> None:
        if self.n_references < 1:
            raise ValueError("n_references must be at least 1: a proposer prompt needs a reference")
        if self.n_learnability_rollouts < 2:
            raise ValueError(
                "n_learnability_rollouts must be at least 2, or the solve rate is always 0 or 1 and the "
                "learnability reward always 0"
            )
        if not 2 <= self.min_induction_inputs <= self.max_induction_inputs:
            raise ValueError(
                "need 2 <= min_induction_inputs <= max_induction_inputs: an induction task shows half of "
                "its pairs and judges on the rest"
            )
        caps = (
            self.max_completion_chars,
            self.max_program_chars,
            self.max_input_chars,
            self.max_message_chars,
            self.max_output_chars,
            self.max_reference_chars,
        )
        if min(caps) < 1:
            raise ValueError("every max_*_chars cap must be positive")
        if max(caps[1:]) > self.max_completion_chars:
            raise ValueError("a field cap above max_completion_chars can never be reached; raise the latter")
        if not all(name.isidentifier() for name in self.allowed_imports):
            raise ValueError("allowed_imports must hold module names such as 'math'")
