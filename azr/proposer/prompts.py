"""Proposer prompts: write a new task from references (deduction, abduction) or inputs for a program
(induction).

Wording is versioned with ``azr.roles.templates.TEMPLATE_VERSION``. As in the Absolute Zero paper, a
deduction or abduction prompt shows K reference snippets (program, input, output) from that type's buffer
and asks for a new, different program with one input; an induction prompt shows one program and asks for
N inputs (10 by default) plus a message for the solver. The content follows the paper's appendix prompts
(difficulty guidance, "plan first", message requirements) in our words, with the time limit the executor
really enforces rather than the prompts' 10 seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from azr.core.task import Task, TaskType
from azr.roles.completion import BlockKind, fenced
from azr.roles.config import RolesConfig
from azr.roles.templates import (
    EXAMPLE_INPUT,
    EXAMPLE_INPUT_2,
    EXAMPLE_MESSAGE,
    EXAMPLE_PROGRAM,
    INPUT_RULE,
    Prompt,
    bullets,
    program_rules,
)

_GOAL = {
    TaskType.DEDUCTION: (
        "Another solver will be shown your program and your input and must work out the output, as an "
        "I.Q. test. Make the output hard to deduce from the input and the program."
    ),
    TaskType.ABDUCTION: (
        "Another solver will be shown your program and the output of your input, and must find an input "
        "that gives that output, as an I.Q. test. Make an input hard to recover from the output and the "
        "program."
    ),
}
DIFFICULTY = (
    "Make the program need state tracking across several data transformations, so that the task takes "
    "long multi-step reasoning: algorithmic reasoning or intricate logic, such as data structures (trees, "
    "heaps, stacks, queues, graphs) or control flow (dynamic programming, recursion, divide and conquer, "
    "greedy choices, backtracking)."
)
"""The paper's difficulty guidance for program proposals (its appendix prompts, in our words)."""


@dataclass(frozen=True, slots=True)
class ProposalRequest:
    """What one proposer prompt is built from; the parser reads the completion against the same request."""

    type: TaskType
    references: tuple[Task, ...]
    """Deduction/abduction: the reference tasks to show. Induction: one task, whose program is given."""
    step: int = 0
    """Training step the proposal is made at (recorded on the proposed task)."""

    def __post_init__(self) -> None:
        if not self.references:
            raise ValueError("a proposal request needs at least one reference task")
        if self.type is TaskType.INDUCTION and len(self.references) != 1:
            raise ValueError("an induction request gives exactly one program: pass one reference task")
        for ref in self.references:
            if not ref.outputs or len(ref.outputs) != len(ref.inputs):
                raise ValueError(f"reference {ref.id} has no gold outputs; only validated tasks can be shown")

    @property
    def program(self) -> str:
        """The given program of an induction request."""
        if self.type is not TaskType.INDUCTION:
            raise ValueError("only induction requests give a program")
        return self.references[0].program

    @property
    def parent_ids(self) -> tuple[str, ...]:
        return tuple(ref.id for ref in self.references)


def proposer_prompt(request: ProposalRequest, config: RolesConfig) -> Prompt:
    """The prompt that asks the proposer for a new task, in ``config.template``."""
    if config.wording == "compact":
        return Prompt(_compact_body(request, config), template=config.template)
    if request.type is TaskType.INDUCTION:
        return Prompt(_induction_body(request.program, config), template=config.template)
    return Prompt(_program_body(request, config), template=config.template)


def _compact_body(request: ProposalRequest, config: RolesConfig) -> str:
    if request.type is TaskType.INDUCTION:
        low, high = config.min_induction_inputs, config.max_induction_inputs
        count = f"{low}" if low == high else f"{low} to {high}"
        return f"Write {count} inputs and a message for f.\n{fenced(BlockKind.PYTHON, request.program)}"
    references = "\n".join(_reference(i, ref) for i, ref in enumerate(request.references, start=1))
    return f"Write a new {request.type.value} task: a program f and one input.\n{references}"


def _program_body(request: ProposalRequest, config: RolesConfig) -> str:
    kind = request.type.value
    rules = [
        *program_rules(config.allowed_imports, config.program_timeout_s),
        DIFFICULTY,
        "Make the program genuinely different from every reference below, not a copy with new names or "
        "constants, and do not write the input anywhere in the program.",
        f"Give exactly one input. {INPUT_RULE}",
    ]
    references = "\n\n".join(_reference(i, ref) for i, ref in enumerate(request.references, start=1))
    return (
        f"## Task: write a new {kind} task\n\n"
        f"Write a new Python program `f` and one input for it. {_GOAL[request.type]}\n\n"
        f"### Requirements\n{bullets(rules)}\n\n"
        f"### Reference tasks\n{references}\n\n"
        "### Answer format\n"
        "First plan how your program will be challenging, different from the references and creative. "
        "Then, inside <answer> </answer>, give one ```python block with the program and one ```input "
        "block with the input, for example:\n"
        f"{fenced(BlockKind.PYTHON, EXAMPLE_PROGRAM)}\n{fenced(BlockKind.INPUT, EXAMPLE_INPUT)}"
    )


def _reference(number: int, ref: Task) -> str:
    pairs = "\n".join(
        f"{fenced(BlockKind.INPUT, i)}\n{fenced(BlockKind.OUTPUT, o)}"
        for i, o in zip(ref.inputs, ref.outputs, strict=True)
    )
    return f"Reference {number}:\n{fenced(BlockKind.PYTHON, ref.program)}\n{pairs}"


def _induction_body(program: str, config: RolesConfig) -> str:
    low, high = config.min_induction_inputs, config.max_induction_inputs
    count = f"exactly {low}" if low == high else f"between {low} and {high}"
    rules = [
        f"Give {count} different inputs, each in its own ```input block. {INPUT_RULE}",
        "`f` must run without error on every input. Together the inputs and their outputs should cover "
        "what `f` does, edge cases included, so that it can be deduced from them.",
        "Give one ```message block for the solver: it may take any form (a coding question, or plain words "
        "on what `f` does) but must not contain the program.",
        "The inputs and message together should make a challenging task, but not an impossible one.",
    ]
    return (
        "## Task: write inputs and a message for a program\n\n"
        f"Here is a Python program `f`. Another solver will be shown your message and "
        f"{config.induction_inputs_shown} of your inputs with their outputs, and must write a program that "
        "also gives the outputs of the other inputs, as an I.Q. test.\n\n"
        f"### Program\n{fenced(BlockKind.PYTHON, program)}\n\n"
        f"### Requirements\n{bullets(rules)}\n\n"
        "### Answer format\n"
        "First plan how your inputs cover the program and why they make the task challenging. Then, "
        f"inside <answer> </answer>, give {count} ```input blocks, then one ```message block, for "
        "example:\n"
        f"{fenced(BlockKind.INPUT, EXAMPLE_INPUT)}\n{fenced(BlockKind.INPUT, EXAMPLE_INPUT_2)}\n"
        f"(and so on, one block per input)\n{fenced(BlockKind.MESSAGE, EXAMPLE_MESSAGE)}"
    )
