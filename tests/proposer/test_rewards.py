"""The proposer's learnability reward, by hand, its constant ablation, and its shaping."""

from __future__ import annotations

import pytest

from azr.core.task import Task, TaskType
from azr.executor.errors import ErrorCode, ExecError
from azr.executor.jobs import Validation
from azr.proposer.rewards import (
    MISLEADING_MESSAGE,
    SOLVE_RATE,
    SOLVE_RATE_WITHOUT_MESSAGE,
    LearnabilityRollouts,
    learnability,
    proposer_reward,
    rollouts_needed,
    solve_rate,
)
from azr.roles.config import RolesConfig
from azr.roles.errors import FormatError, FormatFailure
from azr.roles.outcomes import SolveOutcome
from azr.roles.shaping import Grade, NoReward, Reward

CONFIG = RolesConfig()
CONSTANT = RolesConfig(propose_reward="constant", constant_propose_reward=0.3)
S, U, X = SolveOutcome.SOLVED, SolveOutcome.UNSOLVED, SolveOutcome.UNJUDGED
PROPOSAL = Task(TaskType.DEDUCTION, "def f(x):\n    return x * 3", ("4",))
VALID = Validation(outputs=("12",), error=None)


def rollouts(*outcomes: SolveOutcome, temperature: float = 1.0) -> LearnabilityRollouts:
    return LearnabilityRollouts(tuple(outcomes), temperature)


@pytest.mark.parametrize(
    ("solved", "reward"),
    [(0, 0.0), (1, 0.875), (4, 0.5), (7, 0.125), (8, 0.0)],
    ids=["rate 0", "rate 1/8", "rate 1/2", "rate 7/8", "rate 1"],
)
def test_learnability_by_hand(solved: int, reward: float) -> None:
    """Rate 0 or 1 gives 0, as the paper says (the reference code pays -0.5 there)."""
    outcomes = rollouts(*[S] * solved, *[U] * (8 - solved))
    result = proposer_reward(PROPOSAL, VALID, outcomes, CONFIG)
    assert isinstance(result, Reward)
    assert result.value == reward
    assert result.grade is Grade.PASSABLE
    assert result.parts["solve_rate"] == solved / 8


def test_learnability_formula() -> None:
    assert [learnability(r) for r in (0.0, 0.25, 1.0)] == [0.0, 0.75, 0.0]
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        learnability(1.5)


def test_greedy_rollouts_are_refused() -> None:
    """Reference defect 6: greedy learnability rollouts make the solve rate 0 or 1 and the reward 0."""
    with pytest.raises(ValueError, match="training temperature"):
        rollouts(*[S] * 8, temperature=0.0)


def test_every_rollout_must_be_reported() -> None:
    with pytest.raises(ValueError, match="n_learnability_rollouts=8"):
        proposer_reward(PROPOSAL, VALID, rollouts(S, U, U), CONFIG)


def test_unjudged_rollouts_are_left_out_of_the_rate() -> None:
    assert solve_rate([S, U, X, X, X, X, X, X]) == 0.5
    result = proposer_reward(PROPOSAL, VALID, rollouts(S, U, U, S, S, X, X, X), CONFIG)
    assert isinstance(result, Reward)
    assert (result.value, result.parts["rollouts_judged"]) == (0.4, 5.0)


