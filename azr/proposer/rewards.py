"""The proposer's reward: learnability of a valid proposal (or a constant), shaped by ``azr.roles.shaping``.

Learnability (Absolute Zero paper): with the mean solve rate of n solver rollouts on the proposed task,

    r_propose = 1 - rate   if 0 < rate < 1
              = 0          otherwise (a task nobody solves, or everybody solves, teaches nothing)

The rollouts MUST be sampled at the training temperature. The reference implementation decoded them
greedily, so the n rollouts were one answer repeated, the rate almost always 0 or 1 and the reward almost
always 0. ``LearnabilityRollouts`` records the temperature and refuses greedy decoding.

Shaped (``azr.roles.shaping``): a broken completion, or a proposal the executor rejects, gets -1 (the
paper counts only valid triplets as well formatted); a valid proposal gets r_propose.

Where we follow the paper over the reference code: a valid proposal with rate 0 or 1 gets r_propose = 0,
as Eq. 4 and 6 say. The reference code pays -0.5 for it (its "accuracy" of 0 falls into the wrong-answer
branch), which punishes a valid task as much as a wrong answer and pushes the proposer away from easy
but valid programs that the buffers need early on; the paper's 0 only withholds the reward.

The ablation (``RolesConfig.propose_reward = "constant"``): every valid proposal gets
``constant_propose_reward``, whatever its difficulty, and no learnability rollouts are sampled. The penalties
are unchanged, so a run with it differs from the paper's only in what the proposer is pushed toward beyond
validity; ``rollouts_needed`` tells the round how many rollouts to sample.

The message check (``RolesConfig.induction_message_check``, off as in the paper): an induction proposal's
message is a hint, and a wrong hint makes a task harder, which learnability pays for. With the check, n
more rollouts answer the task with its message removed; a message is misleading when the solve rate with it
is below the rate without it, and then the proposal earns 0 instead of its learnability (the task is still
valid: it joins its buffer without the message). A misleading message is not a broken or invalid proposal,
and with n rollouts a neutral message loses the comparison by chance, so it withholds the reward rather
than penalise.

Departures: rollouts the executor could not judge (``unjudged``) are left out of the rate rather than
counted as failures. A rate needs at least ``min_judged_fraction`` of the n rollouts judged (half by
default): with fewer there is no reward (``NoReward``, with ``rollouts_judged`` for counting), as for any
infra error, rather than a rate resting on one or two rollouts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from azr.core.task import Role, Task, TaskType
from azr.executor.errors import ErrorCode, ExecError
from azr.executor.jobs import Validation
from azr.proposer.parsing import induction_failure
from azr.roles.config import RolesConfig
from azr.roles.errors import FormatFailure
from azr.roles.outcomes import SolveOutcome
from azr.roles.shaping import Assessment, Broken, NoReward, Passable, Rejected, Reward, Unjudged, shape

SOLVE_RATE = "solve_rate"
"""The reward part that holds a proposal's measured solve rate; only learnability rewards carry it."""
SOLVE_RATE_WITHOUT_MESSAGE = "solve_rate_without_message"
"""The reward part that holds an induction proposal's solve rate with its message removed (message check)."""
MISLEADING_MESSAGE = "misleading_message"
"""The reward part that is 1.0 when the message check found the message misleading, else 0.0."""


@dataclass(frozen=True, slots=True)
class LearnabilityRollouts:
    """The solver rollouts that estimate a proposal's solve rate."""

    outcomes: tuple[SolveOutcome, ...]
    temperature: float
    """Sampling temperature the rollouts were decoded at; must be the training temperature, never 0."""

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ValueError(
                f"learnability rollouts were decoded at temperature {self.temperature}: greedy decoding "
                "makes every rollout the same answer, so sample them at the training temperature"
            )


def solve_rate(outcomes: Sequence[SolveOutcome]) -> float | None:
    """Mean solve rate over the judged rollouts; ``None`` when none was judged."""
    judged = [o for o in outcomes if o is not SolveOutcome.UNJUDGED]
    if not judged:
        return None
    return sum(o is SolveOutcome.SOLVED for o in judged) / len(judged)


