"""Solver prompts: what each shows (and hides), round trips through the parser, golden snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest

from azr.core.task import Task, TaskType
from azr.roles.config import RolesConfig
from azr.roles.templates import EXAMPLE_INPUT, EXAMPLE_OUTPUT, EXAMPLE_PROGRAM
from azr.solver.parsing import Answer, parse_answer
from azr.solver.prompts import solver_prompt
from tests.roles.snapshots import check_golden

GOLDEN = Path(__file__).parent / "golden"
CONFIG = RolesConfig(allowed_imports=("math",))
PROGRAM = "def f(a, b):\n    return [x * b for x in a if x % 2]"
DEDUCTION = Task(TaskType.DEDUCTION, PROGRAM, ("[1, 2, 3], 10",), ("[10, 30]",))
ABDUCTION = Task(TaskType.ABDUCTION, PROGRAM, ("[5, 6], 2",), ("[10]",))
INDUCTION = Task(
    TaskType.INDUCTION,
    PROGRAM,
    ("[1], 2", "[2], 2", "[1, 3], 1", "[], 5", "[7, 7], 0"),
    ("[2]", "[]", "[1, 3]", "[]", "[0, 0]"),
    message="Keeps some of the numbers and scales them.",
)
TASKS = {TaskType.DEDUCTION: DEDUCTION, TaskType.ABDUCTION: ABDUCTION, TaskType.INDUCTION: INDUCTION}


def test_deduction_shows_program_and_input_not_output() -> None:
    body = solver_prompt(DEDUCTION, CONFIG).body
    assert PROGRAM in body and "```input\n[1, 2, 3], 10\n```" in body and "```output" in body
    assert "[10, 30]" not in body


def test_abduction_shows_program_and_output_not_input() -> None:
    body = solver_prompt(ABDUCTION, CONFIG).body
    assert PROGRAM in body and "```output\n[10]\n```" in body and "```input" in body
    assert "[5, 6]" not in body


def test_induction_shows_message_and_visible_pairs_only() -> None:
    body = solver_prompt(INDUCTION, CONFIG).body
    visible, held_out = INDUCTION.induction_split()
    assert f"```message\n{INDUCTION.message}\n```" in body
    for i in visible:
        assert f"```input\n{INDUCTION.inputs[i]}\n```\n```output\n{INDUCTION.outputs[i]}\n```" in body
    for i in held_out:
        assert INDUCTION.inputs[i] not in body
    assert PROGRAM not in body  # the program is what the solver must write
    assert "math" in body and "```python" in body


ANSWERS = {TaskType.DEDUCTION: "[10, 30]", TaskType.ABDUCTION: "[5], 2", TaskType.INDUCTION: PROGRAM}


@pytest.mark.parametrize("task_type", list(TaskType))
def test_answering_in_the_prompts_format_round_trips(task_type: TaskType) -> None:
    body = solver_prompt(TASKS[task_type], CONFIG).body
    example = body.split("### Answer format\n", 1)[1].split("\n", 1)[1]
    for shown in (EXAMPLE_INPUT, EXAMPLE_OUTPUT, EXAMPLE_PROGRAM):  # the input holds the output
        example = example.replace(shown, ANSWERS[task_type])
    completion = f"Let me trace it.\n</think>\n<answer>\n{example}\n</answer>"
    assert parse_answer(completion, task_type, CONFIG) == Answer(ANSWERS[task_type])


def test_induction_shows_at_most_the_configured_pairs() -> None:
    ten = Task(
        TaskType.INDUCTION,
        PROGRAM,
        tuple(f"[{i}], 1" for i in range(10)),
        tuple(f"[{i}]" if i % 2 else "[]" for i in range(10)),
        message="Keeps the odd numbers.",
    )
    five = solver_prompt(ten, CONFIG).body
    assert five.count("```input") == 5 and "Example 5:" in five
    three = solver_prompt(ten, RolesConfig(induction_inputs_shown=3)).body
    assert three.count("```input") == 3 and "[3], 1" not in three


@pytest.mark.parametrize("task_type", list(TaskType))
def test_golden_base_prompt(task_type: TaskType) -> None:
    check_golden(GOLDEN / f"{task_type.value}.base.txt", solver_prompt(TASKS[task_type], CONFIG).as_base())


def test_golden_paper_prompt() -> None:
    prompt = solver_prompt(DEDUCTION, CONFIG.model_copy(update={"template": "paper"}))
    check_golden(GOLDEN / "deduction.paper.txt", prompt.as_base())


@pytest.mark.parametrize(
    ("task", "message"),
    [
        (Task(TaskType.DEDUCTION, PROGRAM, ("[1], 1",)), "no gold outputs"),
        (
            Task(TaskType.ABDUCTION, PROGRAM, ("[1], 1", "[3], 1"), ("[1]", "[3]")),
            "exactly one input/output pair",
        ),
    ],
)
def test_tasks_that_cannot_be_posed_are_refused(task: Task, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        solver_prompt(task, CONFIG)


COMPACT = CONFIG.model_copy(update={"wording": "compact"})


@pytest.mark.parametrize("task_type", list(TaskType))
def test_golden_compact_prompt(task_type: TaskType) -> None:
    check_golden(
        GOLDEN / f"{task_type.value}.compact.txt", solver_prompt(TASKS[task_type], COMPACT).as_base()
    )


def test_compact_prompts_hide_what_the_full_ones_hide() -> None:
    """Compact wording drops the rules, never the secrecy: no gold output, input or held-out pair shows."""
    assert "[10, 30]" not in solver_prompt(DEDUCTION, COMPACT).body
    assert "[5, 6]" not in solver_prompt(ABDUCTION, COMPACT).body
    body = solver_prompt(INDUCTION, COMPACT).body
    visible, held_out = INDUCTION.induction_split()
    assert PROGRAM not in body and all(INDUCTION.inputs[i] not in body for i in held_out)
    assert all(f"```input\n{INDUCTION.inputs[i]}\n```" in body for i in visible)
    assert len(body) < len(solver_prompt(INDUCTION, CONFIG).body) / 3
