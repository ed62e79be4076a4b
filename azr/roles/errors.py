"""Named format errors: every way a completion can fail to parse maps to exactly one ``FormatError``.

A format error means the response is broken as text (shaping gives it -1); whether a well-formed program or
answer is valid or right is the executor's decision, not the parser's.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class FormatError(StrEnum):
    TOO_LONG = "too_long"  # the completion or one of its fields is over its size cap
    TRUNCATED = "truncated"  # a fence is never closed, or generation hit the length limit inside the answer
    MISSING_ANSWER = "missing_answer"  # no <answer> tag after the reasoning (or no completion at all)
    EMPTY_ANSWER = "empty_answer"  # the answer, or the block holding it, is blank
    NO_CODE_BLOCK = "no_code_block"  # no ```python block where a program is required
    NO_INPUT_BLOCK = "no_input_block"  # no ```input block where an input is required
    NO_OUTPUT_BLOCK = "no_output_block"  # no ```output block where an output is required
    MISSING_MESSAGE = "missing_message"  # an induction proposal without a ```message block
    TOO_FEW_INPUTS = "too_few_inputs"  # an induction proposal with fewer distinct inputs than required
    TOO_MANY_INPUTS = "too_many_inputs"  # an induction proposal with more inputs than allowed
    LAYOUT = "layout"  # strict mode: not <think> ... </think> <answer> ... </answer>


@dataclass(frozen=True, slots=True)
class FormatFailure:
    """Why a completion could not be parsed: the class decides the reward, the detail is for people."""

    error: FormatError
    detail: str
