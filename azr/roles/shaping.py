"""Format shaping: the one place where a response's assessment becomes the reward that is trained on.

The Absolute Zero paper (Eq. 6, its reward with format penalty) gives both roles the same shape:

    R(y) = r_role   if the response is passable
         = -0.5     if it is well formatted but wrong
         = -1       if its format is broken

What "passable" and "well formatted" mean is the role's (``azr.proposer.rewards``, ``azr.solver.rewards``);
the one place where the same executor verdict weighs differently by role is ``Rejected``:

- proposer: the paper counts only a valid triplet as well formatted, so a proposal the executor rejects
  (syntax error, forbidden import, nondeterminism, a timeout...) gets -1, like a broken completion. The
  reference code does the same (it sets the format score to 0 for an invalid program).
- solver: an answer the executor cannot use (not a literal, an input that makes ``f`` raise, an induction
  program that fails) is a well-formatted wrong answer: -0.5, as in the reference code.

Every non-passable reward keeps its cause (the format error or the executor's error class) in ``cause`` and
as a ``cause/<class>`` part of 1.0 in ``parts``, so that causes can be counted from the experience stream.

Departure from the paper, made explicit: a response the executor could not judge (``infra_error``, or a
task found invalid while an answer to it was checked, which is not the answer's doing) gets no reward at
all. ``shape`` returns ``NoReward`` for it, never a number, and the caller retries or drops the sample. An
``infra_error`` never becomes a number even if a role passes it in as a rejection.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from azr.core.task import Role
from azr.executor.errors import ErrorCode, ExecError
from azr.roles.errors import FormatError, FormatFailure

FORMAT_PENALTY = -1.0
WRONG_PENALTY = -0.5
CAUSE_PREFIX = "cause/"


class Grade(StrEnum):
    PASSABLE = "passable"  # the role reward applies
    WRONG = "wrong"  # well formatted but wrong (-0.5)
    BROKEN = "broken"  # the format is broken, or a proposal is not a valid triplet (-1)


@dataclass(frozen=True, slots=True)
class Broken:
    """The completion did not parse."""

    failure: FormatFailure


@dataclass(frozen=True, slots=True)
class Rejected:
    """Parsed, but the executor rejected it: an invalid proposal, an answer that is not a literal, an
    answer program that fails."""

    error: ExecError


@dataclass(frozen=True, slots=True)
class Wrong:
    """Well formatted and judged, but wrong (a solver answer)."""


@dataclass(frozen=True, slots=True)
class Unjudged:
    """The executor could not judge the response (for a proposal: it, or too many of its rollouts)."""

    error: ExecError
    details: Mapping[str, float] = field(default_factory=dict)
    """Diagnostics passed on to ``NoReward``."""


@dataclass(frozen=True, slots=True)
class Passable:
    """Well formatted and judged: ``role_reward`` is r_propose or r_solve."""

    role_reward: float
    details: Mapping[str, float] = field(default_factory=dict)
    """Diagnostics logged with the reward (a solve rate, say); they do not add to it."""


Assessment = Broken | Rejected | Wrong | Unjudged | Passable


@dataclass(frozen=True, slots=True)
class Reward:
    """A shaped reward. ``parts`` names its components for logging."""

    value: float
    grade: Grade
    cause: FormatError | ErrorCode | None
    """Why the response was not passable (a format error or the executor's error class)."""
    parts: Mapping[str, float]
    """``format``, ``validity`` and ``role`` sum to ``value``; any other key is a diagnostic
    (``cause/<class>`` = 1.0 names the cause of a non-passable reward)."""


@dataclass(frozen=True, slots=True)
class NoReward:
    """The response could not be judged; it must not be trained on (retry or drop it)."""

    error: ExecError
    details: Mapping[str, float] = field(default_factory=dict)
    """Diagnostics to count (how many learnability rollouts were judged, say)."""


def shape(assessment: Assessment, role: Role) -> Reward | NoReward:
    """Turn a role's assessment of one response into its training reward (see the module docstring)."""
    match assessment:
        case Broken(failure):
            return _reward(FORMAT_PENALTY, Grade.BROKEN, failure.error, format_part=FORMAT_PENALTY)
        case Unjudged(error, details):
            return NoReward(error, details)
        case Rejected(error) if error.code is ErrorCode.INFRA_ERROR:
            return NoReward(error)
        case Rejected(error):
            return _rejected(error, role)
        case Wrong():
            return _reward(WRONG_PENALTY, Grade.WRONG, None, validity_part=WRONG_PENALTY)
        case Passable(role_reward, details):
            reserved = {
                k for k in details if k in {"format", "validity", "role"} or k.startswith(CAUSE_PREFIX)
            }
            if reserved:
                raise ValueError(f"details may not reuse the reward part names {sorted(reserved)}")
            return _reward(role_reward, Grade.PASSABLE, None, role_part=role_reward, details=details)
    raise TypeError(f"not an assessment: {assessment!r}")


def _rejected(error: ExecError, role: Role) -> Reward:
    if role is Role.PROPOSE:  # only a valid triplet is well formatted
        return _reward(FORMAT_PENALTY, Grade.BROKEN, error.code, format_part=FORMAT_PENALTY)
    return _reward(WRONG_PENALTY, Grade.WRONG, error.code, validity_part=WRONG_PENALTY)


def _reward(
    value: float,
    grade: Grade,
    cause: FormatError | ErrorCode | None,
    *,
    format_part: float = 0.0,
    validity_part: float = 0.0,
    role_part: float = 0.0,
    details: Mapping[str, float] | None = None,
) -> Reward:
    parts = {"format": format_part, "validity": validity_part, "role": role_part, **(details or {})}
    if cause is not None:
        parts[f"{CAUSE_PREFIX}{cause.value}"] = 1.0
    return Reward(value=value, grade=grade, cause=cause, parts=parts)
