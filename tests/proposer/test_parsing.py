"""Proposer completions, realistic and adversarial, against their exact parse result or format error."""

from __future__ import annotations

import pytest

from azr.core.task import ZERO_SEED, Origin, Task, TaskType
from azr.proposer.parsing import parse_proposal
from azr.proposer.prompts import ProposalRequest
from azr.roles.config import RolesConfig
from azr.roles.errors import FormatError, FormatFailure

CONFIG = RolesConfig()
STRICT = RolesConfig(strict_format=True)
SORTER = Task(
    type=TaskType.DEDUCTION,
    program="def f(xs):\n    return sorted(xs, reverse=True)",
    inputs=("[3, 1, 2]",),
    outputs=("[3, 2, 1]",),
)
DEDUCTION = ProposalRequest(TaskType.DEDUCTION, (ZERO_SEED, SORTER), step=7)
ABDUCTION = ProposalRequest(TaskType.ABDUCTION, (ZERO_SEED,), step=7)
PROGRAM = "def f(a, b):\n    return [x * b for x in a if x % 2]"
THINK = "<think>\nI want a filter plus a map so the solver has to track both steps.\n</think>\n"


def answer(*blocks: str, after: str = "") -> str:
    return THINK + "<answer>\n" + "\n".join(blocks) + "\n</answer>" + after


def block(lang: str, body: str) -> str:
    return f"```{lang}\n{body}\n```"


PROGRAM_CASES = [
    (
        "well formed",
        answer(block("python", PROGRAM), block("input", "[1, 2, 3], 10")),
        PROGRAM,
        "[1, 2, 3], 10",
    ),
    ("```py fence", answer(block("py", PROGRAM), block("input", "[5], 2")), PROGRAM, "[5], 2"),
    ("```Python fence", answer(block("Python", PROGRAM), block("Input", "[5], 2")), PROGRAM, "[5], 2"),
    (
        "several blocks: the last of each kind",
        answer(
            block("python", "def f(a, b):\n    return a"),
            block("input", "[0], 0"),
            "Better version:",
            block("python", PROGRAM),
            block("input", "[7, 8], 3"),
        ),
        PROGRAM,
        "[7, 8], 3",
    ),
    (
        "blank lines and trailing spaces around the program are trimmed",
        answer(block("python", f"\n\n{PROGRAM}   \n\n"), block("input", "  [1], 1  ")),
        PROGRAM,
        "[1], 1",
    ),
    (
        "fake closing tags inside the program and the input",
        answer(
            block("python", 'def f(s, t):\n    return s + "</answer>" + t'),
            block("input", '"<answer>", "</think>"'),
        ),
        'def f(s, t):\n    return s + "</answer>" + t',
        "'<answer>', '</think>'",
    ),
    (
        "inputs are stored in the canonical form the executor runs",
        answer(block("python", PROGRAM), block("input", "[1,2,3],{'b': 1, 'a': 2}")),
        PROGRAM,
        "[1, 2, 3], {'a': 2, 'b': 1}",
    ),
    (
        "an input that is not a literal is kept for the executor to reject",
        answer(block("python", PROGRAM), block("input", "[1, 2], len('ab')")),
        PROGRAM,
        "[1, 2], len('ab')",
    ),
    (
        "a program that prints a fence uses a longer fence",
        answer("````python\ndef f(x):\n    return '```' + x\n````", block("input", "'a'")),
        "def f(x):\n    return '```' + x",
        "'a'",
    ),
    (
        "CRLF newlines",
        answer(block("python", PROGRAM), block("input", "[1], 2")).replace("\n", "\r\n"),
        PROGRAM,
        "[1], 2",
    ),
    (
        "a draft with an unclosed fence in the reasoning",
        "<think>\nFirst draft:\n```python\ndef f(a, b):\n    return a\nToo easy; filter and scale instead.\n"
        "</think>\n<answer>\n"
        + block("python", PROGRAM)
        + "\n"
        + block("input", "[1, 2, 3], 10")
        + "\n</answer>",
        PROGRAM,
        "[1, 2, 3], 10",
    ),
    (
        "closing fences at the end of content lines, code on the opening line",
        THINK + "<answer>\n```python def f(a, b):\n    return [x * b for x in a if x % 2]```\n"
        "```input\n[3], 4```\n</answer>",
        PROGRAM,
        "[3], 4",
    ),
    (
        "helper functions are kept",
        answer(
            block("python", "def g(x):\n    return x % 2\n\n" + PROGRAM.replace("x % 2", "g(x)")),
            block("input", "[1], 1"),
        ),
        "def g(x):\n    return x % 2\n\n" + PROGRAM.replace("x % 2", "g(x)"),
        "[1], 1",
    ),
]


@pytest.mark.parametrize(
    ("completion", "program", "argument_text"),
    [c[1:] for c in PROGRAM_CASES],
    ids=[c[0] for c in PROGRAM_CASES],
)
@pytest.mark.parametrize("request_", [DEDUCTION, ABDUCTION], ids=["deduction", "abduction"])
def test_program_proposals_parse(
    request_: ProposalRequest, completion: str, program: str, argument_text: str
) -> None:
    task = parse_proposal(completion, request_, CONFIG)
    assert task == Task(
        type=request_.type,
        program=program,
        inputs=(argument_text,),
        outputs=(),
        origin=Origin.PROPOSED,
        step=7,
        parents=request_.parent_ids,
    )