@pytest.mark.parametrize(("judged", "rewarded"), [(0, False), (1, False), (3, False), (4, True), (8, True)])
def test_half_of_the_rollouts_must_be_judged(judged: int, rewarded: bool) -> None:
    outcomes = rollouts(*[S, U] * (judged // 2), *[S] * (judged % 2), *[X] * (8 - judged))
    result = proposer_reward(PROPOSAL, VALID, outcomes, CONFIG)
    assert isinstance(result, Reward) is rewarded
    if isinstance(result, NoReward):
        assert result.error.code is ErrorCode.INFRA_ERROR
        assert result.details == {"rollouts_judged": float(judged)}


def test_the_judged_fraction_is_configurable() -> None:
    outcomes = rollouts(S, U, X, X, X, X, X, X)
    assert isinstance(
        proposer_reward(PROPOSAL, VALID, outcomes, RolesConfig(min_judged_fraction=0.25)), Reward
    )
    assert isinstance(proposer_reward(PROPOSAL, VALID, outcomes, CONFIG), NoReward)


def test_the_constant_reward_pays_every_valid_proposal_the_same() -> None:
    result = proposer_reward(PROPOSAL, VALID, None, CONSTANT)
    assert isinstance(result, Reward)
    assert (result.value, result.grade, result.cause) == (0.3, Grade.PASSABLE, None)
    assert result.parts == {"format": 0.0, "validity": 0.0, "role": 0.3}


def test_the_constant_reward_samples_no_rollouts() -> None:
    assert (rollouts_needed(CONFIG), rollouts_needed(CONSTANT)) == (8, 0)
    with pytest.raises(ValueError, match="takes no learnability rollouts"):
        proposer_reward(PROPOSAL, VALID, rollouts(*[S] * 8), CONSTANT)


def rejected(code: ErrorCode) -> Validation:
    return Validation(None, ExecError(code, "rejected"))


# Every (format, executor verdict) pair of a proposal: (id, parsed, validation, value, cause). Valid
# proposals are rewarded by learnability (above); -0.5 never occurs for a proposal.
SHAPED = [
    ("broken format", FormatFailure(FormatError.NO_CODE_BLOCK, "x"), None, -1.0, FormatError.NO_CODE_BLOCK),
    ("truncated", FormatFailure(FormatError.TRUNCATED, "x"), None, -1.0, FormatError.TRUNCATED),
    *[
        (f"well formatted, rejected: {code.value}", PROPOSAL, rejected(code), -1.0, code)
        for code in ErrorCode
        if code is not ErrorCode.INFRA_ERROR
    ],
    (
        "induction task below the input minimum (not from the parser)",
        Task(TaskType.INDUCTION, "def f(x):\n    return x", ("1", "2", "3"), message="identity"),
        Validation(("1", "2", "3"), None),
        -1.0,
        FormatError.TOO_FEW_INPUTS,
    ),
    (
        "induction task without a message (not from the parser)",
        Task(TaskType.INDUCTION, "def f(x):\n    return x", tuple(map(str, range(10)))),
        Validation(tuple(map(str, range(10))), None),
        -1.0,
        FormatError.MISSING_MESSAGE,
    ),
]


@pytest.mark.parametrize("config", [CONFIG, CONSTANT], ids=["learnability", "constant"])
@pytest.mark.parametrize(
    ("parsed", "validation", "value", "cause"), [s[1:] for s in SHAPED], ids=[s[0] for s in SHAPED]
)
def test_shaped_proposer_reward(
    parsed: Task | FormatFailure,
    validation: Validation | None,
    value: float,
    cause: object,
    config: RolesConfig,
) -> None:
    """The penalties are the same whatever a valid proposal earns."""
    result = proposer_reward(parsed, validation, None, config)
    assert isinstance(result, Reward)
    assert (result.value, result.grade, result.cause) == (value, Grade.BROKEN, cause)
    assert result.parts[f"cause/{cause}"] == 1.0


def test_infra_error_in_validation_gives_no_reward() -> None:
    result = proposer_reward(
        PROPOSAL, Validation(None, ExecError(ErrorCode.INFRA_ERROR, "pipe")), None, CONFIG
    )
    assert isinstance(result, NoReward)


def test_missing_inputs_of_the_reward_are_caller_bugs() -> None:
    with pytest.raises(ValueError, match="validated"):
        proposer_reward(PROPOSAL, None, None, CONFIG)
    with pytest.raises(ValueError, match="learnability rollouts"):
        proposer_reward(PROPOSAL, VALID, None, CONFIG)
    with pytest.raises(ValueError, match="one gold output per input"):
        proposer_reward(PROPOSAL, Validation(("1", "2"), None), rollouts(*[S] * 8), CONFIG)


CHECKED = RolesConfig(induction_message_check=True, n_learnability_rollouts=4)
INDUCTION = Task(
    TaskType.INDUCTION, "def f(x):\n    return x - 9", tuple(map(str, range(10))), message="negates x"
)
INDUCTION_VALID = Validation(tuple(str(i - 9) for i in range(10)), None)


@pytest.mark.parametrize(
    ("with_message", "without_message", "value", "misleading"),
    [
        ((S, U, U, U), (S, S, U, U), 0.0, True),  # 1/4 < 2/4: withheld, although learnability is 0.75
        ((S, S, U, U), (S, U, U, U), 0.5, False),  # the message helps: its learnability
        ((S, S, U, U), (S, U, S, U), 0.5, False),  # no worse than without it: its learnability
        ((U, U, U, U), (S, U, U, U), 0.0, True),  # misleading and unsolved: 0 either way
    ],
    ids=["misleads", "helps", "neutral", "misleads, unsolved"],
)
def test_a_misleading_induction_message_earns_nothing(
    with_message: tuple[SolveOutcome, ...],
    without_message: tuple[SolveOutcome, ...],
    value: float,
    misleading: bool,
) -> None:
    result = proposer_reward(
        INDUCTION,
        INDUCTION_VALID,
        rollouts(*with_message),
        CHECKED,
        without_message=rollouts(*without_message),
    )
    assert isinstance(result, Reward)
    assert (result.value, result.grade) == (value, Grade.PASSABLE), "withheld, not penalised"
    assert result.parts[SOLVE_RATE] == solve_rate(with_message)
    assert result.parts[SOLVE_RATE_WITHOUT_MESSAGE] == solve_rate(without_message)
    assert result.parts[MISLEADING_MESSAGE] == float(misleading)


def test_the_message_check_needs_judged_rollouts_without_the_message() -> None:
    result = proposer_reward(
        INDUCTION, INDUCTION_VALID, rollouts(S, U, U, U), CHECKED, without_message=rollouts(S, X, X, X)
    )
    assert isinstance(result, NoReward)
    assert result.error.code is ErrorCode.INFRA_ERROR


def test_rollouts_without_the_message_come_with_checked_induction_proposals_only() -> None:
    with pytest.raises(ValueError, match="without the message"):
        proposer_reward(INDUCTION, INDUCTION_VALID, rollouts(S, U, U, U), CHECKED)
    unchecked = RolesConfig(n_learnability_rollouts=4)
    with pytest.raises(ValueError, match="without the message"):
        proposer_reward(
            INDUCTION, INDUCTION_VALID, rollouts(S, U, U, U), unchecked, without_message=rollouts(S, U, U, U)
        )
    with pytest.raises(ValueError, match="without the message"):
        proposer_reward(PROPOSAL, VALID, rollouts(S, U, U, U), CHECKED, without_message=rollouts(S, U, U, U))


def test_the_message_check_needs_the_learnability_reward() -> None:
    with pytest.raises(ValueError, match="constant propose reward samples none"):
        RolesConfig(induction_message_check=True, propose_reward="constant")
