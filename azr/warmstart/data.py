"""The warm start's data set: tasks drawn from the program families, labelled by the executor, written as
examples of both roles, and checked end to end.

Nothing here is taken on trust: the executor computes every gold output, each example's completion is
read back by the role's own parser, and the executor judges what the parser read (the solver's answer
must be correct, the proposer's task must be valid). An example that fails any of these is dropped and
counted, so a change of the prompts, the parsers or the executor cannot silently teach the model
something the loop would reject.

Held-out tasks are excluded: a drawn task that runs a held-out program on one of the same inputs is
dropped before labelling, whatever its type.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from azr.core.task import Role, Task, TaskType
from azr.executor.api import Executor
from azr.proposer.parsing import parse_proposal
from azr.roles.config import RolesConfig
from azr.roles.errors import FormatFailure
from azr.solver.parsing import parse_answer
from azr.warmstart.examples import Example, examples_for
from azr.warmstart.programs import draw_tasks, family_of

log = logging.getLogger(__name__)

STREAM = "warmstart"
"""The label of the warm start's task stream (``azr.warmstart.programs.draw_tasks``)."""


@dataclass(slots=True)
class DataReport:
    """What became of the drawn tasks."""

    drawn: int = 0
    held_out: int = 0
    invalid: int = 0
    rejected_examples: int = 0
    examples: int = 0
    by_group: dict[str, int] = field(default_factory=dict)
    by_family: dict[str, int] = field(default_factory=dict)
    """Labelled tasks per program family: what ``family_weights`` drew."""


def overlap_keys(tasks: Iterable[Task]) -> set[tuple[str, str]]:
    """(program, input) pairs of ``tasks``: a task sharing any of them with a held-out task is held out."""
    return {(t.program.strip(), i) for t in tasks for i in t.inputs}


async def label(executor: Executor, tasks: Sequence[Task]) -> list[Task | None]:
    """Each task with its gold outputs from the executor, or None when the executor rejects it."""
    validations = await asyncio.gather(*(executor.validate(t) for t in tasks))
    return [
        t.with_outputs(v.outputs) if v.outputs is not None else None
        for t, v in zip(tasks, validations, strict=True)
    ]


async def accepted(executor: Executor, example: Example, config: RolesConfig) -> bool:
    """Whether the role's parser reads ``example.completion`` back and the executor accepts what it read."""
    if example.role is Role.SOLVE:
        answer = parse_answer(example.completion, example.type, config)
        if isinstance(answer, FormatFailure):
            return False
        return bool((await executor.check(example.task, answer.text)).correct)
    assert example.request is not None, "a propose example carries its request"
    proposed = parse_proposal(example.completion, example.request, config)
    if isinstance(proposed, FormatFailure):
        return False
    validation = await executor.validate(proposed)
    return validation.outputs is not None and proposed.id == example.task.id


async def build_examples(
    executor: Executor,
    config: RolesConfig,
    *,
    per_type: int,
    seed: int,
    held_out: Sequence[Task] = (),
    family_weights: Mapping[str, float] | None = None,
) -> tuple[list[Example], DataReport]:
    """Examples from ``per_type`` drawn tasks of each type (before exclusions), their families weighted
    by ``family_weights`` (``azr.warmstart.programs.family_weights``), in a seeded order."""
    report = DataReport()
    excluded = overlap_keys(held_out)
    drawn = draw_tasks(STREAM, per_type, seed=seed, weights=family_weights)
    report.drawn = len(drawn)
    kept = [t for t in drawn if not overlap_keys([t]) & excluded]
    report.held_out = len(drawn) - len(kept)
    labelled = [t for t in await label(executor, kept) if t is not None]
    report.invalid = len(kept) - len(labelled)
    for t in labelled:
        name = family_of(t.program) or "none"
        report.by_family[name] = report.by_family.get(name, 0) + 1
    rng = random.Random(f"{STREAM}-examples/{seed}")
    by_type = {tt: [t for t in labelled if t.type is tt] for tt in TaskType}
    candidates = [e for t in labelled for e in examples_for(t, by_type[t.type], config, rng)]
    verdicts = await asyncio.gather(*(accepted(executor, e, config) for e in candidates))
    examples = [e for e, ok in zip(candidates, verdicts, strict=True) if ok]
    report.rejected_examples = len(candidates) - len(examples)
    report.examples = len(examples)
    for e in examples:
        group = f"{e.role.value}/{e.type.value}"
        report.by_group[group] = report.by_group.get(group, 0) + 1
    if report.rejected_examples:
        log.warning(
            "%d warm-start examples were rejected by the parsers or the executor", report.rejected_examples
        )
    rng.shuffle(examples)
    return examples, report


def data_fingerprint(examples: Sequence[Example]) -> str:
    """Content hash of the examples, in order."""
    h = hashlib.sha256()
    for e in examples:
        h.update(json.dumps([e.role.value, e.type.value, e.prompt.body, e.completion]).encode())
    return h.hexdigest()
