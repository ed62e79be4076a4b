"""Turning a chosen block into a field (a program, an input, an output, a message) with cheap checks only:
trimming, blankness and a size cap. Whether the field is valid Python or a valid literal is the
executor's decision."""

from __future__ import annotations

from azr.roles.errors import FormatError, FormatFailure


def trim_code(body: str) -> str:
    """Drop blank lines around a program and trailing whitespace; indentation and inner lines are kept."""
    lines = body.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    return "\n".join(lines).rstrip()


def field_failure(text: str, name: str, max_chars: int) -> FormatFailure | None:
    """The format error of a trimmed field, if any: blank, or over its cap."""
    if not text.strip():
        return FormatFailure(FormatError.EMPTY_ANSWER, f"the {name} is blank")
    if len(text) > max_chars:
        return FormatFailure(FormatError.TOO_LONG, f"the {name} has {len(text)} characters, cap {max_chars}")
    return None
