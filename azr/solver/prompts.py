"""Solver prompts: deduction (program and input, predict the output), abduction (program and output, find
an input), induction (message and the visible input/output pairs, write the program).

Wording is versioned with ``azr.roles.templates.TEMPLATE_VERSION``. An induction prompt shows at most
``induction_inputs_shown`` of the visible pairs of ``Task.induction_split``, never a held-out pair: those
are what the answer is judged on. The message is shown in its own ```message block, as in the paper.
"""

from __future__ import annotations

from azr.core.task import Task, TaskType
from azr.roles.completion import BlockKind, fenced
from azr.roles.config import RolesConfig
from azr.roles.templates import (
    EXAMPLE_INPUT,
    EXAMPLE_OUTPUT,
    EXAMPLE_PROGRAM,
    INPUT_RULE,
    VALUE_RULE,
    Prompt,
    bullets,
    program_rules,
)


def solver_prompt(task: Task, config: RolesConfig) -> Prompt:
    """The prompt that asks the solver to answer ``task``, which must carry its gold outputs."""
    if not task.outputs or len(task.outputs) != len(task.inputs):
        raise ValueError(f"task {task.id} has no gold outputs: validate it before asking for an answer")
    if task.type is not TaskType.INDUCTION and len(task.inputs) != 1:
        raise ValueError(
            f"a {task.type.value} task has exactly one input/output pair, {task.id} has {len(task.inputs)}"
        )
    if config.wording == "compact":
        body = _compact(task, config)
    elif task.type is TaskType.DEDUCTION:
        body = _deduction(task)
    elif task.type is TaskType.ABDUCTION:
        body = _abduction(task)
    else:
        body = _induction(task, config)
    return Prompt(body, template=config.template)


def _deduction(task: Task) -> str:
    return (
        "## Task: predict the output of a program\n\n"
        "Think step by step about exactly what `f` returns when it is called with the input below.\n\n"
        f"### Program\n{fenced(BlockKind.PYTHON, task.program)}\n\n"
        f"### Input\n{INPUT_RULE}\n{fenced(BlockKind.INPUT, task.inputs[0])}\n\n"
        "### Answer format\n"
        "Inside <answer> </answer>, give the returned value in one ```output block, as a Python literal: "
        f"quotes around strings, a tuple when `f` returns several values. {VALUE_RULE} For example:\n"
        f"{fenced(BlockKind.OUTPUT, EXAMPLE_OUTPUT)}"
    )


def _abduction(task: Task) -> str:
    return (
        "## Task: find an input that gives an output\n\n"
        "Think step by step to find an input for which `f` returns exactly the output below. Any such "
        "input is correct.\n\n"
        f"### Program\n{fenced(BlockKind.PYTHON, task.program)}\n\n"
        f"### Output\n{fenced(BlockKind.OUTPUT, task.outputs[0])}\n\n"
        "### Answer format\n"
        f"Inside <answer> </answer>, give the input in one ```input block. {INPUT_RULE} For example:\n"
        f"{fenced(BlockKind.INPUT, EXAMPLE_INPUT)}"
    )


def _compact(task: Task, config: RolesConfig) -> str:
    if task.type is TaskType.DEDUCTION:
        return (
            "Predict the output of f.\n"
            f"{fenced(BlockKind.PYTHON, task.program)}\n{fenced(BlockKind.INPUT, task.inputs[0])}"
        )
    if task.type is TaskType.ABDUCTION:
        return (
            "Find an input for this output of f.\n"
            f"{fenced(BlockKind.PYTHON, task.program)}\n{fenced(BlockKind.OUTPUT, task.outputs[0])}"
        )
    message = f"{fenced(BlockKind.MESSAGE, task.message.strip())}\n" if task.message.strip() else ""
    return f"Write the program f.\n{message}{_pairs(task, config)}"


def _pairs(task: Task, config: RolesConfig) -> str:
    """The visible input/output pairs an induction prompt shows, numbered."""
    visible, _ = task.induction_split()
    return "\n".join(
        f"Example {n}:\n{fenced(BlockKind.INPUT, task.inputs[i])}\n"
        f"{fenced(BlockKind.OUTPUT, task.outputs[i])}"
        for n, i in enumerate(visible[: config.induction_inputs_shown], start=1)
    )


def _induction(task: Task, config: RolesConfig) -> str:
    pairs = _pairs(task, config)
    message = (
        f"### Message\n{fenced(BlockKind.MESSAGE, task.message.strip())}\n\n" if task.message.strip() else ""
    )
    return (
        "## Task: write the program behind some examples\n\n"
        "Think step by step to deduce a Python program `f` that returns each output below for its input. "
        "It will be judged on other inputs that are not shown, so capture the rule rather than the "
        "examples; work through each example to test your program, and revise it until it fits.\n\n"
        f"{message}"
        f"### Examples\n{INPUT_RULE}\n{pairs}\n\n"
        f"### Requirements\n{bullets(program_rules(config.allowed_imports, config.program_timeout_s))}\n\n"
        "### Answer format\n"
        "Inside <answer> </answer>, give the program in one ```python block, for example:\n"
        f"{fenced(BlockKind.PYTHON, EXAMPLE_PROGRAM)}"
    )
