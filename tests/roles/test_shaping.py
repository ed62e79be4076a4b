"""Format shaping: every case by hand for both roles, and infra errors never becoming a number."""

from __future__ import annotations

import pytest

from azr.core.task import Role
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
    Wrong,
    shape,
)

P, S = Role.PROPOSE, Role.SOLVE
INFRA = ExecError(ErrorCode.INFRA_ERROR, "worker died")
FORBIDDEN = Rejected(ExecError(ErrorCode.FORBIDDEN, "import of 'os' is not allowed"))
NOT_A_LITERAL = Rejected(ExecError(ErrorCode.BAD_ANSWER, "not a literal"))
MISSING = Broken(FormatFailure(FormatError.MISSING_ANSWER, "no <answer> tag"))

# (id, assessment, role, value, grade, cause)
SHAPED = [
    ("passable, full role reward", Passable(1.0), S, 1.0, Grade.PASSABLE, None),
    ("passable, learnability 0 (rate 0 or 1)", Passable(0.0), P, 0.0, Grade.PASSABLE, None),
    ("passable, learnability 7/8", Passable(0.875), P, 0.875, Grade.PASSABLE, None),
    ("solver: well formed but wrong", Wrong(), S, -0.5, Grade.WRONG, None),
    ("solver: answer that is not a literal", NOT_A_LITERAL, S, -0.5, Grade.WRONG, ErrorCode.BAD_ANSWER),
    ("solver: answer program forbidden", FORBIDDEN, S, -0.5, Grade.WRONG, ErrorCode.FORBIDDEN),
    ("proposer: program forbidden", FORBIDDEN, P, -1.0, Grade.BROKEN, ErrorCode.FORBIDDEN),
    (
        "proposer: nondeterministic",
        Rejected(ExecError(ErrorCode.NONDETERMINISTIC, "set order")),
        P,
        -1.0,
        Grade.BROKEN,
        ErrorCode.NONDETERMINISTIC,
    ),
    ("solver: broken format", MISSING, S, -1.0, Grade.BROKEN, FormatError.MISSING_ANSWER),
    ("proposer: broken format", MISSING, P, -1.0, Grade.BROKEN, FormatError.MISSING_ANSWER),
]


@pytest.mark.parametrize(
    ("assessment", "role", "value", "grade", "cause"), [s[1:] for s in SHAPED], ids=[s[0] for s in SHAPED]
)
def test_shaped_reward(assessment: Assessment, role: Role, value: float, grade: Grade, cause: object) -> None:
    reward = shape(assessment, role)
    assert isinstance(reward, Reward)
    assert (reward.value, reward.grade, reward.cause) == (value, grade, cause)
    assert reward.parts["format"] + reward.parts["validity"] + reward.parts["role"] == value
    causes = {k: v for k, v in reward.parts.items() if k.startswith("cause/")}
    assert causes == ({} if cause is None else {f"cause/{cause}": 1.0})


@pytest.mark.parametrize("role", [P, S])
@pytest.mark.parametrize(
    "assessment", [Unjudged(INFRA), Rejected(INFRA), Unjudged(ExecError(ErrorCode.FORBIDDEN, "x"))]
)
def test_unjudged_responses_get_no_reward(assessment: Assessment, role: Role) -> None:
    result = shape(assessment, role)
    assert isinstance(result, NoReward)
    assert result.error is assessment.error  # type: ignore[union-attr]


def test_unjudged_details_are_passed_on() -> None:
    result = shape(Unjudged(INFRA, {"rollouts_judged": 3.0}), P)
    assert isinstance(result, NoReward)
    assert result.details == {"rollouts_judged": 3.0}


def test_details_are_logged_but_do_not_change_the_value() -> None:
    reward = shape(Passable(0.5, details={"solve_rate": 0.5}), P)
    assert isinstance(reward, Reward)
    assert reward.value == 0.5
    assert reward.parts == {"format": 0.0, "validity": 0.0, "role": 0.5, "solve_rate": 0.5}


@pytest.mark.parametrize("name", ["role", "cause/forbidden"])
def test_details_cannot_overwrite_a_reward_part(name: str) -> None:
    with pytest.raises(ValueError, match=name):
        shape(Passable(0.0, details={name: 1.0}), P)
