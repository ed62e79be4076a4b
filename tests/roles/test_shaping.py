"""Format shaping: every case by hand, and infra errors never becoming a number."""

from __future__ import annotations

import pytest

from azr.executor.errors import ErrorCode, ExecError
from azr.roles.errors import FormatError, FormatFailure
from azr.roles.shaping import (
    Assessment,
    Broken,
    Grade,
    NoReward,
    Passable,
    Rejected,
    Reward,
    Unjudged,
    shape,
)

INFRA = ExecError(ErrorCode.INFRA_ERROR, "worker died")

# (id, assessment, value, grade, cause)
SHAPED = [
    ("passable, full role reward", Passable(1.0), 1.0, Grade.PASSABLE, None),
    ("passable, zero role reward", Passable(0.0), 0.0, Grade.PASSABLE, None),
    ("passable, learnability 7/8", Passable(0.875), 0.875, Grade.PASSABLE, None),
    (
        "well formed but invalid program",
        Rejected(ExecError(ErrorCode.FORBIDDEN, "import of 'os' is not allowed")),
        -0.5,
        Grade.INVALID,
        ErrorCode.FORBIDDEN,
    ),
    (
        "well formed answer that is not a literal",
        Rejected(ExecError(ErrorCode.BAD_ANSWER, "not a literal")),
        -0.5,
        Grade.INVALID,
        ErrorCode.BAD_ANSWER,
    ),
    (
        "nondeterministic proposal",
        Rejected(ExecError(ErrorCode.NONDETERMINISTIC, "set order")),
        -0.5,
        Grade.INVALID,
        ErrorCode.NONDETERMINISTIC,
    ),
    (
        "broken format",
        Broken(FormatFailure(FormatError.MISSING_ANSWER, "no <answer> tag")),
        -1.0,
        Grade.BROKEN,
        FormatError.MISSING_ANSWER,
    ),
    (
        "truncated",
        Broken(FormatFailure(FormatError.TRUNCATED, "fence never closed")),
        -1.0,
        Grade.BROKEN,
        FormatError.TRUNCATED,
    ),
]


@pytest.mark.parametrize(
    ("assessment", "value", "grade", "cause"), [s[1:] for s in SHAPED], ids=[s[0] for s in SHAPED]
)
def test_shaped_reward(assessment: Assessment, value: float, grade: Grade, cause: object) -> None:
    reward = shape(assessment)
    assert isinstance(reward, Reward)
    assert (reward.value, reward.grade, reward.cause) == (value, grade, cause)
    assert reward.parts["format"] + reward.parts["validity"] + reward.parts["role"] == value


@pytest.mark.parametrize(
    "assessment", [Unjudged(INFRA), Rejected(INFRA), Unjudged(ExecError(ErrorCode.FORBIDDEN, "x"))]
)
def test_unjudged_responses_get_no_reward(assessment: Assessment) -> None:
    result = shape(assessment)
    assert isinstance(result, NoReward)
    assert not isinstance(result, (int, float))
    assert result.error is assessment.error  # type: ignore[union-attr]


def test_details_are_logged_but_do_not_change_the_value() -> None:
    reward = shape(Passable(0.5, details={"solve_rate": 0.5}))
    assert isinstance(reward, Reward)
    assert reward.value == 0.5
    assert reward.parts == {"format": 0.0, "validity": 0.0, "role": 0.5, "solve_rate": 0.5}


def test_details_cannot_overwrite_a_reward_part() -> None:
    with pytest.raises(ValueError, match="role"):
        shape(Passable(0.0, details={"role": 1.0}))
