"""Reading a raw completion: the ``<think>``/``<answer>`` wrapper and the fenced blocks inside the answer.

Rules (both roles use them; the role parsers then pick blocks):

1. ``None`` (an engine that returned nothing) is ``missing_answer``. Newlines are normalised (CRLF and lone
   CR become LF). A completion longer than the cap is ``too_long`` before any scanning, so the work is
   bounded.
2. Reasoning ends at the first ``</think>``, found as a plain tag: the reasoning is free text, and nothing
   in it (a stray or unclosed fence, a line starting ``User:``) can hide the answer that follows. The tag
   is optional: base prompts open ``<think>`` themselves, and without it the search starts at the top.
3. The answer is the LAST ``<answer>`` after that point and runs to the next ``</answer>`` outside a fenced
   block, or to the end: engines usually strip a stop string such as ``</answer>``. Fences are tracked
   inside the answer only, so a program holding the string ``"</answer>"`` cannot end the answer early.
   When generation hit the length limit and the answer was never closed, it is ``truncated``; a fence
   still open at the end of the answer is ``truncated`` too. No ``<answer>`` at all is ``missing_answer``.
   Tags match case-insensitively. Text after the answer is ignored.
4. After the reasoning, a line outside a fenced block that starts with ``User:`` or ``Assistant:`` opens a
   turn the model invented (a base model that runs on past its answer): the completion ends there, as a
   stop string would end it, so a second "assistant reply" is never read.
5. A fence opens at the start of a line, or right after a tag, with three or more backticks and an info
   string whose first word names the block (``python``, ``py``, ``input``, ...). Text after that word on
   the fence line is the block's first line (``\u0060\u0060\u0060output 4``): nothing the model wrote is
   dropped. A fence closes at a line holding at least as many backticks and nothing else but
   (optionally) a tag, or at backticks ending a content line (``4\u0060\u0060\u0060``), whose text is the
   block's last line.
6. Only backtick fences are recognised (no tildes, no indented code), and a fence that opens in the middle
   of a prose line is prose.
7. Strict mode (``RolesConfig.strict_format``, the reference code's format check
   ``<think>.*?</think>\\s*<answer>.*?</answer>``): the reasoning must be closed by ``</think>``, the
   first thing after it must be ``<answer>``, and the answer read must be closed by ``</answer>``;
   anything else is ``layout``. The opening ``<think>`` stays optional since our prompts end with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from azr.roles.errors import FormatError, FormatFailure

_THINK_END = re.compile(r"</think>", re.IGNORECASE)
_ANSWER_OPEN = re.compile(r"<answer>", re.IGNORECASE)
_ANSWER_TAG = re.compile(r"<(/?)answer>", re.IGNORECASE)
_ANY_TAG = re.compile(r"</?(?:think|answer)>", re.IGNORECASE)
_FENCE_OPEN = re.compile(r"[ \t]*(`{3,})([^`\s]*)[ \t]*(.*)")
_FENCE_CLOSE = re.compile(r"[ \t]*(`{3,})[ \t]*(.*)")
_CONTENT_CLOSE = re.compile(r"(.*[^`\s])[ \t]*(`{3,})[ \t]*(.*)")
_TURN = re.compile(r"(User|Assistant):")
_TURN_LINE = re.compile(r"^(User|Assistant):", re.MULTILINE)
_STRICT_START = re.compile(r"\s*<answer>", re.IGNORECASE)


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
_NAMED = frozenset({BlockKind.PYTHON, BlockKind.INPUT, BlockKind.OUTPUT, BlockKind.MESSAGE})


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
class AnswerSection:
    """The answer of a completion: its fenced blocks in order and the prose between them."""

    blocks: tuple[Block, ...]
    prose: str
    closed: bool  # whether a ``</answer>`` ended it

    def last(self, kind: BlockKind) -> Block | None:
        """The last block of ``kind`` (the rule when a completion holds several: the final revision)."""
        return next((b for b in reversed(self.blocks) if b.kind is kind), None)

    def all(self, kind: BlockKind) -> tuple[Block, ...]:
        return tuple(b for b in self.blocks if b.kind is kind)


@dataclass(frozen=True, slots=True)
class _Fence:
    ticks: int
    kind: BlockKind


@dataclass(frozen=True, slots=True)
class _Read:
    """One answer as read from its opening tag: where reading stopped, and why."""

    blocks: tuple[Block, ...]
    prose: str
    closed: bool
    end: int  # offset just past ``</answer>``, or where the answer ran out
    open_fence: BlockKind | None  # a fence left open at ``end``


def normalise_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def extract_answer(
    completion: str | None, *, max_chars: int, stopped_by_length: bool = False, strict: bool = False
) -> AnswerSection | FormatFailure:
    """Find the answer section of ``completion`` (see the module docstring for the rules).

    ``stopped_by_length`` says that generation ended at the token limit rather than at a stop string or
    end-of-sequence; an answer left open is then cut off, not merely stripped of its closing tag.
    ``strict`` selects the reference code's layout check (rule 7).
    """
    if completion is None:
        return FormatFailure(FormatError.MISSING_ANSWER, "no completion")
    if len(completion) > max_chars:
        return FormatFailure(
            FormatError.TOO_LONG, f"completion has {len(completion)} characters, cap {max_chars}"
        )
    text = normalise_newlines(completion)
    think_end = _THINK_END.search(text)
    start = think_end.end() if think_end else 0
    if strict and (think_end is None or not _STRICT_START.match(text, start)):
        return FormatFailure(FormatError.LAYOUT, "strict format: </think> must be followed by <answer>")
    read = _last_answer(text, start)
    if read is None:  # cut off before any answer, or ended without one
        error = FormatError.TRUNCATED if stopped_by_length else FormatError.MISSING_ANSWER
        return FormatFailure(error, "no <answer> tag after the reasoning")
    failure = _read_failure(read, stopped_by_length=stopped_by_length, strict=strict)
    if failure is not None:
        return failure
    return AnswerSection(blocks=read.blocks, prose=read.prose, closed=read.closed)


def _read_failure(read: _Read, *, stopped_by_length: bool, strict: bool) -> FormatFailure | None:
    if read.open_fence is not None:
        return FormatFailure(FormatError.TRUNCATED, f"a fenced {read.open_fence.value} block is never closed")
    if stopped_by_length and not read.closed:
        return FormatFailure(FormatError.TRUNCATED, "generation hit the length limit inside the answer")
    if strict and not read.closed:
        return FormatFailure(FormatError.LAYOUT, "strict format: the answer is not closed by </answer>")
    if not read.blocks and not read.prose:
        return FormatFailure(FormatError.EMPTY_ANSWER, "the answer is blank")
    return None


def _last_answer(text: str, start: int) -> _Read | None:
    """Read every answer after ``start`` up to an invented turn; the last one counts."""
    last: _Read | None = None
    pos = start
    while True:
        opener = _ANSWER_OPEN.search(text, pos)
        turn = _TURN_LINE.search(text, pos)
        if opener is None or (turn is not None and turn.start() < opener.start()):
            return last
        last = _read_answer(text, opener.end())
        if not last.closed:
            return last
        pos = last.end


def _read_answer(text: str, begin: int, *, tags: bool = True) -> _Read:
    """Scan from just after an ``<answer>`` tag to its ``</answer>``, tracking fences; with ``tags``
    false, tags and turns are plain text and the scan runs to the end."""
    blocks: list[Block] = []
    prose: list[str] = []
    fence: _Fence | None = None
    body: list[str] = []
    line_start = begin
    for number, line in enumerate(text[begin:].split("\n")):
        rest, at_line_start = line, number > 0
        while True:  # one line may close a fence and then hold a tag, or open a fence after a tag
            if fence is not None:
                closing = _close(rest, fence.ticks)
                if closing is None:
                    body.append(rest)
                    break
                content, rest = closing
                if content is not None:
                    body.append(content)
                blocks.append(Block(fence.kind, "\n".join(body)))
                fence, body, at_line_start = None, [], False
                continue
            if tags and at_line_start and _TURN.match(line):
                return _Read(tuple(blocks), "".join(prose).strip(), False, line_start, None)
            at_line_start = False
            opener = _FENCE_OPEN.fullmatch(rest)
            if opener:
                fence = _Fence(len(opener.group(1)), block_kind(opener.group(2)))
                rest = opener.group(3)
                if fence.kind in _NAMED and rest.strip():
                    continue  # text on the fence line is the block's first line
                break
            tag = _ANSWER_TAG.search(rest) if tags else None
            if tag is None:
                prose.append(rest + "\n")
                break
            prose.append(rest[: tag.start()])
            if tag.group(1):
                end = line_start + len(line) - len(rest) + tag.end()
                return _Read(tuple(blocks), "".join(prose).strip(), True, end, None)
            blocks, prose = [], []  # a new <answer> inside the answer starts over: the last one counts
            rest = rest[tag.end() :]
        line_start += len(line) + 1
    open_kind = fence.kind if fence is not None else None
    return _Read(tuple(blocks), "".join(prose).strip(), False, len(text), open_kind)


def _close(line: str, ticks: int) -> tuple[str | None, str] | None:
    """Whether ``line`` closes a fence of ``ticks`` backticks: (its last content line or None, the text
    after the fence, read as prose), or None when the line is block content."""
    bare = _FENCE_CLOSE.fullmatch(line)
    if bare and len(bare.group(1)) >= ticks and _is_tail(bare.group(2)):
        return None, bare.group(2)
    ending = _CONTENT_CLOSE.fullmatch(line)
    if ending and len(ending.group(2)) >= ticks and _is_tail(ending.group(3)):
        return ending.group(1), ending.group(3)
    return None


def _is_tail(text: str) -> bool:
    """Text that may follow a closing fence on its line: nothing, or a tag."""
    return not text.strip() or _ANY_TAG.match(text) is not None


def fenced_blocks(text: str) -> tuple[Block, ...] | FormatFailure:
    """Every fenced block of ``text`` in order, by the answer's fence rules, tags being plain text (to read
    prompts back)."""
    read = _read_answer(normalise_newlines(text), 0, tags=False)
    if read.open_fence is not None:
        return FormatFailure(FormatError.TRUNCATED, f"a fenced {read.open_fence.value} block is never closed")
    return read.blocks


def fenced(kind: BlockKind, body: str) -> str:
    """Render ``body`` as a fenced block that the scanner reads back exactly.

    The fence is one backtick longer than the longest backtick run in ``body``, so a body holding a
    fence of its own (a program with ``` in a string) cannot close the block early.
    """
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    ticks = "`" * max(3, longest + 1)
    info = "" if kind is BlockKind.PLAIN else kind.value
    return f"{ticks}{info}\n{body}\n{ticks}"


def write_completion(think: str, answer: str) -> str:
    """A completion as both roles' readers expect it: reasoning in ``<think>``, then the answer section."""
    return f"<think> {think} </think> <answer>\n{answer}\n</answer>"
