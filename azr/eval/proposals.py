"""Scoring a checkpoint's proposer on a suite: the valid-task rate per type, on prompts that never change.

Self-play's own rate (``propose/<type>/valid_rate``) is measured on prompts built from the buffers, which
the run keeps changing: a rate that falls may mean a worse proposer or harder references, and two
checkpoints of one run are never asked the same thing. Here every checkpoint answers the same requests,
built from a suite's tasks (with the executor's gold outputs, as a buffer task is shown):

- induction: one request per deduction and abduction task of the suite, giving that task's program (self-play
  draws the program from those two buffers);
- deduction and abduction: one request per task of that type, showing that task and ``n_references - 1``
  others of the type, drawn by a generator seeded with the request's index, then fitted to
  ``max_prompt_tokens`` as self-play fits them (references dropped from the end).

Each prompt is answered ``samples`` times. A proposal is valid exactly when it is in self-play: the proposer's
parser reads a task from it (induction: the count of distinct inputs and a message included) and the
executor accepts the task. An invalid one is counted under its format error or the executor's error code;
one the executor could not judge (``infra_error``) is ``unjudged`` and left out of the rate.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from azr.core.task import Task, TaskType
from azr.eval.generation import Response
from azr.eval.scoring import Generate
from azr.executor.api import Executor
from azr.executor.errors import ErrorCode
from azr.proposer.parsing import parse_proposal
from azr.proposer.prompts import ProposalRequest, proposer_prompt
from azr.proposer.references import fit_references
from azr.roles.config import RolesConfig
from azr.roles.errors import FormatFailure
from azr.roles.templates import Prompt

PROGRAM_SOURCES = (TaskType.DEDUCTION, TaskType.ABDUCTION)
"""The task types whose programs an induction request gives, as in self-play."""


@dataclass(frozen=True, slots=True)
class ProposalVerdict:
    """One proposal and how it was judged: valid, or the one reason it is not."""

    text: str
    tokens: int
    task: Task | None
    """The proposed task with its gold outputs when valid; the parsed task when the executor rejected it."""
    format_error: str | None = None
    rejected: str | None = None
    """The executor's error code for a parsed task it did not accept (``infra_error``: not judged)."""

    @property
    def judged(self) -> bool:
        return self.rejected != ErrorCode.INFRA_ERROR.value

    @property
    def valid(self) -> bool:
        return self.format_error is None and self.rejected is None


@dataclass(frozen=True, slots=True)
class RequestProposals:
    """A request (what the prompt showed) and the verdicts on its proposals."""

    request: ProposalRequest
    verdicts: tuple[ProposalVerdict, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.request.type.value,
            "references": [t.id for t in self.request.references],
            "valid": sum(v.valid for v in self.verdicts),
            "proposals": [
                {
                    "text": v.text,
                    "valid": v.valid,
                    "format_error": v.format_error,
                    "rejected": v.rejected,
                    "task": None if v.task is None else v.task.to_dict(),
                }
                for v in self.verdicts
            ],
        }


@dataclass(slots=True)
class ProposalScore:
    """The proposals of one task type (or of all types, for ``overall``)."""

    prompts: int = 0
    proposals: int = 0
    unjudged: int = 0
    valid: int = 0
    valid_rate: float = 0.0
    """valid / judged proposals."""
    mean_response_tokens: float = 0.0
    invalid: dict[str, int] = field(default_factory=dict)
    """How many invalid proposals each cause holds: a format error, or ``rejected:<executor code>``."""


