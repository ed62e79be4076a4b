"""The solver's reward: r_solve = 1 if the executor judges the answer correct, else 0, shaped by
``azr.roles.shaping``.

Cases, from the executor's ``Judgement`` (see ``azr.executor.jobs``):

- the completion did not parse: broken (-1);
- ``ok`` false: the answer could not be judged (an executor failure, or a task found invalid while
  checking). Neither is the answer's doing, so there is no reward and the sample is retried or dropped;
- ``ok`` true with an error: well formatted but invalid (an answer that is not a literal, an input that
  makes ``f`` raise, a program the gate forbids or that fails): -0.5;
- ``ok`` true without an error: passable, r_solve.
"""

from __future__ import annotations

from azr.executor.jobs import Judgement
from azr.roles.errors import FormatFailure
from azr.roles.outcomes import SolveOutcome
from azr.roles.shaping import Assessment, Broken, NoReward, Passable, Rejected, Reward, Unjudged, shape
from azr.solver.parsing import Answer


def solve_reward(judgement: Judgement) -> float:
    """r_solve: 1.0 for a correct answer, else 0.0."""
    return 1.0 if judgement.ok and judgement.correct else 0.0


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
    return Passable(solve_reward(judgement))


def solver_reward(parsed: Answer | FormatFailure, judgement: Judgement | None) -> Reward | NoReward:
    """The shaped reward of one answer (see ``assess_answer``)."""
    return shape(assess_answer(parsed, judgement))


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
