"""The completion reader: think/answer tags, fenced blocks, truncation and injection attempts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from azr.roles.completion import AnswerSection, BlockKind, block_kind, extract_answer, fenced
from azr.roles.errors import FormatError, FormatFailure

CAP = 4_000
PY, INP, OUT, PLAIN, OTHER = (
    BlockKind.PYTHON,
    BlockKind.INPUT,
    BlockKind.OUTPUT,
    BlockKind.PLAIN,
    BlockKind.OTHER,
)

# (id, completion, expected blocks as (kind, body), expected prose, closed)
PARSED = [
    (
        "well formed",
        "<think>\nf adds one to 3.\n</think>\n<answer>\n```output\n4\n```\n</answer>",
        [(OUT, "4")],
        "",
        True,
    ),
    (
        "base prompt: no opening think, tag and fence on one line",
        "f doubles x, so 2 * 21.\n</think>\n<answer>```output\n42\n```</answer>",
        [(OUT, "42")],
        "",
        True,
    ),
    ("no think at all, bare answer", "<answer>4</answer>", [], "4", True),
    (
        "closing tag stripped as a stop string",
        "</think> <answer>\n```input\n[1, 2], 3\n```\n",
        [(INP, "[1, 2], 3")],
        "",
        False,
    ),
    (
        "fake </answer> and </think> inside code are code",
        '<think>\n```python\nprint("</think>")\n```\nok\n</think>\n<answer>\n```python\ndef f(s):\n'
        '    return s.replace("</answer>", "")\n```\n```input\n"a</answer>b"\n```\n</answer>',
        [(PY, 'def f(s):\n    return s.replace("</answer>", "")'), (INP, '"a</answer>b"')],
        "",
        True,
    ),
    (
        "several answers: the last one counts",
        "</think><answer>\n```output\n1\n```\n</answer> wait, no.\n<answer>\n```output\n2\n```\n</answer>",
        [(OUT, "2")],
        "",
        True,
    ),
    (
        "text and blocks after </answer> are ignored",
        "</think>\n<answer>\n```output\n7\n```\n</answer>\nAlso:\n```output\n8\n```\n",
        [(OUT, "7")],
        "",
        True,
    ),
    (
        "CRLF and lone CR newlines",
        "</think>\r\n<answer>\r\n```python\r\ndef f(x):\r\n    return x\r```\r\n</answer>\r\n",
        [(PY, "def f(x):\n    return x")],
        "",
        True,
    ),
    (
        "upper-case tags",
        "</THINK><ANSWER>\n```output\n'a'\n```\n</Answer>",
        [(OUT, "'a'")],
        "",
        True,
    ),
    (
        "a four-backtick fence holds a line of three",
        '</think><answer>\n````python\ndef f():\n    return """\n```\n"""\n````\n</answer>',
        [(PY, 'def f():\n    return """\n```\n"""')],
        "",
        True,
    ),
    (
        "indented fences and prose around blocks",
        "</think><answer>\nThe program:\n  ```py\ndef f(x):\n    return x\n  ```\n"
        "and its input\n  ```input\n5\n  ```\n",
        [(PY, "def f(x):\n    return x"), (INP, "5")],
        "The program:\n\nand its input",
        False,
    ),
    (
        "an answer tag inside the reasoning when no </think> follows",
        "I should answer <answer>3</answer>",
        [],
        "3",
        True,
    ),
    (
        "an invented next turn ends the completion",
        "</think><answer>\n```output\n4\n```\n</answer>\nUser: Now answer 5.\nAssistant: <think></think>"
        "<answer>\n```output\n5\n```\n</answer>",
        [(OUT, "4")],
        "",
        True,
    ),
    (
        "turn markers inside a block are code",
        '</think><answer>\n```python\ndef f(x):\n    s = """\nUser: hi\n"""\n    return s\n```\n</answer>',
        [(PY, 'def f(x):\n    s = """\nUser: hi\n"""\n    return s')],
        "",
        True,
    ),
    (
        "a stray fence in the reasoning does not hide the answer",
        "<think>\nMaybe I format it as ```python or\n```\nnot sure\n</think>\n<answer>\n```output\n4\n```\n"
        "</answer>",
        [(OUT, "4")],
        "",
        True,
    ),
    (
        "an unclosed fence in the reasoning does not hide the answer",
        "<think>\n```python\ndef f(x):\n    return x + 1\n</think>\n<answer>\n```output\n4\n```\n</answer>",
        [(OUT, "4")],
        "",
        True,
    ),
    (
        "a reasoning line starting with User: is reasoning",
        "<think>\nUser: asked for f(3).\nAssistant: should add one.\n</think>\n<answer>\n```output\n4\n```\n"
        "</answer>",
        [(OUT, "4")],
        "",
        True,
    ),
    (
        "a closing fence at the end of a content line",
        "</think>\n<answer>\n```output\n4```\n</answer>",
        [(OUT, "4")],
        "",
        True,
    ),
    (
        "a closing fence at the end of a code line, then the closing tag",
        "</think>\n<answer>\n```python\ndef f(x):\n    return x```</answer>",
        [(PY, "def f(x):\n    return x")],
        "",
        True,
    ),
    (
        "code on the fence's opening line is the block's first line",
        "</think>\n<answer>\n```python def f(x):\n    return x\n```\n```input 'a'\n```\n</answer>",
        [(PY, "def f(x):\n    return x"), (INP, "'a'")],
        "",
        True,
    ),
    (
        "a block on one line",
        "</think><answer>```output [1, 2]```</answer>",
        [(OUT, "[1, 2]")],
        "",
        True,
    ),
    (
        "a second <answer> inside an unclosed one starts over",
        "</think><answer>\n```output\n1\n```\nno wait <answer>\n```output\n2\n```\n</answer>",
        [(OUT, "2")],
        "",
        True,
    ),
    (
        "unknown and missing languages keep their kind",
        "</think><answer>\n```json\n[1]\n```\n```\n[2]\n```\n</answer>",
        [(OTHER, "[1]"), (PLAIN, "[2]")],
        "",
        True,
    ),
]


@pytest.mark.parametrize(
    ("completion", "blocks", "prose", "closed"), [c[1:] for c in PARSED], ids=[c[0] for c in PARSED]
)
def test_answer_section_is_found(
    completion: str, blocks: list[tuple[BlockKind, str]], prose: str, closed: bool
) -> None:
    section = extract_answer(completion, max_chars=CAP)
    assert isinstance(section, AnswerSection), section
    assert [(b.kind, b.body) for b in section.blocks] == blocks
    assert section.prose == prose
    assert section.closed is closed


FAILED = [
    ("no answer tag", "<think>f returns 4</think>\n```output\n4\n```", FormatError.MISSING_ANSWER),
    (
        "answer only inside the reasoning",
        "<think>maybe <answer>3</answer></think> so 4",
        FormatError.MISSING_ANSWER,
    ),
    (
        "an invented turn before the answer",
        "<think>hm</think>\nUser: skip the thinking.\nAssistant: <answer>4</answer>",
        FormatError.MISSING_ANSWER,
    ),
    ("blank answer", "<think>hm</think><answer>  \n </answer>", FormatError.EMPTY_ANSWER),
    ("unterminated fence", "</think><answer>\n```python\ndef f(x):\n    return", FormatError.TRUNCATED),
    (
        "only an unterminated fence in the reasoning",
        "<think>\n```python\ndef f(x):\n",
        FormatError.MISSING_ANSWER,
    ),
    (
        "a closing fence with trailing text is not a close (CommonMark)",
        "</think><answer>\n```output\n4\n``` that is all\n</answer>",
        FormatError.TRUNCATED,
    ),
    ("giant completion", "</think><answer>" + "9" * CAP + "</answer>", FormatError.TOO_LONG),
]


@pytest.mark.parametrize(("completion", "error"), [c[1:] for c in FAILED], ids=[c[0] for c in FAILED])
def test_broken_completions_get_a_named_error(completion: str, error: FormatError) -> None:
    failure = extract_answer(completion, max_chars=CAP)
    assert isinstance(failure, FormatFailure)
    assert failure.error is error


def test_length_stop_inside_an_open_answer_is_truncation() -> None:
    completion = "</think><answer>12"
    assert isinstance(extract_answer(completion, max_chars=CAP), AnswerSection)
    failure = extract_answer(completion, max_chars=CAP, stopped_by_length=True)
    assert isinstance(failure, FormatFailure)
    assert failure.error is FormatError.TRUNCATED
    closed = extract_answer(
        "</think><answer>12</answer> and then rambling", max_chars=CAP, stopped_by_length=True
    )
    assert isinstance(closed, AnswerSection)


def test_length_stop_before_any_answer_is_truncation() -> None:
    failure = extract_answer("<think>\nlet me see, f(3) is", max_chars=CAP, stopped_by_length=True)
    assert isinstance(failure, FormatFailure)
    assert failure.error is FormatError.TRUNCATED


def test_no_completion_is_a_missing_answer() -> None:
    failure = extract_answer(None, max_chars=CAP)
    assert isinstance(failure, FormatFailure)
    assert failure.error is FormatError.MISSING_ANSWER


STRICT = [
    ("opening tag given", "<think>\nf adds one\n</think>\n<answer>\n```output\n4\n```\n</answer>", None),
    ("opening tag from the prompt", "f adds one\n</think> <answer>4</answer>\ntrailing text", None),
    ("no </think>", "<answer>4</answer>", FormatError.LAYOUT),
    ("prose between the reasoning and the answer", "hm</think>\nSo:\n<answer>4</answer>", FormatError.LAYOUT),
    ("answer not closed", "hm</think><answer>\n```output\n4\n```\n", FormatError.LAYOUT),
]


@pytest.mark.parametrize(("completion", "error"), [c[1:] for c in STRICT], ids=[c[0] for c in STRICT])
def test_strict_layout(completion: str, error: FormatError | None) -> None:
    """Strict mode is the reference code's ``<think>.*?</think>\\s*<answer>.*?</answer>`` check; the
    lenient default reads every one of these."""
    assert isinstance(extract_answer(completion, max_chars=CAP), AnswerSection)
    result = extract_answer(completion, max_chars=CAP, strict=True)
    if error is None:
        assert isinstance(result, AnswerSection)
    else:
        assert isinstance(result, FormatFailure) and result.error is error


def test_the_size_cap_is_checked_before_scanning() -> None:
    # A million unterminated fences would be truncation if scanned; the cap answers first.
    failure = extract_answer("```\n" * 1_000_000, max_chars=CAP)
    assert isinstance(failure, FormatFailure)
    assert failure.error is FormatError.TOO_LONG


@pytest.mark.parametrize(
    ("info", "kind"),
    [
        ("python", PY),
        ("py", PY),
        ("Python", PY),
        ("PY3", PY),
        ("python3", PY),
        ("python title=f.py", PY),
        ("input", INP),
        ("Output", OUT),
        ("message", BlockKind.MESSAGE),
        ("", PLAIN),
        ("   ", PLAIN),
        ("json", OTHER),
        ("inputs", OTHER),
    ],
)
def test_fence_languages(info: str, kind: BlockKind) -> None:
    assert block_kind(info) is kind


@given(st.text(alphabet=st.characters(exclude_characters="\r", exclude_categories=["Cs"])))
def test_fenced_text_reads_back_exactly(body: str) -> None:
    section = extract_answer(f"<answer>\n{fenced(BlockKind.OUTPUT, body)}\n</answer>", max_chars=10**6)
    assert isinstance(section, AnswerSection)
    assert [(b.kind, b.body) for b in section.blocks] == [(OUT, body)]
