"""Reading a solver completion into the answer text the executor judges, or a named format error.

The answer section is found by ``azr.roles.completion``. The answer is then, by task type, the LAST block
of the expected kind (deduction ```output, abduction ```input, induction ```python with ```py, ```python3
and any case accepted); failing that, the LAST unlabelled block; failing that, when the answer holds no
fenced block at all, its bare text (``<answer>4</answer>``). A section with blocks of other kinds only is a
format error. The text is not parsed here: whether it is a literal or a program is the executor's verdict.

The last block is the reference code's rule for solver answers too (its ``extract_input_output`` and
``parse_code_function`` take the last match). Its further fallbacks (``# Output:`` lines, ``output(...)``
calls, "the output is ...") are not followed: an answer must be a block or the answer's bare text.
"""

from __future__ import annotations

from dataclasses import dataclass

from azr.core.task import TaskType
from azr.roles.completion import AnswerSection, BlockKind, extract_answer
from azr.roles.config import RolesConfig
from azr.roles.errors import FormatError, FormatFailure
from azr.roles.fields import field_failure, trim_code


@dataclass(frozen=True, slots=True)
class Answer:
    """The solver's answer, as the executor's ``check`` takes it."""

    text: str


_EXPECTED = {
    TaskType.DEDUCTION: (BlockKind.OUTPUT, FormatError.NO_OUTPUT_BLOCK, "output"),
    TaskType.ABDUCTION: (BlockKind.INPUT, FormatError.NO_INPUT_BLOCK, "input"),
    TaskType.INDUCTION: (BlockKind.PYTHON, FormatError.NO_CODE_BLOCK, "program"),
}


def parse_answer(
    completion: str | None, task_type: TaskType, config: RolesConfig, *, stopped_by_length: bool = False
) -> Answer | FormatFailure:
    """Parse a solver ``completion`` for a task of ``task_type``.

    ``stopped_by_length``: generation ended at the token limit (see ``extract_answer``).
    """
    section = extract_answer(
        completion,
        max_chars=config.max_completion_chars,
        stopped_by_length=stopped_by_length,
        strict=config.strict_format,
    )
    if isinstance(section, FormatFailure):
        return section
    kind, missing, name = _EXPECTED[task_type]
    raw = _answer_text(section, kind)
    if raw is None:
        found = ", ".join(sorted({b.kind.value for b in section.blocks}))
        return FormatFailure(missing, f"no ```{kind.value} block in the answer (found: {found})")
    text = trim_code(raw) if kind is BlockKind.PYTHON else raw.strip()
    cap = {
        BlockKind.OUTPUT: config.max_output_chars,
        BlockKind.INPUT: config.max_input_chars,
        BlockKind.PYTHON: config.max_program_chars,
    }[kind]
    failure = field_failure(text, name, cap)
    return failure if failure is not None else Answer(text)


def _answer_text(section: AnswerSection, kind: BlockKind) -> str | None:
    block = section.last(kind) or section.last(BlockKind.PLAIN)
    if block is not None:
        return block.body
    return section.prose if not section.blocks else None
