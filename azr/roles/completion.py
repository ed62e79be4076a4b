"""Reading a raw completion: the ``<think>``/``<answer>`` wrapper and the fenced blocks inside the answer.

Rules (both roles use them; the role parsers then pick blocks):

1. Newlines are normalised (CRLF and lone CR become LF). A completion longer than the cap is ``too_long``
   before any scanning, so the work is bounded.
2. The text is scanned once, left to right, into prose, tags and fenced blocks. A fence opens at the start
   of a line, or right after a tag, with three or more backticks and an info string; it closes at a line
   holding at least as many backticks and nothing else but (optionally) a tag. Tags inside a fenced block
   are code, not tags: a program holding the string ``"</answer>"`` cannot end the answer early.
3. A fence still open at the end of the completion means the text was cut off: ``truncated``.
4. Reasoning ends at the first ``</think>`` (the tag is optional; base prompts open ``<think>`` themselves).
   The answer is the LAST ``<answer>`` after that point and runs to the next ``</answer>``, or to the end:
   engines usually strip a stop string such as ``</answer>``. When generation hit the length limit and the
   answer was never closed, it is ``truncated``. No ``<answer>`` at all is ``missing_answer``. Tags match
   case-insensitively. Text after the answer is ignored.
5. A prose line that starts with ``User:`` or ``Assistant:`` opens a turn the model invented (a base model
   that runs on past its answer): the completion ends there, as a stop string would end it, so text
   posing as a new user request or a second assistant reply is never read.
6. Only backtick fences are recognised (no tildes, no indented code), and a fence that opens in the middle
   of a prose line is prose.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from azr.roles.errors import FormatError, FormatFailure

_TAG = re.compile(r"<(/?)(think|answer)>", re.IGNORECASE)
_FENCE_OPEN = re.compile(r"[ \t]*(`{3,})([^`\n]*)")
_FENCE_CLOSE = re.compile(r"[ \t]*(`{3,})(.*)")
_TURN = re.compile(r"(User|Assistant):")


class BlockKind(StrEnum):
    """What a fenced block holds, from its info string."""

    PYTHON = "python"
    INPUT = "input"
    OUTPUT = "output"
    MESSAGE = "message"
    PLAIN = "plain"  # no info string
    OTHER = "other"  # any other language


_KIND_BY_INFO = {
    "python": BlockKind.PYTHON,
    "python3": BlockKind.PYTHON,
    "py": BlockKind.PYTHON,
    "py3": BlockKind.PYTHON,
    "input": BlockKind.INPUT,
    "output": BlockKind.OUTPUT,
    "message": BlockKind.MESSAGE,
    "": BlockKind.PLAIN,
}


def block_kind(info: str) -> BlockKind:
    """The kind named by a fence's info string: its first word, case-insensitively (```Python is python)."""
    words = info.split()
    return _KIND_BY_INFO.get(words[0].lower() if words else "", BlockKind.OTHER)


@dataclass(frozen=True, slots=True)
class Block:
    """One fenced block: ``body`` is the exact text between the fence lines (no trailing newline)."""

    kind: BlockKind
    body: str


@dataclass(frozen=True, slots=True)
class _Tag:
    name: str  # "think" or "answer"
    closing: bool


@dataclass(frozen=True, slots=True)
class AnswerSection:
    """The answer of a completion: its fenced blocks in order and the prose between them."""

    blocks: tuple[Block, ...]
    prose: str
    closed: bool  # whether a ``</answer>`` ended it

    def last(self, kind: BlockKind) -> Block | None:
        """The last block of ``kind`` (the paper's rule when a completion holds several)."""
        return next((b for b in reversed(self.blocks) if b.kind is kind), None)

    def all(self, kind: BlockKind) -> tuple[Block, ...]:
        return tuple(b for b in self.blocks if b.kind is kind)


_Token = str | _Tag | Block
_THINK_END = _Tag("think", closing=True)
_ANSWER_OPEN = _Tag("answer", closing=False)
_ANSWER_CLOSE = _Tag("answer", closing=True)