@dataclass(slots=True)
class ProposerReport:
    suite: str
    checkpoint: str
    samples: int
    temperature: float
    by_type: dict[str, ProposalScore]
    overall: ProposalScore
    requests: list[RequestProposals] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The scores, without the proposals (``RequestProposals.to_dict`` gives each request's)."""
        return {
            "role": "proposer",
            "suite": self.suite,
            "checkpoint": self.checkpoint,
            "samples": self.samples,
            "temperature": self.temperature,
            "by_type": {name: asdict(score) for name, score in self.by_type.items()},
            "overall": asdict(self.overall),
        }

    def metrics(self, prefix: str = "eval") -> dict[str, float]:
        """Flat ``eval/<suite>/propose/<type>/valid_rate`` metrics."""
        return {
            f"{prefix}/{self.suite}/propose/{name}/valid_rate": score.valid_rate
            for name, score in [*self.by_type.items(), ("overall", self.overall)]
        }


def proposal_requests(
    tasks: Sequence[Task],
    config: RolesConfig,
    count_tokens: Callable[[Prompt], int],
    *,
    seed: int = 0,
) -> list[ProposalRequest]:
    """The fixed requests built from ``tasks`` (validated, with gold outputs), in the suite's order:
    deduction, abduction, then induction (see the module docstring). A request whose prompt cannot hold
    even one reference is left out, as self-play skips it."""
    by_type = {t: [task for task in tasks if task.type is t] for t in TaskType}
    wanted: list[ProposalRequest] = []
    for task_type in PROGRAM_SOURCES:
        pool = by_type[task_type]
        for index, task in enumerate(pool):
            rng = random.Random(f"{seed}:{task_type.value}:{index}")
            others = rng.sample(
                [t for t in pool if t.id != task.id], min(config.n_references - 1, len(pool) - 1)
            )
            wanted.append(ProposalRequest(type=task_type, references=(task, *others)))
    for task_type in PROGRAM_SOURCES:
        wanted += [ProposalRequest(type=TaskType.INDUCTION, references=(t,)) for t in by_type[task_type]]
    fitted = (fit_references(r, count_tokens, config.max_prompt_tokens, config) for r in wanted)
    return [r for r in fitted if r is not None]


async def judge_proposal(
    executor: Executor, request: ProposalRequest, response: Response, config: RolesConfig
) -> ProposalVerdict:
    parsed = parse_proposal(response.text, request, config, stopped_by_length=response.stopped_by_length)
    if isinstance(parsed, FormatFailure):
        return ProposalVerdict(response.text, response.tokens, None, format_error=parsed.error.value)
    validation = await executor.validate(parsed)
    if validation.error is not None:
        return ProposalVerdict(response.text, response.tokens, parsed, rejected=validation.error.code.value)
    return ProposalVerdict(
        response.text, response.tokens, parsed.with_outputs(tuple(validation.outputs or ()))
    )


async def evaluate_proposer(
    tasks: Sequence[Task],
    generate: Generate,
    count_tokens: Callable[[Prompt], int],
    executor: Executor,
    config: RolesConfig,
    *,
    samples: int = 1,
    suite: str = "tasks",
    checkpoint: str = "",
    temperature: float = 1.0,
    seed: int = 0,
) -> ProposerReport:
    """Score the proposer behind ``generate`` on requests built from ``tasks`` (see the module docstring)."""
    validations = await asyncio.gather(*(executor.validate(t) for t in tasks))
    valid = [
        t.with_outputs(v.outputs) for t, v in zip(tasks, validations, strict=True) if v.outputs is not None
    ]
    requests = proposal_requests(valid, config, count_tokens, seed=seed)
    responses = generate([proposer_prompt(r, config) for r in requests], samples) if requests else []
    verdicts = await asyncio.gather(
        *(
            asyncio.gather(*(judge_proposal(executor, q, r, config) for r in rs))
            for q, rs in zip(requests, responses, strict=True)
        )
    )
    scored = [RequestProposals(q, tuple(vs)) for q, vs in zip(requests, verdicts, strict=True)]
    by_type = {
        t.value: _score([s for s in scored if s.request.type is t])
        for t in TaskType
        if any(s.request.type is t for s in scored)
    }
    return ProposerReport(suite, checkpoint, samples, temperature, by_type, _score(scored), scored)


def _score(rows: Sequence[RequestProposals]) -> ProposalScore:
    verdicts = [v for row in rows for v in row.verdicts]
    judged = [v for v in verdicts if v.judged]
    valid = sum(v.valid for v in judged)
    causes = Counter(
        v.format_error if v.format_error is not None else f"rejected:{v.rejected}"
        for v in judged
        if not v.valid
    )
    return ProposalScore(
        prompts=len(rows),
        proposals=len(verdicts),
        unjudged=len(verdicts) - len(judged),
        valid=valid,
        valid_rate=valid / len(judged) if judged else 0.0,
        mean_response_tokens=sum(v.tokens for v in verdicts) / len(verdicts) if verdicts else 0.0,
        invalid=dict(causes.most_common()),
    )