def learnability(rate: float) -> float:
    """r_propose for a solve rate in [0, 1]."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"a solve rate lies in [0, 1], got {rate}")
    return 1.0 - rate if 0.0 < rate < 1.0 else 0.0


def assess_proposal(
    parsed: Task | FormatFailure,
    validation: Validation | None,
    rollouts: LearnabilityRollouts | None,
    config: RolesConfig,
    *,
    without_message: LearnabilityRollouts | None = None,
) -> Assessment:
    """Which shaping case a proposal is in.

    ``validation`` is the executor's verdict on the parsed task and ``rollouts`` the solver's attempts at the
    validated task; the verdict is needed for a well-formed proposal, and the rollouts when it is valid and
    rewarded by learnability (never with the constant reward, which takes none). ``without_message`` are the
    attempts at the task with its message removed, needed for a valid induction proposal under the message
    check (``checks_message``) and refused otherwise.
    """
    if isinstance(parsed, FormatFailure):
        return Broken(parsed)
    if parsed.type is TaskType.INDUCTION and (
        failure := induction_failure(parsed.inputs, parsed.message, config)
    ):
        return Broken(failure)
    if validation is None:
        raise ValueError("a well-formed proposal is rewarded after the executor has validated it")
    if validation.error is not None:
        if validation.error.code is ErrorCode.INFRA_ERROR:
            return Unjudged(validation.error)
        return Rejected(validation.error)
    if validation.outputs is None or len(validation.outputs) != len(parsed.inputs):
        raise ValueError("a valid proposal has exactly one gold output per input")
    if (without_message is not None) != checks_message(parsed.type, config):
        raise ValueError(
            "rollouts without the message come with a valid induction proposal under the message check, "
            "and only then"
        )
    if config.propose_reward == "constant":
        if rollouts is not None:
            raise ValueError("the constant propose reward takes no learnability rollouts; do not sample them")
        return Passable(config.constant_propose_reward)
    return _learnability_assessment(rollouts, without_message, config)


def _learnability_assessment(
    rollouts: LearnabilityRollouts | None, without_message: LearnabilityRollouts | None, config: RolesConfig
) -> Assessment:
    """r_propose of a valid proposal from its rollouts, or no reward when too few of them were judged."""
    if rollouts is None:
        raise ValueError("a valid proposal is rewarded after its learnability rollouts")
    rate = _judged_rate(rollouts, config)
    if isinstance(rate, Unjudged):
        return rate
    judged = sum(o is not SolveOutcome.UNJUDGED for o in rollouts.outcomes)
    assessment = Passable(learnability(rate), details={SOLVE_RATE: rate, "rollouts_judged": float(judged)})
    return assessment if without_message is None else _message_assessment(assessment, without_message, config)


def _message_assessment(
    with_message: Passable, without_message: LearnabilityRollouts, config: RolesConfig
) -> Assessment:
    """The learnability assessment of an induction proposal, withheld (0) when its message misleads."""
    rate_without = _judged_rate(without_message, config)
    if isinstance(rate_without, Unjudged):
        return rate_without
    misleading = with_message.details[SOLVE_RATE] < rate_without
    details = {
        **with_message.details,
        SOLVE_RATE_WITHOUT_MESSAGE: rate_without,
        MISLEADING_MESSAGE: float(misleading),
    }
    return Passable(0.0 if misleading else with_message.role_reward, details=details)


def _judged_rate(rollouts: LearnabilityRollouts, config: RolesConfig) -> float | Unjudged:
    """The solve rate of n rollouts, or ``Unjudged`` when too few of them were judged."""
    if len(rollouts.outcomes) != config.n_learnability_rollouts:
        raise ValueError(
            f"got {len(rollouts.outcomes)} learnability rollouts, config says n_learnability_rollouts="
            f"{config.n_learnability_rollouts}; report every rollout, unjudged ones included"
        )
    judged = sum(o is not SolveOutcome.UNJUDGED for o in rollouts.outcomes)
    needed = min_judged(config)
    rate = solve_rate(rollouts.outcomes)
    if rate is None or judged < needed:
        n = config.n_learnability_rollouts
        message = f"{judged} of {n} learnability rollouts judged, at least {needed} needed for a solve rate"
        return Unjudged(ExecError(ErrorCode.INFRA_ERROR, message), {"rollouts_judged": float(judged)})
    return rate


def checks_message(task_type: TaskType, config: RolesConfig) -> bool:
    """Whether valid proposals of ``task_type`` are also rolled out with their message removed."""
    return task_type is TaskType.INDUCTION and config.induction_message_check


def rollouts_needed(config: RolesConfig) -> int:
    """Learnability rollouts to sample per valid proposal: n, or none when the reward is the constant."""
    return config.n_learnability_rollouts if config.propose_reward == "learnability" else 0


def min_judged(config: RolesConfig) -> int:
    """Fewest judged learnability rollouts that give a solve rate (at least one)."""
    return max(1, math.ceil(config.min_judged_fraction * config.n_learnability_rollouts - 1e-9))


def proposer_reward(
    parsed: Task | FormatFailure,
    validation: Validation | None,
    rollouts: LearnabilityRollouts | None,
    config: RolesConfig,
    *,
    without_message: LearnabilityRollouts | None = None,
) -> Reward | NoReward:
    """The shaped reward of one proposal (see ``assess_proposal`` for what each argument must be)."""
    assessment = assess_proposal(parsed, validation, rollouts, config, without_message=without_message)
    return shape(assessment, Role.PROPOSE)
