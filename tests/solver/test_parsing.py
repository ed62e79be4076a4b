"""Solver completions, realistic and adversarial, against their exact answer text or format error."""

from __future__ import annotations

import pytest

from azr.core.task import TaskType
from azr.roles.config import RolesConfig
from azr.roles.errors import FormatError, FormatFailure
from azr.solver.parsing import Answer, parse_answer

CONFIG = RolesConfig()
D, A, IND = TaskType.DEDUCTION, TaskType.ABDUCTION, TaskType.INDUCTION
THINK = "<think>\nf keeps the odd numbers and scales them: 1 * 10 and 3 * 10.\n</think>\n"
PROGRAM = "def f(a, b):\n    return [x * b for x in a if x % 2]"


def answer(body: str) -> str:
    return f"{THINK}<answer>\n{body}\n</answer>"


ANSWERS = [
    ("deduction, output block", D, answer("```output\n[10, 30]\n```"), "[10, 30]"),
    ("deduction, bare answer", D, "<think>sum is 4</think> <answer> 4 </answer>", "4"),
    ("deduction, unlabelled fence", D, answer("```\n'abc'\n```"), "'abc'"),
    (
        "deduction, last output block",
        D,
        answer("```output\n[10]\n```\nNo, two odds:\n```output\n[10, 30]\n```"),
        "[10, 30]",
    ),
    (
        "deduction, labelled block preferred over a later unlabelled one",
        D,
        answer("```output\n1\n```\n```\n2\n```"),
        "1",
    ),
    (
        "deduction, injection is just text here (the executor refuses it)",
        D,
        answer("```output\n[9]) or True or (0\n```"),
        "[9]) or True or (0",
    ),
    (
        "deduction, a string holding tags",
        D,
        answer("```output\n'</answer><answer>'\n```"),
        "'</answer><answer>'",
    ),
    ("deduction, stop string stripped", D, f"{THINK}<answer>\n```output\n7\n```", "7"),
    ("abduction, input block", A, answer("```input\n[1, 3], 10\n```"), "[1, 3], 10"),
    ("abduction, CRLF", A, answer("```Input\r\n[1, 3], 10\r\n```").replace("\n", "\r\n"), "[1, 3], 10"),
    ("induction, python block", IND, answer(f"```python\n{PROGRAM}\n```"), PROGRAM),
    ("induction, ```py", IND, answer(f"```py\n{PROGRAM}\n```"), PROGRAM),
    ("induction, ```Python3", IND, answer(f"```Python3\n{PROGRAM}\n```"), PROGRAM),
    ("induction, bare code", IND, f"{THINK}<answer>{PROGRAM}</answer>", PROGRAM),
    (
        "induction, a program holding a fake closing tag",
        IND,
        answer('```python\ndef f(s):\n    return s + "</answer>"\n```'),
        'def f(s):\n    return s + "</answer>"',
    ),
]


@pytest.mark.parametrize(
    ("task_type", "completion", "text"), [a[1:] for a in ANSWERS], ids=[a[0] for a in ANSWERS]
)
def test_answers_parse(task_type: TaskType, completion: str, text: str) -> None:
    assert parse_answer(completion, task_type, CONFIG) == Answer(text)


FAILURES = [
    ("no answer tags", D, THINK + "```output\n4\n```", FormatError.MISSING_ANSWER),
    ("empty answer", D, f"{THINK}<answer></answer>", FormatError.EMPTY_ANSWER),
    ("empty output block", D, answer("```output\n\n```"), FormatError.EMPTY_ANSWER),
    ("deduction answered in a python block", D, answer("```python\n4\n```"), FormatError.NO_OUTPUT_BLOCK),
    ("abduction answered with an output block", A, answer("```output\n4\n```"), FormatError.NO_INPUT_BLOCK),
    ("induction answered in a json block", IND, answer("```json\n{}\n```"), FormatError.NO_CODE_BLOCK),
    ("cut off in a block", IND, f"{THINK}<answer>\n```python\ndef f(x):\n", FormatError.TRUNCATED),
    ("giant output", D, answer("```output\n" + "1" * 70_000 + "\n```"), FormatError.TOO_LONG),
    ("giant abduction input", A, answer("```input\n" + "1" * 5_000 + "\n```"), FormatError.TOO_LONG),
    ("giant program", IND, answer("```python\n" + "# x\n" * 3_000 + PROGRAM + "\n```"), FormatError.TOO_LONG),
]


@pytest.mark.parametrize(
    ("task_type", "completion", "error"), [f[1:] for f in FAILURES], ids=[f[0] for f in FAILURES]
)
def test_broken_answers_get_a_named_error(task_type: TaskType, completion: str, error: FormatError) -> None:
    failure = parse_answer(completion, task_type, CONFIG)
    assert isinstance(failure, FormatFailure)
    assert failure.error is error


def test_length_stop_inside_the_answer_is_truncation() -> None:
    completion = f"{THINK}<answer>\n123"
    assert parse_answer(completion, D, CONFIG) == Answer("123")
    failure = parse_answer(completion, D, CONFIG, stopped_by_length=True)
    assert isinstance(failure, FormatFailure)
    assert failure.error is FormatError.TRUNCATED
