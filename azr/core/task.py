"""The task model shared by every layer.

A task is a program defining ``f`` plus argument lists (``inputs``) and, once the executor has run it, the
gold ``outputs``. Inputs are argument-list texts such as ``"[1, 2], 3"``; outputs are canonical literal
texts (see ``azr.executor.values``). The id is a content hash, so the same task proposed twice is one task.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any


class TaskType(StrEnum):
    DEDUCTION = "deduction"  # given p and i, predict o
    ABDUCTION = "abduction"  # given p and o, find an i with p(i) == o
    INDUCTION = "induction"  # given IO pairs and a message, write p


class Role(StrEnum):
    PROPOSE = "propose"
    SOLVE = "solve"


class TaskUse(StrEnum):
    """What a task was used for; counted per task, so a user can see what became of a seed."""

    REFERENCE = "reference"  # shown to the proposer as a reference
    SOLVE = "solve"  # drawn for the solver
    SOLVE_ATTEMPTS = "solve_attempts"  # answers to it that the executor judged
    SOLVED = "solved"  # answers to it that were correct


class Origin(StrEnum):
    ZERO_SEED = "zero-seed"
    USER = "user"
    PROPOSED = "proposed"


@dataclass(frozen=True, slots=True)
class Task:
    type: TaskType
    program: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...] = ()
    message: str = ""
    origin: Origin = Origin.PROPOSED
    step: int = 0
    parents: tuple[str, ...] = field(default=())

    @property
    def id(self) -> str:
        """Content hash of what defines the task (not of where it came from or its derived outputs)."""
        payload = json.dumps(
            [self.type.value, self.program.strip(), list(self.inputs), self.message.strip()],
            ensure_ascii=False,
            separators=(",", ":"),
        )
        # surrogatepass: a lone surrogate in model text still hashes (it is refused later, with a reason)
        return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()[:24]

    def induction_split(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Indices of the (visible, held-out) IO pairs of an induction task.

        The solver sees the first half (rounded up) with the message; its program is judged on the rest.
        """
        n = len(self.inputs)
        visible = (n + 1) // 2
        return tuple(range(visible)), tuple(range(visible, n))

    def with_outputs(self, outputs: tuple[str, ...]) -> Task:
        return replace(self, outputs=outputs)

    def without_message(self) -> Task:
        """The same task with no message: an induction solver prompt then has no message block."""
        return replace(self, message="")

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": self.type.value,
            "program": self.program,
            "inputs": list(self.inputs),
            "outputs": list(self.outputs),
            "message": self.message,
            "origin": self.origin.value,
            "step": self.step,
            "parents": list(self.parents),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Task:
        """Build a task from JSON data; raises ``ValueError``/``TypeError``/``KeyError`` on bad shapes."""
        inputs = data.get("inputs", [])
        outputs = data.get("outputs", [])
        parents = data.get("parents", [])
        for name, seq in (("inputs", inputs), ("outputs", outputs), ("parents", parents)):
            if not isinstance(seq, list) or not all(isinstance(x, str) for x in seq):
                raise TypeError(f"task.{name} must be a list of strings")
        program = data["program"]
        message = data.get("message", "")
        if not isinstance(program, str) or not isinstance(message, str):
            raise TypeError("task.program and task.message must be strings")
        step = data.get("step", 0)
        if not isinstance(step, int) or isinstance(step, bool):
            raise TypeError("task.step must be an integer")
        return cls(
            type=TaskType(data["type"]),
            program=program,
            inputs=tuple(inputs),
            outputs=tuple(outputs),
            message=message,
            origin=Origin(data.get("origin", Origin.PROPOSED.value)),
            step=step,
            parents=tuple(parents),
        )


MIN_INDUCTION_INPUTS = 2
"""An induction task shows the first half of its pairs and judges the program on the rest: with fewer
than two inputs nothing would be judged, and any program would pass."""


def seed_problem(task: Task) -> str | None:
    """Why ``task`` cannot be a user seed (the API's and a seed file's shared rules), or None."""
    if task.type is TaskType.INDUCTION:
        if not task.message.strip():
            return "an induction seed needs a message"
        if len(task.inputs) < MIN_INDUCTION_INPUTS:
            return f"an induction seed needs at least {MIN_INDUCTION_INPUTS} inputs"
    elif task.message:
        return "only induction seeds carry a message"
    return None


ZERO_SEED = Task(
    type=TaskType.DEDUCTION,
    program="def f(x):\n    return x",
    inputs=('"Hello world"',),
    outputs=("'Hello world'",),
    origin=Origin.ZERO_SEED,
)
"""The zero seed triplet of the paper: the identity function on "Hello world"."""

_IDENTITY_IO = (
    ('"Hello world"', "'Hello world'"),
    ("0", "0"),
    ("-7", "-7"),
    ("3.5", "3.5"),
    ('""', "''"),
    ("[1, 2, 3]", "[1, 2, 3]"),
    ('(1, "a")', "(1, 'a')"),
    ('{"a": 1}', "{'a': 1}"),
    ("True", "True"),
    ("None", "None"),
)
"""Ten (input, canonical output) pairs of the identity: the induction zero seed's IO pairs."""


def zero_seed(task_type: TaskType) -> Task:
    """The zero seed as a task of ``task_type``: every buffer starts from it, so all six (role, type)
    groups exist from the first step. Induction needs several IO pairs and a message: the identity program
    on ten inputs of different types."""
    if task_type is not TaskType.INDUCTION:
        return replace(ZERO_SEED, type=task_type)
    return replace(
        ZERO_SEED,
        type=TaskType.INDUCTION,
        inputs=tuple(i for i, _ in _IDENTITY_IO),
        outputs=tuple(o for _, o in _IDENTITY_IO),
        message="f returns its argument unchanged.",
    )
