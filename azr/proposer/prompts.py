"""Proposer prompts: write a new task from references (deduction, abduction) or inputs for a program
(induction).

Wording is versioned with ``azr.roles.templates.TEMPLATE_VERSION``. As in the Absolute Zero paper, a
deduction or abduction prompt shows K reference snippets (program, input, output) from that type's buffer
and asks for a new, different program with one input; an induction prompt shows one program and asks for
N or more inputs plus a message that describes the program without giving it away.
"""

from __future__ import annotations

from dataclasses import dataclass

from azr.core.task import Task, TaskType
from azr.roles.completion import BlockKind, fenced
from azr.roles.config import RolesConfig
from azr.roles.templates import (
    INPUT_PLACEHOLDER,
    INPUT_RULE,
    MESSAGE_PLACEHOLDER,
    PROGRAM_PLACEHOLDER,
    Prompt,
    bullets,
    program_rules,
)

_GOAL = {
    TaskType.DEDUCTION: (
        "Another solver will be shown your program and your input and must work out the output. Choose a "
        "program that takes real step-by-step reasoning to trace, yet stays short and runs quickly."
    ),
    TaskType.ABDUCTION: (
        "Another solver will be shown your program and the output of your input, and must find an input that "
        "gives that output. Choose a program whose input takes real reasoning to recover, yet stays short "
        "and runs quickly."
    ),
}


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
    if request.type is TaskType.INDUCTION:
        return Prompt(_induction_body(request.program, config))
    return Prompt(_program_body(request, config))


def _program_body(request: ProposalRequest, config: RolesConfig) -> str:
    kind = request.type.value
    rules = [
        *program_rules(config.allowed_imports),
        INPUT_RULE,
        "Make the program genuinely different from every reference below, not a copy with new names or "
        "constants.",
    ]
    references = "\n\n".join(_reference(i, ref) for i, ref in enumerate(request.references, start=1))
    return (
        f"## Task: write a new {kind} task\n\n"
        f"Write a new Python program `f` and one input for it. {_GOAL[request.type]}\n\n"
        f"### Requirements\n{bullets(rules)}\n\n"
        f"### Reference tasks\n{references}\n\n"
        "### Answer format\n"
        "Inside <answer> </answer>, give one ```python block with the program and one ```input block with "
        "the input:\n"
        f"{fenced(BlockKind.PYTHON, PROGRAM_PLACEHOLDER)}\n{fenced(BlockKind.INPUT, INPUT_PLACEHOLDER)}"
    )


def _reference(number: int, ref: Task) -> str:
    pairs = "\n".join(
        f"{fenced(BlockKind.INPUT, i)}\n{fenced(BlockKind.OUTPUT, o)}"
        for i, o in zip(ref.inputs, ref.outputs, strict=True)
    )
    return f"Reference {number}:\n{fenced(BlockKind.PYTHON, ref.program)}\n{pairs}"


def _induction_body(program: str, config: RolesConfig) -> str:
    low, high = config.min_induction_inputs, config.max_induction_inputs
    rules = [
        f"Give between {low} and {high} different inputs, each in its own ```input block. {INPUT_RULE}",
        "`f` must run without error on every input; choose inputs that together pin down what `f` does, "
        "including its edge cases.",
        "Give one ```message block: plain text that hints at what `f` computes, without code and without "
        "restating the program line by line.",
    ]
    return (
        "## Task: write inputs and a message for a program\n\n"
        "Here is a Python program `f`. Another solver will be shown your message and half of the "
        "input/output pairs of your inputs, and must write a program that also gets the other half right.\n\n"
        f"### Program\n{fenced(BlockKind.PYTHON, program)}\n\n"
        f"### Requirements\n{bullets(rules)}\n\n"
        "### Answer format\n"
        f"Inside <answer> </answer>, give at least {low} ```input blocks, then one ```message block:\n"
        f"{fenced(BlockKind.INPUT, INPUT_PLACEHOLDER)}\n{fenced(BlockKind.INPUT, INPUT_PLACEHOLDER)}\n"
        f"(one block per input)\n{fenced(BlockKind.MESSAGE, MESSAGE_PLACEHOLDER)}"
    )
