"""The solver's reward from the executor's judgement, by hand, and the rollout outcomes for learnability."""

from __future__ import annotations

import pytest

from azr.executor.errors import ErrorCode, ExecError
from azr.executor.jobs import Judgement
from azr.roles.errors import FormatError, FormatFailure
from azr.roles.outcomes import SolveOutcome
from azr.roles.shaping import Grade, NoReward, Reward
from azr.solver.parsing import Answer
from azr.solver.rewards import solve_outcome, solver_reward

ANSWER = Answer("4")
BROKEN = FormatFailure(FormatError.NO_OUTPUT_BLOCK, "no ```output block")
CORRECT = Judgement(ok=True, correct=True, error=None)
WRONG = Judgement.wrong()
NOT_A_LITERAL = Judgement.wrong(ExecError(ErrorCode.BAD_ANSWER, "not a literal"))
RAISES = Judgement.wrong(ExecError(ErrorCode.RUNTIME_ERROR, "ZeroDivisionError"))
FORBIDDEN_PROGRAM = Judgement.wrong(ExecError(ErrorCode.FORBIDDEN, "import of 'os' is not allowed"))
INFRA = Judgement.invalid(ExecError(ErrorCode.INFRA_ERROR, "worker died"))
TASK_INVALID = Judgement.invalid(ExecError(ErrorCode.TIMEOUT, "the task's program timed out"))

TIMES_OUT = Judgement.wrong(ExecError(ErrorCode.TIMEOUT, "the answer program ran 5 s"))

# Every (format, verdict) pair: (id, (parsed, judgement), (value, grade, cause), outcome for learnability).
SHAPED = [
    ("well formatted, correct", (ANSWER, CORRECT), (1.0, Grade.PASSABLE, None), SolveOutcome.SOLVED),
    ("well formatted, wrong", (ANSWER, WRONG), (-0.5, Grade.WRONG, None), SolveOutcome.UNSOLVED),
    (
        "well formatted, not a literal",
        (ANSWER, NOT_A_LITERAL),
        (-0.5, Grade.WRONG, ErrorCode.BAD_ANSWER),
        SolveOutcome.UNSOLVED,
    ),
    (
        "well formatted, input makes f raise",
        (ANSWER, RAISES),
        (-0.5, Grade.WRONG, ErrorCode.RUNTIME_ERROR),
        SolveOutcome.UNSOLVED,
    ),
    (
        "well formatted, forbidden program",
        (ANSWER, FORBIDDEN_PROGRAM),
        (-0.5, Grade.WRONG, ErrorCode.FORBIDDEN),
        SolveOutcome.UNSOLVED,
    ),
    (
        "well formatted, program times out",
        (ANSWER, TIMES_OUT),
        (-0.5, Grade.WRONG, ErrorCode.TIMEOUT),
        SolveOutcome.UNSOLVED,
    ),
    (
        "broken format, not judged",
        (BROKEN, None),
        (-1.0, Grade.BROKEN, FormatError.NO_OUTPUT_BLOCK),
        SolveOutcome.UNSOLVED,
    ),
]


@pytest.mark.parametrize(
    ("response", "expected", "outcome"), [s[1:] for s in SHAPED], ids=[s[0] for s in SHAPED]
)
def test_solver_reward(
    response: tuple[Answer | FormatFailure, Judgement | None],
    expected: tuple[float, Grade, object],
    outcome: SolveOutcome,
) -> None:
    reward = solver_reward(*response)
    assert isinstance(reward, Reward)
    assert (reward.value, reward.grade, reward.cause) == expected
    assert reward.value in {1.0, -0.5, -1.0}
    assert solve_outcome(*response) is outcome


@pytest.mark.parametrize("judgement", [INFRA, TASK_INVALID], ids=["infra error", "task invalid when checked"])
def test_unjudged_answers_get_no_reward(judgement: Judgement) -> None:
    result = solver_reward(ANSWER, judgement)
    assert isinstance(result, NoReward)
    assert result.error == judgement.error
    assert solve_outcome(ANSWER, judgement) is SolveOutcome.UNJUDGED


def test_a_parsed_answer_needs_a_judgement() -> None:
    with pytest.raises(ValueError, match="checked"):
        solver_reward(ANSWER, None)
