"""The executor's gold answer to a labelled task, written as the solver writes an answer.

Deduction is answered with the gold output, abduction with the task's own input (one input the program
maps to the gold output), induction with the program. The ``<think>`` section restates the given value
(deduction's input, abduction's output) or the task's message, on a line of its own as the prompt's
fenced block holds it: the copy then has the same tokens as its source. Written inline, as ``f([3])``, the
byte-level pre-tokenizer merges punctuation runs (``([``, ``])``), so a tiny model would have to learn a
translation before it could copy. No reasoning text is invented.

The warm start learns these completions, and self-play's demonstrations (``selfplay.demonstrations``)
imitate them; ``parse_answer`` reads each back exactly (tested).
"""

from __future__ import annotations

from azr.core.task import Task, TaskType
from azr.roles.completion import BlockKind, fenced, write_completion


def gold_completion(task: Task) -> str:
    """The gold answer to ``task`` (with its outputs) in the solver's format."""
    if not task.outputs:
        raise ValueError(
            f"task {task.id} has no gold outputs: the executor computes them before it is answered"
        )
    if task.type is TaskType.DEDUCTION:
        return write_completion(f"\n{task.inputs[0]}\n", fenced(BlockKind.OUTPUT, task.outputs[0]))
    if task.type is TaskType.ABDUCTION:
        return write_completion(f"\n{task.outputs[0]}\n", fenced(BlockKind.INPUT, task.inputs[0]))
    return write_completion(task.message, fenced(BlockKind.PYTHON, task.program))
