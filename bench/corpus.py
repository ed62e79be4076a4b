"""A deterministic corpus of realistic AZR-style tasks for benchmarks and end-to-end checks.

The programs are the kind a coder model proposes in self-play: string manipulation, list algorithms,
counting with dicts, recursion, arithmetic, sorting with keys, small classes and dataclasses, using only
modules the static gate allows. They are composed from the parametrised families of
``bench.families``, so the same ``seed`` always yields the same tasks and different seeds vary the
constants, names and inputs. Tasks carry inputs only: their gold outputs are what the executor computes.

Deduction and abduction tasks get one input each, as in the paper's triplets; induction tasks get between
6 and 10 distinct inputs and a message.
"""

from __future__ import annotations

import random

from azr.core.task import Task, TaskType
from azr.executor.values import canonical_args, parse_args
from bench.families import FAMILIES

__all__ = ["corpus"]

_TYPES = (TaskType.DEDUCTION, TaskType.ABDUCTION, TaskType.INDUCTION)
_INDUCTION_INPUTS = (6, 10)
_ATTEMPTS_PER_TASK = 50


def corpus(n: int = 600, seed: int = 0) -> list[Task]:
    """``n`` tasks with pairwise different programs, the three task types in turn, reproducible from
    ``seed``."""
    if n < 0:
        raise ValueError("n must be non-negative")
    rng = random.Random(seed)
    tasks: list[Task] = []
    seen: set[str] = set()
    for _ in range(_ATTEMPTS_PER_TASK * max(n, 1)):
        if len(tasks) == n:
            return tasks
        task = _draw(rng, _TYPES[len(tasks) % len(_TYPES)])
        if task is not None and task.program not in seen:
            seen.add(task.program)
            tasks.append(task)
    if len(tasks) < n:
        raise RuntimeError(
            f"the families yield only {len(tasks)} distinct programs for seed {seed}; ask for fewer"
        )
    return tasks


def _draw(rng: random.Random, task_type: TaskType) -> Task | None:
    draft = rng.choice(FAMILIES)(rng)
    wanted = rng.randint(*_INDUCTION_INPUTS) if task_type is TaskType.INDUCTION else 1
    inputs: list[str] = []
    for _ in range(10 * wanted):
        # Canonical text, as the executor stores it: dict order sorted, so programs see what solvers see.
        text = canonical_args(parse_args(draft.make_input(rng)))
        if text not in inputs:
            inputs.append(text)
        if len(inputs) == wanted:
            break
    if task_type is TaskType.INDUCTION and len(inputs) < _INDUCTION_INPUTS[0]:
        return None  # a family with too few distinct inputs for this draw; draw again
    message = draft.message if task_type is TaskType.INDUCTION else ""
    return Task(
        type=task_type,
        program=_document(rng, draft.program, draft.message),
        inputs=tuple(inputs),
        message=message,
    )


def _document(rng: random.Random, program: str, message: str) -> str:
    """Models often document ``f``: add nothing, a docstring or a comment, as a model might."""
    style = rng.randrange(3)
    head, sep, body = program.partition("\ndef f(")
    if style == 0 or not sep:
        return program
    if style == 1:
        signature, _, rest = body.partition(":\n")
        return f'{head}\ndef f({signature}:\n    """{message[0].upper()}{message[1:]}."""\n{rest}'
    return f"{head}\n# {message}\ndef f({body}"
