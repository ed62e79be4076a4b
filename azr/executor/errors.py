"""The closed set of executor error classes.

Every way a job can fail maps to exactly one ``ErrorCode``. Callers branch on the code, never on message
text. ``INFRA_ERROR`` means the executor itself failed (a worker died, a pipe broke): it says nothing about
the task or the answer, so it must never be turned into a reward; the sample is retried or dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ErrorCode(StrEnum):
    SYNTAX_ERROR = "syntax_error"
    NO_ENTRY_FUNCTION = "no_entry_function"
    FORBIDDEN = "forbidden"
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    RUNTIME_ERROR = "runtime_error"
    NONDETERMINISTIC = "nondeterministic"
    UNSUPPORTED_VALUE = "unsupported_value"
    BAD_ANSWER = "bad_answer"
    INFRA_ERROR = "infra_error"


@dataclass(frozen=True, slots=True)
class ExecError:
    """A typed failure: the class decides behaviour, the message is for people."""

    code: ErrorCode
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code.value, "message": self.message}

    @classmethod
    def from_dict(cls, data: dict[str, str]) -> ExecError:
        return cls(code=ErrorCode(data["code"]), message=str(data.get("message", "")))


class ExecutorError(Exception):
    """Raised inside the executor's trusted code to carry an ``ExecError`` up to the result."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code.value}: {message}")
        self.error = ExecError(code, message)
