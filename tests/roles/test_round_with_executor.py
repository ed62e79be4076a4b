"""One self-play round per task type through the real executor: prompt, parse, validate, solve, check,
reward. The completions are written out here in place of a model; everything else is the real thing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from azr.core.task import ZERO_SEED, Task, TaskType, zero_seed
from azr.executor.errors import ErrorCode
from azr.executor.pool import SyncExecutorPool
from azr.proposer.parsing import parse_proposal
from azr.proposer.prompts import ProposalRequest, proposer_prompt
from azr.proposer.rewards import LearnabilityRollouts, proposer_reward
from azr.roles.config import RolesConfig
from azr.roles.outcomes import SolveOutcome
from azr.roles.shaping import Reward
from azr.solver.parsing import Answer, parse_answer
from azr.solver.prompts import solver_prompt
from azr.solver.rewards import solve_outcome, solver_reward

CONFIG = RolesConfig()
WEIGHTED_SUM = "\n".join(
    [
        "def f(xs):",
        "    total = 0",
        "    for i, x in enumerate(xs):",
        "        total += x * (i + 1)",
        "    return total",
    ]
)


@pytest.fixture(scope="module")
def executor() -> Iterator[SyncExecutorPool]:
    with SyncExecutorPool(backend="local", workers=1) as pool:
        yield pool


def think(answer: str) -> str:
    return f"Let me work through it step by step.\n</think>\n<answer>\n{answer}\n</answer>"


def value(reward: object) -> float:
    assert isinstance(reward, Reward), reward
    return reward.value


def propose(executor: SyncExecutorPool, request: ProposalRequest, completion: str) -> Task:
    assert proposer_prompt(request, CONFIG).body
    task = parse_proposal(completion, request, CONFIG)
    assert isinstance(task, Task), task
    validation = executor.validate(task)
    assert validation.outputs is not None, validation.error
    return task.with_outputs(validation.outputs)


def solve(executor: SyncExecutorPool, task: Task, completion: str) -> tuple[float, SolveOutcome]:
    assert solver_prompt(task, CONFIG).body
    parsed = parse_answer(completion, task.type, CONFIG)
    judgement = executor.check(task, parsed.text) if isinstance(parsed, Answer) else None
    return value(solver_reward(parsed, judgement)), solve_outcome(parsed, judgement)


def test_deduction_round(executor: SyncExecutorPool) -> None:
    request = ProposalRequest(TaskType.DEDUCTION, (ZERO_SEED,))
    proposal = think(f"```python\n{WEIGHTED_SUM}\n```\n```input\n[3, 1, 2]\n```")
    task = propose(executor, request, proposal)
    assert task.outputs == ("11",)

    answers = [
        (think("```output\n11\n```"), 1.0),
        (think("```output\n11\n```"), 1.0),
        (think("```output\n11\n```"), 1.0),
        (think("```output\n10\n```"), -0.5),
        (think("```output\n6\n```"), -0.5),
        (think("```output\n'11'\n```"), -0.5),  # a string is not an int
        (think("```output\neleven\n```"), -0.5),  # well formed, not a literal
        ("I think it is 11.", -1.0),  # no answer tags
    ]
    outcomes = []
    for completion, expected in answers:
        reward, outcome = solve(executor, task, completion)
        assert reward == expected, completion
        outcomes.append(outcome)
    # 3 of 8 solved: r_propose = 1 - 3/8.
    assert (
        value(
            proposer_reward(task, executor.validate(task), LearnabilityRollouts(tuple(outcomes), 1.0), CONFIG)
        )
        == 0.625
    )


def test_abduction_round(executor: SyncExecutorPool) -> None:
    request = ProposalRequest(TaskType.ABDUCTION, (ZERO_SEED,))
    rejected = parse_proposal(
        think("```python\nimport os\ndef f(x):\n    return os.getcwd()\n```\n```input\n1\n```"),
        request,
        CONFIG,
    )
    assert isinstance(rejected, Task)
    reward = proposer_reward(rejected, executor.validate(rejected), None, CONFIG)
    # Only a valid triplet is well formatted: a rejected proposal costs as much as a broken one.
    assert isinstance(reward, Reward) and (reward.value, reward.cause) == (-1.0, ErrorCode.FORBIDDEN)

    task = propose(executor, request, think(f"```python\n{WEIGHTED_SUM}\n```\n```input\n[3, 1, 2]\n```"))
    assert solve(executor, task, think("```input\n[11]\n```"))[0] == 1.0  # any input with the output is right
    assert solve(executor, task, think("```input\n[1, 5]\n```"))[0] == 1.0
    assert solve(executor, task, think("```input\n[2]\n```"))[0] == -0.5
    # Reference defect 2: an answer pasted into code as `f([9]) or True or (0)` would score 1.
    assert solve(executor, task, think("```input\n[9]) or True or (0\n```"))[0] == -0.5


def test_induction_round(executor: SyncExecutorPool) -> None:
    source = propose(
        executor,
        ProposalRequest(TaskType.DEDUCTION, (ZERO_SEED,)),
        think(f"```python\n{WEIGHTED_SUM}\n```\n```input\n[3, 1, 2]\n```"),
    )
    inputs = [
        "[]",
        "[1]",
        "[2]",
        "[1, 1]",
        "[0, 5]",
        "[3, 1, 2]",
        "[-1, 4]",
        "[10, 0, 1]",
        "[2, 2, 2, 2]",
        "[7, -3]",
    ]
    blocks = "\n".join(f"```input\n{i}\n```" for i in inputs)
    message = "```message\nEach number counts as many times as its position, starting from one.\n```"
    task = propose(executor, ProposalRequest(TaskType.INDUCTION, (source,)), think(f"{blocks}\n{message}"))
    assert task.outputs[:3] == ("0", "1", "2")

    right = "def f(xs):\n    return sum((i + 1) * x for i, x in enumerate(xs))"
    assert solve(executor, task, think(f"```python\n{right}\n```"))[0] == 1.0
    memorised = "def f(xs):\n    return {(): 0, (1,): 1, (2,): 2, (1, 1): 3, (0, 5): 10}.get(tuple(xs), 0)"
    assert solve(executor, task, think(f"```py\n{memorised}\n```"))[0] == -0.5
    # Reference defect 9: programs written by the induction solver go through the gate too.
    escape = "import os\ndef f(xs):\n    return os.system('true')"
    assert solve(executor, task, think(f"```python\n{escape}\n```"))[0] == -0.5


def test_induction_zero_seed_is_valid_with_its_stored_outputs(executor: SyncExecutorPool) -> None:
    validation = executor.validate(zero_seed(TaskType.INDUCTION))
    assert validation.outputs == zero_seed(TaskType.INDUCTION).outputs, validation.error
    right = "def f(x):\n    return x"
    assert solve(executor, zero_seed(TaskType.INDUCTION), think(f"```python\n{right}\n```"))[0] == 1.0
