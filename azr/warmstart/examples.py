"""Supervised examples in the exact formats of both roles: the prompts the self-play loop shows, and the
completions its parsers accept.

From one labelled task (program, inputs, gold outputs computed by the executor) come two examples:

- the solver's: the role's prompt for the task, answered with the gold value (deduction: the output,
  abduction: the input, induction: the program);
- the proposer's: for deduction and abduction, a prompt showing other labelled tasks as references,
  answered with this task's program and input; for induction, a prompt giving this task's program,
  answered with its inputs and message.

Every completion ends with a short ``<think>`` section that restates the question (no reasoning text
is invented) and the answer in fenced blocks rendered by ``azr.roles.completion.fenced``, so that the
roles' own parsers read it back exactly; ``azr.warmstart.data`` checks that they do, and that the
executor accepts every answer and every proposal. The completions are ``azr.solver.gold``'s and
``azr.proposer.gold``'s, the ones self-play's demonstrations imitate.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from azr.core.task import Role, Task, TaskType
from azr.proposer.gold import propose_completion
from azr.proposer.prompts import ProposalRequest, proposer_prompt
from azr.roles.config import RolesConfig
from azr.roles.templates import Prompt
from azr.solver.gold import gold_completion
from azr.solver.prompts import solver_prompt

MAX_REFERENCES = 2
"""References shown in a warm-start proposer prompt: fewer than self-play's K keeps prompts (and the CPU
cost of training on them) short; the format is the same."""


@dataclass(frozen=True, slots=True)
class Example:
    """One supervised example: a role's prompt and the completion to learn."""

    role: Role
    type: TaskType
    prompt: Prompt
    completion: str
    task: Task
    """The labelled task the example answers (solve) or proposes (propose)."""
    request: ProposalRequest | None = None
    """The proposal request the prompt was built from (propose examples only)."""


def solve_example(task: Task, config: RolesConfig) -> Example:
    """The solver's prompt for a labelled ``task`` and its gold answer."""
    return Example(Role.SOLVE, task.type, solver_prompt(task, config), gold_completion(task), task)


def examples_for(
    task: Task, pool: Sequence[Task], config: RolesConfig, rng: random.Random
) -> tuple[Example, Example]:
    """The solve and the propose example of a labelled ``task``; ``pool`` holds labelled tasks of the same
    type to draw proposer references from (``task`` itself is never its own reference)."""
    solve = solve_example(task, config)
    if task.type is TaskType.INDUCTION:
        request = ProposalRequest(TaskType.INDUCTION, (task,))
    else:
        others = [t for t in pool if t.id != task.id and t.program != task.program]
        count = min(len(others), rng.randint(1, MAX_REFERENCES))
        if count == 0:
            raise ValueError(f"no reference to show for {task.id}: the pool holds no other program")
        request = ProposalRequest(task.type, tuple(rng.sample(others, count)))
    propose = Example(
        Role.PROPOSE, task.type, proposer_prompt(request, config), propose_completion(task), task, request
    )
    return solve, propose