def normalise_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def extract_answer(
    completion: str, *, max_chars: int, stopped_by_length: bool = False
) -> AnswerSection | FormatFailure:
    """Find the answer section of ``completion`` (see the module docstring for the rules).

    ``stopped_by_length`` says that generation ended at the token limit rather than at a stop string or
    end-of-sequence; an answer left open is then cut off, not merely stripped of its closing tag.
    """
    if len(completion) > max_chars:
        return FormatFailure(
            FormatError.TOO_LONG, f"completion has {len(completion)} characters, cap {max_chars}"
        )
    tokens = _scan(normalise_newlines(completion))
    if isinstance(tokens, FormatFailure):
        return tokens
    start = next((i + 1 for i, t in enumerate(tokens) if t == _THINK_END), 0)
    opens = [i for i in range(start, len(tokens)) if tokens[i] == _ANSWER_OPEN]
    if not opens:
        return FormatFailure(FormatError.MISSING_ANSWER, "no <answer> tag after the reasoning")
    body: list[_Token] = []
    closed = False
    for token in tokens[opens[-1] + 1 :]:
        if token == _ANSWER_CLOSE:
            closed = True
            break
        body.append(token)
    if stopped_by_length and not closed:
        return FormatFailure(FormatError.TRUNCATED, "generation hit the length limit inside the answer")
    blocks = tuple(t for t in body if isinstance(t, Block))
    prose = "".join(t for t in body if isinstance(t, str)).strip()
    if not blocks and not prose:
        return FormatFailure(FormatError.EMPTY_ANSWER, "the answer is blank")
    return AnswerSection(blocks=blocks, prose=prose, closed=closed)


def fenced_blocks(text: str) -> tuple[Block, ...] | FormatFailure:
    """Every fenced block of ``text`` in order, by the same scanning rules, tags skipped (to read prompts)."""
    tokens = _scan(normalise_newlines(text))
    if isinstance(tokens, FormatFailure):
        return tokens
    return tuple(t for t in tokens if isinstance(t, Block))


def _scan(text: str) -> list[_Token] | FormatFailure:
    """Split ``text`` into prose strings, tags and blocks; a fence open at the end is ``truncated``."""
    tokens: list[_Token] = []
    fence: tuple[int, BlockKind] | None = None  # (backtick count, kind) of the open fence
    body: list[str] = []
    for line in text.split("\n"):
        if fence is None:
            if _TURN.match(line):
                break
            fence = _scan_prose(line, tokens)
            continue
        close = _FENCE_CLOSE.fullmatch(line)
        rest = close.group(2) if close else ""
        if close and len(close.group(1)) >= fence[0] and (not rest.strip() or _TAG.match(rest.lstrip())):
            tokens.append(Block(fence[1], "\n".join(body)))
            body = []
            fence = _scan_prose(rest, tokens)
        else:
            body.append(line)
    if fence is not None:
        return FormatFailure(FormatError.TRUNCATED, f"a fenced {fence[1].value} block is never closed")
    return tokens


def _scan_prose(line: str, tokens: list[_Token]) -> tuple[int, BlockKind] | None:
    """Append the prose and tags of one line; return the fence it opens, if any.

    A fence can open at the start of the line or right after a tag (``<answer>```python``).
    """
    pos = 0
    while True:
        opener = _FENCE_OPEN.fullmatch(line, pos)
        if opener:
            return len(opener.group(1)), block_kind(opener.group(2))
        tag = _TAG.search(line, pos)
        if tag is None:
            tokens.append(line[pos:] + "\n")
            return None
        tokens.append(line[pos : tag.start()])
        tokens.append(_Tag(tag.group(2).lower(), closing=bool(tag.group(1))))
        pos = tag.end()


def fenced(kind: BlockKind, body: str) -> str:
    """Render ``body`` as a fenced block that the scanner reads back exactly.

    The fence is one backtick longer than the longest backtick run in ``body``, so a body holding a
    fence of its own (a program with ``` in a string) cannot close the block early.
    """
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    ticks = "`" * max(3, longest + 1)
    info = "" if kind is BlockKind.PLAIN else kind.value
    return f"{ticks}{info}\n{body}\n{ticks}"
