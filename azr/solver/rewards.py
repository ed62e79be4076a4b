"""The solver's reward, shaped by ``azr.roles.shaping``: exactly 1, -0.5 or -1 (paper Eq. 5 and 6).

Cases, from the executor's ``Judgement`` (see ``azr.executor.jobs``):

- the completion did not parse: broken, -1;
- ``ok`` false: the answer could not be judged (an executor failure, or a task found invalid while
  checking). Neither is the answer's doing, so there is no reward and the sample is retried or dropped;
- ``ok`` true with an error: well formatted, but the executor could not use the answer (not a literal, an
  input that makes ``f`` raise, a program the gate forbids or that fails): -0.5, its error class kept;
- ``ok`` true and wrong: -0.5;
- ``ok`` true and correct: r_solve = 1.

An induction answer is correct when it gives every held-out output (the executor's verdict); the
reference code can also pay the fraction of held-out pairs right (its ``code_f_reward_type``), which the
paper's binary r_solve does not, so neither do we.
"""

from __future__ import annotations

from azr.core.task import Role
from azr.executor.jobs import Judgement
from azr.roles.errors import FormatFailure
from azr.roles.outcomes import SolveOutcome
from azr.roles.shaping import (
    Assessment,
    Broken,
    NoReward,
    Passable,
    Rejected,
    Reward,
    Unjudged,
    Wrong,
    shape,
)
from azr.solver.parsing import Answer

R_SOLVE_CORRECT = 1.0


def assess_answer(parsed: Answer | FormatFailure, judgement: Judgement | None) -> Assessment:
    """Which shaping case an answer is in; a parsed answer needs the executor's judgement."""
    if isinstance(parsed, FormatFailure):
        return Broken(parsed)
    if judgement is None:
        raise ValueError("a well-formed answer is rewarded after the executor has checked it")
    if not judgement.ok:
        assert judgement.error is not None  # Judgement guarantees it; narrows the type
        return Unjudged(judgement.error)
    if judgement.error is not None:
        return Rejected(judgement.error)
    return Passable(R_SOLVE_CORRECT) if judgement.correct else Wrong()


def solver_reward(parsed: Answer | FormatFailure, judgement: Judgement | None) -> Reward | NoReward:
    """The shaped reward of one answer (see ``assess_answer``)."""
    return shape(assess_answer(parsed, judgement), Role.SOLVE)


def solve_outcome(parsed: Answer | FormatFailure, judgement: Judgement | None) -> SolveOutcome:
    """What one learnability rollout came to: an unparseable answer is unsolved, an unjudged one says
    nothing."""
    if isinstance(parsed, FormatFailure):
        return SolveOutcome.UNSOLVED
    if judgement is None:
        raise ValueError("a well-formed answer needs the executor's judgement")
    if not judgement.ok:
        return SolveOutcome.UNJUDGED
    return SolveOutcome.SOLVED if judgement.correct else SolveOutcome.UNSOLVED
