"""Prompt text shared by both roles, and the ways a prompt is rendered (chat model or base model).

The texts of this module and of ``azr.proposer.prompts`` / ``azr.solver.prompts`` form one template set
with one ``TEMPLATE_VERSION``: bump it whenever any of their wording changes, so that experiences and
evaluations can say which prompts produced them. The structure follows the Absolute Zero paper: the answer
goes between ``<answer>`` tags after reasoning between ``<think>`` tags, with programs, inputs, outputs and
messages in fenced blocks named ``python``, ``input``, ``output`` and ``message``.

Two templates wrap the task text (``RolesConfig.template``):

- ``azr`` (default): the format rule in our words, as a system message (chat) or a preamble (base).
- ``paper``: the R1 template the paper and its reference code use, verbatim (``R1_TEMPLATE``), with the
  task text as the user's question; in chat form it is the one user message, so that the tokenizer's chat
  template wraps it exactly as the reference code's data does (Qwen2.5 adds its default system message).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

from azr.roles.config import TemplateName

TEMPLATE_VERSION = "3"

R1_TEMPLATE = (
    "A conversation between User and Assistant. The user asks a question, and the Assistant solves it. "
    "The assistant first thinks about the reasoning process in the mind and then provides the user with "
    "the answer. The reasoning process and answer are enclosed within <think> </think> and <answer> "
    "</answer> tags, respectively, i.e., <think> reasoning process here </think> <answer> answer here "
    "</answer>. User: {}\nAssistant: <think>"
)
"""The paper's prompt template, character for character as its reference code writes it."""

FORMAT_RULE = (
    "The Assistant first thinks the problem through, then answers. The reasoning goes inside "
    "<think> </think> tags and the answer inside <answer> </answer> tags, in this shape: "
    "<think> reasoning here </think> <answer> answer here </answer>."
)
"""How a response is laid out: the system message of a chat prompt, the preamble of a base prompt."""

BASE_PREAMBLE = "A conversation between User and Assistant. The User sets a task and the Assistant does it. "

# Concrete examples in the answer-format sections: a base model copies angle-bracket placeholders
# literally, while a copied example is merely a wrong (or valid) answer that the executor judges.
EXAMPLE_PROGRAM = "def f(name, info):\n    return name + ' lives in ' + info['city']"
EXAMPLE_INPUT = "'John', {'age': 20, 'city': 'New York'}"
EXAMPLE_INPUT_2 = "'Sammy', {'age': 37, 'city': 'Los Angeles'}"
EXAMPLE_OUTPUT = "{'age': 20, 'city': 'New York'}"
EXAMPLE_MESSAGE = "Joins a name to the city stored under the key 'city'."

INPUT_RULE = (
    "An input is the argument list of one call of `f`, written as Python literals separated by commas, "
    "with quotes around strings: for `def f(a, b)`, the input `[1, 2], 'x'` means the call `f([1, 2], 'x')`."
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
    """The task text (the user's request)."""
    version: str = TEMPLATE_VERSION
    template: TemplateName = "azr"

    def as_chat(self) -> list[ChatMessage]:
        """Messages for ``tokenizer.apply_chat_template(..., add_generation_prompt=True)``."""
        if self.template == "paper":
            return [ChatMessage(role="user", content=R1_TEMPLATE.format(self.body))]
        return [
            ChatMessage(role="system", content=FORMAT_RULE),
            ChatMessage(role="user", content=self.body),
        ]

    def as_base(self) -> str:
        """One string for a base model; it ends inside the opened ``<think>`` tag."""
        if self.template == "paper":
            return R1_TEMPLATE.format(self.body)
        return f"{BASE_PREAMBLE}{FORMAT_RULE}\nUser: {self.body}\nAssistant: <think>"


def program_rules(allowed_imports: Sequence[str], timeout_s: float) -> list[str]:
    """The requirements every program must meet, one bullet each (proposed programs and induction answers)."""
    imports = (
        f"The only modules it may import are: {', '.join(allowed_imports)}; imports go at the top."
        if allowed_imports
        else "It may not import anything."
    )
    return [
        "Name the entry function `f` (e.g. `def f(...): ...`); it takes at least one argument and returns "
        "a value. Helper functions and classes are allowed, defined at the top; `f` is the one called.",
        imports,
        "It must be deterministic: no randomness, no clocks or dates, no files, network, printing or "
        "reading input, no environment or other external state. The same input always gives the same "
        "output.",
        f"One call of `f` must finish within {timeout_s:g} seconds.",
        f"`f` must return a value that can be written as a Python literal. {VALUE_RULE}",
    ]


def bullets(lines: Sequence[str]) -> str:
    return "\n".join(f"- {line}" for line in lines)
