"""Prompt text shared by both roles, and the two ways a prompt is rendered (chat model or base model).

The texts of this module and of ``azr.proposer.prompts`` / ``azr.solver.prompts`` form one template set
with one ``TEMPLATE_VERSION``: bump it whenever any of their wording changes, so that experiences and
evaluations can say which prompts produced them. The structure follows the Absolute Zero paper: the answer
goes between ``<answer>`` tags after reasoning between ``<think>`` tags, with programs, inputs, outputs and
messages in fenced blocks named ``python``, ``input``, ``output`` and ``message``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

TEMPLATE_VERSION = "1"

FORMAT_RULE = (
    "The Assistant first thinks the problem through, then answers. The reasoning goes inside "
    "<think> </think> tags and the answer inside <answer> </answer> tags, in this shape: "
    "<think> reasoning here </think> <answer> answer here </answer>."
)
"""How a response is laid out: the system message of a chat prompt, the preamble of a base prompt."""

BASE_PREAMBLE = "A conversation between User and Assistant. The User sets a task and the Assistant does it. "

PROGRAM_PLACEHOLDER = "<a program defining f>"
INPUT_PLACEHOLDER = "<the arguments of one call of f>"
OUTPUT_PLACEHOLDER = "<the value f returns, as a Python literal>"
MESSAGE_PLACEHOLDER = "<a short description of what f does, without code>"
PLACEHOLDERS = frozenset({PROGRAM_PLACEHOLDER, INPUT_PLACEHOLDER, OUTPUT_PLACEHOLDER, MESSAGE_PLACEHOLDER})
"""Stand-ins shown in the answer-format examples; a block that only repeats one is a format error."""

INPUT_RULE = (
    "An input is the argument list of one call of `f`, written as Python literals separated by commas: "
    "for `def f(a, b)`, the input `[1, 2], 'x'` means the call `f([1, 2], 'x')`."
)
VALUE_RULE = (
    "Literal values are None, booleans, numbers (no NaN or infinity), strings, bytes, and lists, "
    "tuples, sets and dicts of them."
)


class ChatMessage(TypedDict):
    role: str
    content: str


@dataclass(frozen=True, slots=True)
class Prompt:
    """A rendered task for the model; ``as_chat`` and ``as_base`` give the two input forms."""

    body: str
    """The task text (the user turn)."""
    version: str = TEMPLATE_VERSION

    def as_chat(self) -> list[ChatMessage]:
        """Messages for ``tokenizer.apply_chat_template(..., add_generation_prompt=True)``."""
        return [
            ChatMessage(role="system", content=FORMAT_RULE),
            ChatMessage(role="user", content=self.body),
        ]

    def as_base(self) -> str:
        """One string for a base model; it ends inside the opened ``<think>`` tag."""
        return f"{BASE_PREAMBLE}{FORMAT_RULE}\nUser: {self.body}\nAssistant: <think>"


def program_rules(allowed_imports: Sequence[str]) -> list[str]:
    """The requirements every program must meet, one bullet each (proposed programs and induction answers)."""
    imports = (
        f"The only modules it may import are: {', '.join(allowed_imports)}."
        if allowed_imports
        else "It may not import anything."
    )
    return [
        "Define a function named `f`; helper functions are allowed, but `f` is the one that is called.",
        imports,
        "It must be deterministic: no randomness, no clocks or dates, no files, network, printing or "
        "reading input, no environment access. The same input must always give the same output.",
        f"`f` must return a value that can be written as a Python literal. {VALUE_RULE}",
    ]


def bullets(lines: Sequence[str]) -> str:
    return "\n".join(f"- {line}" for line in lines)
