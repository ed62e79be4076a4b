"""Format shaping: the one place where a response's assessment becomes the reward that is trained on.

The Absolute Zero paper (its reward with format penalty) gives both roles the same shape:

    R(y) = r_role   if the response is passable
         = -0.5     if it is well formatted but wrong or invalid
         = -1       if its format is broken

Each role decides which case a response is in (``azr.proposer.rewards``, ``azr.solver.rewards``); this
module turns the case into numbers. Departure from the paper, made explicit: a response the executor could
not judge (``infra_error``, or a task found invalid while an answer to it was checked, which is not the
answer's doing) gets no reward at all. ``shape`` returns ``NoReward`` for it, never a number, and the
caller retries or drops the sample. An ``infra_error`` never becomes a number even if a role passes it in
as a rejection.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from azr.executor.errors import ErrorCode, ExecError
from azr.roles.errors import FormatError, FormatFailure

FORMAT_PENALTY = -1.0
INVALID_PENALTY = -0.5


class Grade(StrEnum):
    PASSABLE = "passable"  # the role reward applies
    INVALID = "invalid"  # well formatted but wrong or rejected by the executor
    BROKEN = "broken"  # the format is broken


@dataclass(frozen=True, slots=True)
class Broken:
    """The completion did not parse."""

    failure: FormatFailure


@dataclass(frozen=True, slots=True)
class Rejected:
    """Well formatted, but the executor rejected it: an invalid proposal, an answer that is not a literal,
    an answer program that fails."""

    error: ExecError


@dataclass(frozen=True, slots=True)
class Unjudged:
    """The executor could not judge the response (for a proposal: it, or every one of its rollouts)."""

    error: ExecError


@dataclass(frozen=True, slots=True)
class Passable:
    """Well formatted and judged: ``role_reward`` is r_propose or r_solve."""

    role_reward: float
    details: Mapping[str, float] = field(default_factory=dict)
    """Diagnostics logged with the reward (a solve rate, say); they do not add to it."""


Assessment = Broken | Rejected | Unjudged | Passable


@dataclass(frozen=True, slots=True)
class Reward:
    """A shaped reward. ``parts`` names its components for logging."""

    value: float
    grade: Grade
    cause: FormatError | ErrorCode | None
    """Why the response was not passable (a format error or the executor's error class)."""
    parts: Mapping[str, float]
    """``format``, ``validity`` and ``role`` sum to ``value``; any other key is a diagnostic."""


@dataclass(frozen=True, slots=True)
class NoReward:
    """The response could not be judged; it must not be trained on (retry or drop it)."""

    error: ExecError


def shape(assessment: Assessment) -> Reward | NoReward:
    """Turn a role's assessment of one response into its training reward (see the module docstring)."""
    match assessment:
        case Broken(failure):
            return _reward(FORMAT_PENALTY, Grade.BROKEN, failure.error, format_part=FORMAT_PENALTY)
        case Unjudged(error):
            return NoReward(error)
        case Rejected(error) if error.code is ErrorCode.INFRA_ERROR:
            return NoReward(error)
        case Rejected(error):
            return _reward(INVALID_PENALTY, Grade.INVALID, error.code, validity_part=INVALID_PENALTY)
        case Passable(role_reward, details):
            reserved = details.keys() & {"format", "validity", "role"}
            if reserved:
                raise ValueError(f"details may not reuse the reward part names {sorted(reserved)}")
            return _reward(role_reward, Grade.PASSABLE, None, role_part=role_reward, details=details)
    raise TypeError(f"not an assessment: {assessment!r}")


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
    return Reward(value=value, grade=grade, cause=cause, parts=parts)