PROGRAM_FAILURES = [
    (
        "no answer tags",
        THINK + block("python", PROGRAM) + "\n" + block("input", "[1], 1"),
        FormatError.MISSING_ANSWER,
    ),
    (
        "unlabelled fence for the program",
        answer(block("", PROGRAM), block("input", "[1], 1")),
        FormatError.NO_CODE_BLOCK,
    ),
    ("no input block", answer(block("python", PROGRAM)), FormatError.NO_INPUT_BLOCK),
    (
        "blocks after the answer do not count",
        answer(block("input", "[1], 1"), after="\n" + block("python", PROGRAM)),
        FormatError.NO_CODE_BLOCK,
    ),
    (
        "empty program block",
        answer(block("python", "\n  \n"), block("input", "[1], 1")),
        FormatError.EMPTY_ANSWER,
    ),
    ("empty input block", answer(block("python", PROGRAM), "```input\n```"), FormatError.EMPTY_ANSWER),
    (
        "cut off inside the program",
        THINK + "<answer>\n```python\ndef f(a, b):\n    return [x * b for x in",
        FormatError.TRUNCATED,
    ),
    (
        "giant program",
        answer(block("python", "def f(x):\n    return x" + "  # pad" * 2_000), block("input", "1")),
        FormatError.TOO_LONG,
    ),
    (
        "giant input",
        answer(block("python", PROGRAM), block("input", "[" + "1, " * 2_000 + "1], 2")),
        FormatError.TOO_LONG,
    ),
    (
        "giant completion",
        answer(block("python", PROGRAM), block("input", "1")) + " " * 70_000,
        FormatError.TOO_LONG,
    ),
]


@pytest.mark.parametrize(
    ("completion", "error"), [c[1:] for c in PROGRAM_FAILURES], ids=[c[0] for c in PROGRAM_FAILURES]
)
def test_broken_program_proposals(completion: str, error: FormatError) -> None:
    failure = parse_proposal(completion, DEDUCTION, CONFIG)
    assert isinstance(failure, FormatFailure)
    assert failure.error is error


def test_strict_mode_refuses_prose_between_reasoning_and_answer() -> None:
    completion = (
        THINK + "Here it is.\n" + answer(block("python", PROGRAM), block("input", "[1], 1"))[len(THINK) :]
    )
    assert isinstance(parse_proposal(completion, DEDUCTION, CONFIG), Task)
    failure = parse_proposal(completion, DEDUCTION, STRICT)
    assert isinstance(failure, FormatFailure) and failure.error is FormatError.LAYOUT


SOURCE = SORTER
INDUCTION = ProposalRequest(TaskType.INDUCTION, (SOURCE,), step=3)
MESSAGE = "Orders a list from largest to smallest."
TEN = [f"[{i}, {i + 2}, {i + 1}]" for i in range(10)]


def induction(inputs: list[str], message: str | None = MESSAGE, extra: tuple[str, ...] = ()) -> str:
    blocks = [block("input", i) for i in inputs]
    if message is not None:
        blocks.append(block("message", message))
    return answer(*blocks, *extra)


def test_induction_proposal_parses_with_the_given_program() -> None:
    # A python block in the answer must not replace the program the request gave.
    completion = induction(TEN, extra=(block("python", "def f(xs):\n    return 0"),))
    task = parse_proposal(completion, INDUCTION, CONFIG)
    assert task == Task(
        type=TaskType.INDUCTION,
        program=SOURCE.program,
        inputs=tuple(TEN),
        message=MESSAGE,
        origin=Origin.PROPOSED,
        step=3,
        parents=(SOURCE.id,),
    )


INDUCTION_FAILURES = [
    ("nine inputs", induction(TEN[:9]), FormatError.TOO_FEW_INPUTS),
    ("eleven inputs: no extra hidden cases", induction([*TEN, "[99, 0, 1]"]), FormatError.TOO_MANY_INPUTS),
    ("eleven blocks, ten distinct", induction([*TEN, TEN[0]]), FormatError.TOO_MANY_INPUTS),
    ("ten blocks, nine distinct", induction([*TEN[:9], TEN[0]]), FormatError.TOO_FEW_INPUTS),
    (
        "ten blocks, nine distinct values",
        induction([*TEN[:9], TEN[0].replace(" ", "")]),
        FormatError.TOO_FEW_INPUTS,
    ),
    ("too many inputs", induction([f"[{i}]" for i in range(33)]), FormatError.TOO_MANY_INPUTS),
    ("no input blocks", induction([]), FormatError.NO_INPUT_BLOCK),
    ("one blank input", induction([*TEN[:9], " "]), FormatError.EMPTY_ANSWER),
    ("no message", induction(TEN, message=None), FormatError.MISSING_MESSAGE),
    ("blank message", induction(TEN, message="  "), FormatError.MISSING_MESSAGE),
    ("giant message", induction(TEN, message="sorts " * 1_000), FormatError.TOO_LONG),
]


@pytest.mark.parametrize(
    "message",
    ["Write f(xs) so that f([1, 3, 2]) == [3, 2, 1].", "key = lambda x: -x; sort descending by it"],
)
def test_the_message_may_take_any_form(message: str) -> None:
    """As in the paper, the message may be a coding question; only a blank one is refused."""
    task = parse_proposal(induction(TEN, message=message), INDUCTION, CONFIG)
    assert isinstance(task, Task) and task.message == message


@pytest.mark.parametrize(
    ("completion", "error"), [c[1:] for c in INDUCTION_FAILURES], ids=[c[0] for c in INDUCTION_FAILURES]
)
def test_broken_induction_proposals(completion: str, error: FormatError) -> None:
    failure = parse_proposal(completion, INDUCTION, CONFIG)
    assert isinstance(failure, FormatFailure)
    assert failure.error is error
