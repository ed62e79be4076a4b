"""A labelled task written as the proposer writes a proposal.

Deduction and abduction: the task's program and its one input; induction: the task's inputs, one block
each, and its message. The ``<think>`` section restates the request, or gives the message; no reasoning
text is invented. ``parse_proposal`` reads each back to the task's program and inputs (tested).

The warm start learns these completions, and self-play's proposer demonstrations
(``selfplay.proposer_demonstrations``) imitate them, which keeps the proposer's answer format in place
while the solver's demonstrations train the same weights on another format.
"""

from __future__ import annotations

from azr.core.task import Task, TaskType
from azr.roles.completion import BlockKind, fenced, write_completion


def propose_completion(task: Task) -> str:
    """``task`` written as the proposer's answer: program and input, or induction inputs and message."""
    if task.type is TaskType.INDUCTION:
        blocks = [fenced(BlockKind.INPUT, i) for i in task.inputs]
        return write_completion(task.message, "\n".join([*blocks, fenced(BlockKind.MESSAGE, task.message)]))
    answer = f"{fenced(BlockKind.PYTHON, task.program)}\n{fenced(BlockKind.INPUT, task.inputs[0])}"
    return write_completion("a new program and input", answer)
