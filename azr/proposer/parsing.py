"""Reading a proposer completion into a proposed task, or a named format error.

The answer section is found by ``azr.roles.completion`` (think/answer tags, fences, truncation). Then:

- Deduction and abduction: the program is the LAST ```python block (```py, ```python3, any case) and the
  input the LAST ```input block of the answer; an unlabelled fence is not accepted for either, since it
  could be meant as both. The last block is the model's final revision when it writes several. The
  reference code takes the FIRST block and rejects programs with more than one ``def``; we keep helper
  functions (the prompts allow them, ``f`` is the entry point) and leave validity to the executor.
- Induction: every ```input block of the answer is one input, in order. There must be at least
  ``min_induction_inputs`` distinct ones and at most ``max_induction_inputs`` blocks (both 10 by default:
  exactly 10, as the paper; the reference code silently keeps the last 10 of more). A repeated input counts
  once, since a hidden pair equal to a shown one would be solved by copying. The message is the LAST
  ```message block; as in the paper, it is free text (the prompt asks for no code, nothing enforces it:
  a message that gives the program away makes the task easy, which the learnability reward punishes).
  The program is the one the request gave, never model text.
- Inputs that parse as argument lists are stored in canonical form (``azr.executor.values``): the form the
  executor runs, so the solver later sees exactly what ``f`` received (a dict literal's keys, say, in the
  order ``f`` iterated them), and ``[1,2]`` repeats ``[1, 2]``. An input that does not parse is kept as
  written; the executor rejects it with its own error class.

The result is a ``Task`` with origin ``proposed``, the references as parents and no outputs: the executor
validates it and computes its gold outputs.
"""

from __future__ import annotations

from collections.abc import Sequence

from azr.core.task import Origin, Task, TaskType
from azr.executor.values import ValueRejectedError, canonical_args, parse_args
from azr.proposer.prompts import ProposalRequest
from azr.roles.completion import AnswerSection, BlockKind, extract_answer
from azr.roles.config import RolesConfig
from azr.roles.errors import FormatError, FormatFailure
from azr.roles.fields import field_failure, trim_code


def parse_proposal(
    completion: str | None, request: ProposalRequest, config: RolesConfig, *, stopped_by_length: bool = False
) -> Task | FormatFailure:
    """Parse ``completion``, the answer to the prompt built from ``request``.

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
    if request.type is TaskType.INDUCTION:
        return _induction(section, request, config)
    return _program_and_input(section, request, config)


def induction_failure(inputs: Sequence[str], message: str, config: RolesConfig) -> FormatFailure | None:
    """Whether an induction proposal breaks its requirements: the number of distinct inputs, and a message
    that says something."""
    if len(set(inputs)) < config.min_induction_inputs:
        return FormatFailure(
            FormatError.TOO_FEW_INPUTS,
            f"{len(set(inputs))} distinct inputs, at least {config.min_induction_inputs} required",
        )
    if len(inputs) > config.max_induction_inputs:
        return FormatFailure(
            FormatError.TOO_MANY_INPUTS,
            f"{len(inputs)} inputs, at most {config.max_induction_inputs} allowed",
        )
    if not message.strip():
        return FormatFailure(FormatError.MISSING_MESSAGE, "the message is blank")
    return None


def _program_and_input(
    section: AnswerSection, request: ProposalRequest, config: RolesConfig
) -> Task | FormatFailure:
    code = section.last(BlockKind.PYTHON)
    if code is None:
        return FormatFailure(FormatError.NO_CODE_BLOCK, f"no ```python block in the answer{_found(section)}")
    given = section.last(BlockKind.INPUT)
    if given is None:
        return FormatFailure(FormatError.NO_INPUT_BLOCK, f"no ```input block in the answer{_found(section)}")
    program = trim_code(code.body)
    argument_text = given.body.strip()
    failure = field_failure(program, "program", config.max_program_chars) or field_failure(
        argument_text, "input", config.max_input_chars
    )
    if failure is not None:
        return failure
    return Task(
        type=request.type,
        program=program,
        inputs=(_canonical(argument_text),),
        origin=Origin.PROPOSED,
        step=request.step,
        parents=request.parent_ids,
    )


def _induction(section: AnswerSection, request: ProposalRequest, config: RolesConfig) -> Task | FormatFailure:
    inputs = _distinct_inputs(section, config)
    if isinstance(inputs, FormatFailure):
        return inputs
    message_block = section.last(BlockKind.MESSAGE)
    if message_block is None:
        return FormatFailure(FormatError.MISSING_MESSAGE, "no ```message block in the answer")
    message = message_block.body.strip()
    failure = field_failure(message, "message", config.max_message_chars) if message else None
    failure = failure or induction_failure(inputs, message, config)
    if failure is not None:
        return failure
    return Task(
        type=TaskType.INDUCTION,
        program=request.program,
        inputs=tuple(inputs),
        message=message,
        origin=Origin.PROPOSED,
        step=request.step,
        parents=request.parent_ids,
    )


def _distinct_inputs(section: AnswerSection, config: RolesConfig) -> list[str] | FormatFailure:
    """Every ```input block of the answer, in order, each text once."""
    blocks = section.all(BlockKind.INPUT)
    if not blocks:
        return FormatFailure(FormatError.NO_INPUT_BLOCK, f"no ```input block in the answer{_found(section)}")
    if len(blocks) > config.max_induction_inputs:
        return FormatFailure(
            FormatError.TOO_MANY_INPUTS,
            f"{len(blocks)} inputs, at most {config.max_induction_inputs} allowed",
        )
    inputs: list[str] = []
    for number, block in enumerate(blocks, start=1):
        text = block.body.strip()
        if failure := field_failure(text, f"input {number}", config.max_input_chars):
            return failure
        if (text := _canonical(text)) not in inputs:
            inputs.append(text)
    return inputs


def _canonical(argument_text: str) -> str:
    """The canonical argument-list text, or the text as written when it does not parse."""
    try:
        return canonical_args(parse_args(argument_text))
    except ValueRejectedError:
        return argument_text


def _found(section: AnswerSection) -> str:
    kinds = sorted({block.kind.value for block in section.blocks})
    return f" (found: {', '.join(kinds)})" if kinds else " (no fenced blocks)"
