"""Proposer prompts: what they show, that answering them in their own format parses, golden snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest

from azr.core.task import ZERO_SEED, Task, TaskType
from azr.proposer.parsing import parse_proposal
from azr.proposer.prompts import ProposalRequest, proposer_prompt
from azr.roles.completion import BlockKind, fenced, fenced_blocks
from azr.roles.config import RolesConfig
from azr.roles.errors import FormatFailure
from azr.roles.templates import EXAMPLE_INPUT, EXAMPLE_INPUT_2, EXAMPLE_MESSAGE, EXAMPLE_PROGRAM
from tests.roles.snapshots import check_golden

GOLDEN = Path(__file__).parent / "golden"
CONFIG = RolesConfig(allowed_imports=("math", "itertools"))
SORTER = Task(
    type=TaskType.ABDUCTION,
    program="def f(xs):\n    return sorted(xs, reverse=True)",
    inputs=("[3, 1, 2]",),
    outputs=("[3, 2, 1]",),
)
FENCY = Task(
    type=TaskType.ABDUCTION,
    program='def f(s):\n    return "```" + s + "</answer>"',
    inputs=("'x'",),
    outputs=("'```x</answer>'",),
)


def request(task_type: TaskType) -> ProposalRequest:
    if task_type is TaskType.INDUCTION:
        return ProposalRequest(task_type, (SORTER,))
    return ProposalRequest(task_type, (ZERO_SEED, SORTER, FENCY))


@pytest.mark.parametrize("task_type", [TaskType.DEDUCTION, TaskType.ABDUCTION])
def test_program_prompt_shows_every_reference_and_the_fences(task_type: TaskType) -> None:
    body = proposer_prompt(request(task_type), CONFIG).body
    for ref in (ZERO_SEED, SORTER, FENCY):
        assert ref.program in body and ref.inputs[0] in body and ref.outputs[0] in body
    assert "```python" in body and "```input" in body
    assert "math, itertools" in body
    assert f"new {task_type.value} task" in body


def test_a_reference_with_fences_and_tags_cannot_break_the_prompt() -> None:
    # Read the prompt the way a completion is read: the reference program comes back whole.
    body = proposer_prompt(request(TaskType.DEDUCTION), CONFIG).body
    blocks = fenced_blocks(body)
    assert not isinstance(blocks, FormatFailure)
    assert [b.body for b in blocks if b.kind is BlockKind.PYTHON] == [
        ZERO_SEED.program,
        SORTER.program,
        FENCY.program,
        EXAMPLE_PROGRAM,
    ]


def test_induction_prompt_shows_the_program_and_the_input_count() -> None:
    body = proposer_prompt(request(TaskType.INDUCTION), CONFIG).body
    assert SORTER.program in body
    assert "exactly 10 different inputs" in body and "5 of your inputs" in body
    assert "```input" in body and "```message" in body
    assert SORTER.inputs[0] not in body  # only the program is given
    ranged = proposer_prompt(
        request(TaskType.INDUCTION), CONFIG.model_copy(update={"max_induction_inputs": 12})
    )
    assert "between 10 and 12 different inputs" in ranged.body


def test_prompts_state_the_difficulty_and_the_enforced_time_limit() -> None:
    body = proposer_prompt(request(TaskType.DEDUCTION), CONFIG.model_copy(update={"program_timeout_s": 2.0}))
    assert "within 2 seconds" in body.body and "multi-step reasoning" in body.body


@pytest.mark.parametrize("task_type", list(TaskType))
def test_answering_in_the_prompts_format_round_trips(task_type: TaskType) -> None:
    prompt = proposer_prompt(request(task_type), CONFIG)
    program = "def f(n):\n    return sum(range(n))"
    inputs = [str(n) for n in range(10)]
    # Fill the prompt's own answer-format example: replace each example with real content.
    example = prompt.body.split("### Answer format\n", 1)[1].split("\n", 1)[1]
    if task_type is TaskType.INDUCTION:
        shown = f"{fenced(BlockKind.INPUT, EXAMPLE_INPUT)}\n{fenced(BlockKind.INPUT, EXAMPLE_INPUT_2)}\n"
        several = "".join(fenced(BlockKind.INPUT, i) + "\n" for i in inputs)
        example = example.replace(f"{shown}(and so on, one block per input)\n", several)
        example = example.replace(EXAMPLE_MESSAGE, "Adds up a range.")
    else:
        example = example.replace(EXAMPLE_PROGRAM, program).replace(EXAMPLE_INPUT, "5")
    completion = f"Let me think.\n</think>\n<answer>\n{example}\n</answer>"
    task = parse_proposal(completion, request(task_type), CONFIG)
    assert isinstance(task, Task), task
    if task_type is TaskType.INDUCTION:
        assert (task.program, task.inputs, task.message) == (
            SORTER.program,
            tuple(inputs),
            "Adds up a range.",
        )
    else:
        assert (task.program, task.inputs) == (program, ("5",))


@pytest.mark.parametrize("task_type", list(TaskType))
def test_golden_base_prompt(task_type: TaskType) -> None:
    check_golden(
        GOLDEN / f"{task_type.value}.base.txt", proposer_prompt(request(task_type), CONFIG).as_base()
    )


def test_golden_paper_chat_prompt() -> None:
    config = CONFIG.model_copy(update={"template": "paper"})
    messages = proposer_prompt(request(TaskType.INDUCTION), config).as_chat()
    check_golden(
        GOLDEN / "induction.paper.txt", "\n".join(f"[{m['role']}]\n{m['content']}" for m in messages)
    )


def test_golden_chat_prompt() -> None:
    messages = proposer_prompt(request(TaskType.DEDUCTION), CONFIG).as_chat()
    check_golden(GOLDEN / "deduction.chat.txt", "\n".join(f"[{m['role']}]\n{m['content']}" for m in messages))


@pytest.mark.parametrize(
    ("task_type", "references", "message"),
    [
        (TaskType.DEDUCTION, (), "at least one reference"),
        (TaskType.INDUCTION, (SORTER, ZERO_SEED), "exactly one program"),
        (
            TaskType.ABDUCTION,
            (Task(TaskType.ABDUCTION, "def f(x):\n    return x", ("1",)),),
            "no gold outputs",
        ),
    ],
)
def test_bad_requests_are_refused(task_type: TaskType, references: tuple[Task, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ProposalRequest(task_type, references)


@pytest.mark.parametrize("task_type", list(TaskType))
def test_golden_compact_prompt(task_type: TaskType) -> None:
    config = CONFIG.model_copy(update={"wording": "compact"})
    check_golden(
        GOLDEN / f"{task_type.value}.compact.txt", proposer_prompt(request(task_type), config).as_base()
    )
