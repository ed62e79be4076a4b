"""One self-play round (AZR Algorithm 1, one iteration), from buffers to experiences.

For every task type t in (deduction, abduction, induction):

1. propose: B proposer prompts, each showing K references drawn from t's buffer (induction: one program
   from the deduction and abduction buffers), fitted to the prompt budget by dropping references;
2. validate the parsed proposals in the executor, which computes their gold outputs; valid ones join
   t's buffer;
3. learnability: n solver rollouts per valid proposal, at the training temperature, checked by the
   executor: r_propose = 1 - solve rate when 0 < rate < 1, else 0 (none with the constant propose
   reward, the ablation, where every valid proposal gets the same r_propose); with the message check, n
   more rollouts per valid induction proposal answer it with its message removed;
4. solve: B tasks from t's buffer (newest first, topped up uniformly), one answer each, checked;
5. shape every response's reward and turn it into an experience for the trainer; with
   ``train_rollouts`` the learnability rollouts become solver experiences too;
6. with ``demonstrations`` D > 0 and t in ``demonstration_types``: D tasks from t's buffer (uniformly),
   each with its gold answer in the solver's format, as demonstrations for the trainer to imitate (no
   generation: the executor computed the answers when it validated the tasks); induction ones without
   the task's message when ``demonstration_messages`` is off; with ``proposer_demonstrations`` P > 0, P
   tasks from t's buffer written as the proposer's answer to a prompt that shows other tasks of t (never
   one with the task's program), or for induction gives the task's program.

With the message check, an induction task joins its buffer at the end of the round, once its rollouts
have shown whether its message misleads (then it joins without it); it is solved from the next round on.

The learnability rollouts and the solver answers are sampled in one generate call (both are solver
prompts). A response the executor could not judge (``infra_error``) gets no reward and no experience; it
is counted in ``rewards/dropped``.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from azr.core.experience import Experience, ExperienceKind
from azr.core.task import Role, Task, TaskType, TaskUse
from azr.executor.jobs import Judgement, Validation
from azr.proposer.gold import propose_completion
from azr.proposer.parsing import parse_proposal
from azr.proposer.prompts import ProposalRequest, proposer_prompt
from azr.proposer.references import choose_induction_source, choose_references, fit_references
from azr.proposer.rewards import (
    MISLEADING_MESSAGE,
    LearnabilityRollouts,
    checks_message,
    proposer_reward,
    rollouts_needed,
)
from azr.roles.config import RolesConfig
from azr.roles.errors import FormatError, FormatFailure
from azr.roles.shaping import NoReward, Reward
from azr.rollout.sampler import Completion
from azr.selfplay.config import SelfPlayConfig
from azr.selfplay.metrics import RoundMetrics
from azr.selfplay.protocols import Executor, ExperienceSink, Generator, TaskStore
from azr.selfplay.rendering import PromptRenderer
from azr.solver.gold import gold_completion
from azr.solver.parsing import Answer, parse_answer
from azr.solver.prompts import solver_prompt
from azr.solver.rewards import solve_outcome, solver_reward

PROGRAM_TYPES = (TaskType.DEDUCTION, TaskType.ABDUCTION)
"""Types whose buffers supply the programs of induction proposals."""


@dataclass(slots=True)
class Rollouts:
    """n solver answers to one solver prompt of a proposed task, at the training temperature, judged."""

    task: Task
    prompt_ids: list[int]
    completions: list[Completion] = field(default_factory=list)
    answers: list[Answer | FormatFailure] = field(default_factory=list)
    """The completions as read by the solver's parser, read once for the executor, the learnability and
    ``train_rollouts``."""
    judgements: list[Judgement | None] = field(default_factory=list)


@dataclass(slots=True)
class Proposal:
    """One proposer response and what became of it."""

    request: ProposalRequest
    prompt_ids: list[int]
    completion: Completion
    parsed: Task | FormatFailure
    validation: Validation | None = None
    rollouts: Rollouts | None = None
    """The learnability rollouts: answers to the valid task."""
    without_message: Rollouts | None = None
    """With the message check, answers to the valid induction task with its message removed."""
    reward: Reward | NoReward | None = None

    @property
    def valid_task(self) -> Task | None:
        """The proposed task with its gold outputs, when the executor accepted it."""
        v = self.validation
        if isinstance(self.parsed, Task) and v is not None and v.error is None and v.outputs is not None:
            return self.parsed.with_outputs(tuple(v.outputs))
        return None

    @property
    def buffered_task(self) -> Task | None:
        """The valid task as it joins its buffer: without its message when the message check found it
        misleading."""
        task = self.valid_task
        if task is not None and isinstance(self.reward, Reward) and self.reward.parts.get(MISLEADING_MESSAGE):
            return task.without_message()
        return task

    def rollout_sets(self) -> list[Rollouts]:
        return [r for r in (self.rollouts, self.without_message) if r is not None]


@dataclass(slots=True)
class Solve:
    """One solver response to a task from the buffer."""

    task: Task
    prompt_ids: list[int]
    completion: Completion
    parsed: Answer | FormatFailure
    judgement: Judgement | None = None
    reward: Reward | NoReward | None = None
    sample: int = 0
    """Which of the ``solve_samples`` answers to its task this is."""


@dataclass(slots=True)
class RoundResult:
    experiences: list[Experience]
    metrics: dict[str, float]
    samples: list[dict[str, object]]
    new_tasks: list[Task]


class SelfPlayRound:
    """Runs rounds against an executor, a generator, the task store and an experience sink."""

    def __init__(
        self,
        config: SelfPlayConfig,
        roles: RolesConfig,
        *,
        executor: Executor,
        generator: Generator,
        store: TaskStore,
        sink: ExperienceSink,
        render: PromptRenderer,
        temperature: float,
        max_response_tokens: int,
        run_id: str,
    ) -> None:
        self.config = config
        self.roles = roles
        self.executor = executor
        self.generator = generator
        self.store = store
        self.sink = sink
        self.render = render
        self.temperature = temperature
        self.max_response_tokens = max_response_tokens
        """The sampler's limit: a demonstration longer than any response it can write is not imitated."""
        self.run_id = run_id
        self.rng = random.Random(config.seed)

    # -- the round --------------------------------------------------------------------------------------

    async def run(self, step: int, policy_version: int) -> RoundResult:
        metrics = RoundMetrics(
            message_check=self.roles.induction_message_check, proposing=self.config.propose
        )
        proposals = await self.propose(step, metrics) if self.config.propose else []
        await self.validate(proposals, metrics)
        # Under the message check an induction task joins its buffer once its rollouts judged the message.
        waits = [checks_message(p.request.type, self.roles) for p in proposals]
        new_tasks = [t for p, w in zip(proposals, waits, strict=True) if not w and (t := p.valid_task)]
        start = time.perf_counter()
        self.store.add(new_tasks)
        metrics.time("store_s", start)
        solves = await self._rollouts_and_solves(proposals, metrics)
        experiences = self._experiences(step, policy_version, proposals, solves, metrics)
        experiences += self._demonstrations(step, policy_version, metrics)
        late_tasks = [t for p, w in zip(proposals, waits, strict=True) if w and (t := p.buffered_task)]
        new_tasks += late_tasks
        start = time.perf_counter()
        self.store.add(late_tasks)
        self.sink.add(experiences)
        metrics.time("store_s", start)
        metrics.buffer_sizes(self.store.sizes())
        self.store.record_uses(_uses(proposals, solves))
        return RoundResult(
            experiences=experiences,
            metrics=metrics.finish(),
            samples=self._samples(step, proposals, solves),
            new_tasks=new_tasks,
        )

    async def propose(self, step: int, metrics: RoundMetrics) -> list[Proposal]:
        """B proposals per task type, parsed (not yet validated)."""
        requests: list[tuple[ProposalRequest, list[int]]] = []
        for task_type in TaskType:
            for _ in range(self.config.batch_size):
                fitted = self._proposal_request(task_type, step)
                if fitted is None:
                    metrics.count(f"propose/{task_type.value}/no_prompt")
                    continue
                requests.append(fitted)
        start = time.perf_counter()
        completions = await self.generator.generate([ids for _, ids in requests], 1)
        metrics.time("generate_propose_s", start)
        proposals = []
        for (request, ids), (completion,) in zip(requests, completions, strict=True):
            parsed = parse_proposal(
                completion.text, request, self.roles, stopped_by_length=completion.finish_reason == "length"
            )
            proposals.append(Proposal(request, ids, completion, parsed))
        return proposals

    # -- steps of the round -----------------------------------------------------------------------------

    def _proposal_request(self, task_type: TaskType, step: int) -> tuple[ProposalRequest, list[int]] | None:
        if task_type is TaskType.INDUCTION:
            candidates = [t for pt in PROGRAM_TYPES for t in self.store.sample(pt, self.roles.n_references)]
            source = choose_induction_source(candidates, self.roles, self.rng)
            references: tuple[Task, ...] = () if source is None else (source,)
        else:
            pool = self.store.sample(task_type, self.roles.n_references)
            references = choose_references(pool, self.roles, self.rng)
        return self._fitted_request(task_type, references, step)

    def _fitted_request(
        self, task_type: TaskType, references: tuple[Task, ...], step: int
    ) -> tuple[ProposalRequest, list[int]] | None:
        """The request showing ``references``, less those the prompt budget cannot hold, and its prompt;
        none without a reference to show."""
        if not references:
            return None
        request = fit_references(
            ProposalRequest(type=task_type, references=references, step=step),
            lambda prompt: len(self.render(prompt)),
            self.roles.max_prompt_tokens,
            self.roles,
        )
        if request is None:
            return None
        return request, self.render(proposer_prompt(request, self.roles))

    async def validate(self, proposals: Sequence[Proposal], metrics: RoundMetrics) -> None:
        """The executor's verdict and gold outputs for every parsed proposal."""
        parsed = [p for p in proposals if isinstance(p.parsed, Task)]
        start = time.perf_counter()
        validations = await asyncio.gather(*(self.executor.validate(p.parsed) for p in parsed))  # type: ignore[arg-type]
        metrics.time("execute_s", start)
        for proposal, validation in zip(parsed, validations, strict=True):
            proposal.validation = validation
            if validation.error is not None:
                metrics.executor_error(validation.error.code)
            elif (task := proposal.valid_task) is not None and self.solver_prompt_ids(task) is None:
                # A task no solver prompt can hold can be neither solved nor rated: the proposal is too
                # long, as if the program itself were over its cap, and never enters the buffer.
                proposal.parsed = FormatFailure(
                    FormatError.TOO_LONG,
                    f"the task's solver prompt is over max_prompt_tokens={self.roles.max_prompt_tokens}",
                )
                proposal.validation = None

    async def _rollouts_and_solves(self, proposals: Sequence[Proposal], metrics: RoundMetrics) -> list[Solve]:
        """Learnability rollouts for valid proposals and answers for buffer tasks, in one generate call."""
        n = rollouts_needed(self.roles)
        for p in proposals:
            task = p.valid_task
            if not n or task is None or (ids := self.solver_prompt_ids(task)) is None:
                continue
            p.rollouts = Rollouts(task, ids)
            if checks_message(task.type, self.roles):
                # Without its message the prompt is shorter than one that fits, so it fits too.
                bare = task.without_message()
                p.without_message = Rollouts(bare, self.render(solver_prompt(bare, self.roles)))
        rollout_sets = [r for p in proposals for r in p.rollout_sets()]
        solve_tasks: list[tuple[Task, list[int]]] = []
        for task_type in TaskType:
            for task in self.store.solver_batch(task_type, self.config.batch_size):
                ids = self.solver_prompt_ids(task)
                if ids is None:
                    metrics.count(f"solve/{task_type.value}/no_prompt")
                    continue
                solve_tasks.append((task, ids))
        start = time.perf_counter()
        learn_out, solve_out = await asyncio.gather(
            self.generator.generate([r.prompt_ids for r in rollout_sets], n),
            self.generator.generate([ids for _, ids in solve_tasks], self.config.solve_samples),
        )
        metrics.time("generate_solve_s", start)
        solves = [
            Solve(task, ids, completion, self._parse_answer(task, completion), sample=i)
            for (task, ids), completions in zip(solve_tasks, solve_out, strict=True)
            for i, completion in enumerate(completions)
        ]
        for rollouts, completions in zip(rollout_sets, learn_out, strict=True):
            rollouts.completions = list(completions)
            rollouts.answers = [self._parse_answer(rollouts.task, c) for c in completions]
        await self._check_all(rollout_sets, solves, metrics)
        return solves

    async def _check_all(
        self, rollout_sets: Sequence[Rollouts], solves: Sequence[Solve], metrics: RoundMetrics
    ) -> None:
        """Every learnability rollout and every answer through the executor, concurrently."""
        rollout_jobs = [(r, answer) for r in rollout_sets for answer in r.answers]
        start = time.perf_counter()
        judgements = await asyncio.gather(
            *(self._check(r.task, answer) for r, answer in rollout_jobs),
            *(self._check(s.task, s.parsed) for s in solves),
        )
        metrics.time("execute_s", start)
        for (rollouts, _), judgement in zip(rollout_jobs, judgements[: len(rollout_jobs)], strict=True):
            rollouts.judgements.append(judgement)
        for solve, judgement in zip(solves, judgements[len(rollout_jobs) :], strict=True):
            solve.judgement = judgement
        for judgement in judgements:
            if judgement is not None and judgement.error is not None:
                metrics.executor_error(judgement.error.code)

    async def _check(self, task: Task, parsed: Answer | FormatFailure) -> Judgement | None:
        if isinstance(parsed, FormatFailure):
            return None
        return await self.executor.check(task, parsed.text)

    def solver_prompt_ids(self, task: Task) -> list[int] | None:
        """The solver prompt of ``task`` as token ids, or None when it is over ``max_prompt_tokens``."""
        ids = self.render(solver_prompt(task, self.roles))
        return ids if len(ids) <= self.roles.max_prompt_tokens else None

    def _parse_answer(self, task: Task, completion: Completion) -> Answer | FormatFailure:
        return parse_answer(
            completion.text, task.type, self.roles, stopped_by_length=completion.finish_reason == "length"
        )

    # -- rewards and experiences ------------------------------------------------------------------------

    def _experiences(
        self,
        step: int,
        policy_version: int,
        proposals: Sequence[Proposal],
        solves: Sequence[Solve],
        metrics: RoundMetrics,
    ) -> list[Experience]:
        out: list[Experience] = []
        for p in proposals:
            reward = p.reward = proposer_reward(
                p.parsed,
                p.validation,
                self._learnability(p.rollouts),
                self.roles,
                without_message=self._learnability(p.without_message),
            )
            metrics.proposal(p.request.type, p.parsed, p.valid_task, reward, len(p.completion.token_ids))
            task_id = p.parsed.id if isinstance(p.parsed, Task) else ""
            out += self._experience(
                step=step,
                policy_version=policy_version,
                role=Role.PROPOSE,
                task_type=p.request.type,
                response=p,
                reward=reward,
                task_id=task_id,
            )
        trained_rollouts = self._rollout_solves(proposals) if self.config.train_rollouts else []
        for s, is_rollout in [(s, False) for s in solves] + [(s, True) for s in trained_rollouts]:
            reward = s.reward = solver_reward(s.parsed, s.judgement)
            metrics.solve(s.task.type, reward, len(s.completion.token_ids), rollout=is_rollout)
            out += self._experience(
                step=step,
                policy_version=policy_version,
                role=Role.SOLVE,
                task_type=s.task.type,
                response=s,
                reward=reward,
                task_id=s.task.id,
            )
        return out

    def _demonstrations(self, step: int, policy_version: int, metrics: RoundMetrics) -> list[Experience]:
        """Buffer tasks to imitate: gold answers to ``demonstrations`` tasks per demonstrated type, and
        ``proposer_demonstrations`` tasks per type written as proposals."""
        drawn: list[tuple[Role, Task, list[int] | None, str]] = []  # role, task, prompt, completion
        for task_type in self.config.demonstration_types if self.config.demonstrations else ():
            for sampled in self.store.sample(task_type, self.config.demonstrations):
                keeps_message = task_type is not TaskType.INDUCTION or self.config.demonstration_messages
                task = sampled if keeps_message else sampled.without_message()
                drawn.append((Role.SOLVE, task, self.solver_prompt_ids(task), gold_completion(task)))
        for task_type in TaskType if self.config.proposer_demonstrations else ():
            for task in self.store.sample(task_type, self.config.proposer_demonstrations):
                prompt_ids = self._demonstrated_request_ids(task, step)
                drawn.append((Role.PROPOSE, task, prompt_ids, propose_completion(task)))
        return [
            experience
            for role, task, prompt_ids, completion in drawn
            for experience in self._demonstration(
                role, task, prompt_ids, completion, step=step, policy_version=policy_version, metrics=metrics
            )
        ]

    def _demonstrated_request_ids(self, task: Task, step: int) -> list[int] | None:
        """A proposer prompt that ``task`` answers: for induction one giving its program, else one showing
        other buffer tasks of its type as references (never a task with its program)."""
        if task.type is TaskType.INDUCTION:
            references: tuple[Task, ...] = (task,)
        else:
            pool = [
                t
                for t in self.store.sample(task.type, self.roles.n_references + 1)
                if t.id != task.id and t.program != task.program
            ]
            references = choose_references(pool, self.roles, self.rng)
        fitted = self._fitted_request(task.type, references, step)
        return None if fitted is None else fitted[1]

    def _demonstration(
        self,
        role: Role,
        task: Task,
        prompt_ids: list[int] | None,
        completion: str,
        *,
        step: int,
        policy_version: int,
        metrics: RoundMetrics,
    ) -> list[Experience]:
        """``completion``, ``task`` written as ``role``'s answer to ``prompt_ids``, as an experience to
        imitate; none without a prompt (no prompt of the budget holds the task, or a proposer prompt has no
        other program to show) or when the sampler could not write that many tokens."""
        if prompt_ids is None:
            metrics.count(f"{role.value}/{task.type.value}/demonstrations_no_prompt")
            return []
        response_ids = self.render.completion_ids(completion)
        if len(response_ids) > self.max_response_tokens:
            metrics.count(f"{role.value}/{task.type.value}/demonstrations_too_long")
            return []
        metrics.demonstration(role, task.type)
        return [
            Experience(
                id=f"{self.run_id}-{step:07d}-demo-{role.value}-{task.type.value}-{uuid.uuid4().hex[:12]}",
                run_id=self.run_id,
                policy_version=policy_version,
                role=role,
                task_type=task.type,
                prompt_ids=np.asarray(prompt_ids, dtype=np.int32),
                response_ids=np.asarray(response_ids, dtype=np.int32),
                behaviour_logprobs=np.zeros(len(response_ids), dtype=np.float32),
                reward=1.0,  # what a correct answer earns; the trainer imitates rather than weighs it
                task_id=task.id,
                kind=ExperienceKind.DEMONSTRATION,
            )
        ]

    def _rollout_solves(self, proposals: Sequence[Proposal]) -> list[Solve]:
        """The learnability rollouts of the valid proposals (with the message check, those without the
        message too: answers to a valid task all the same), as answers of the solver."""
        return [
            Solve(r.task, r.prompt_ids, completion, answer, judgement)
            for p in proposals
            for r in p.rollout_sets()
            for completion, answer, judgement in zip(r.completions, r.answers, r.judgements, strict=True)
        ]

    def _learnability(self, rollouts: Rollouts | None) -> LearnabilityRollouts | None:
        if rollouts is None:
            return None
        outcomes = tuple(
            solve_outcome(a, j) for a, j in zip(rollouts.answers, rollouts.judgements, strict=True)
        )
        return LearnabilityRollouts(outcomes=outcomes, temperature=self.temperature)

    def _experience(
        self,
        *,
        step: int,
        policy_version: int,
        role: Role,
        task_type: TaskType,
        response: Proposal | Solve,
        reward: Reward | NoReward,
        task_id: str,
    ) -> list[Experience]:
        if isinstance(reward, NoReward):
            return []
        return [
            Experience(
                id=f"{self.run_id}-{step:07d}-{role.value}-{task_type.value}-{uuid.uuid4().hex[:12]}",
                run_id=self.run_id,
                policy_version=policy_version,
                role=role,
                task_type=task_type,
                prompt_ids=response.prompt_ids,  # type: ignore[arg-type]
                response_ids=response.completion.token_ids,  # type: ignore[arg-type]
                behaviour_logprobs=response.completion.logprobs,  # type: ignore[arg-type]
                reward=reward.value,
                reward_parts=dict(reward.parts),
                task_id=task_id,
            )
        ]

    def _samples(
        self, step: int, proposals: Sequence[Proposal], solves: Sequence[Solve]
    ) -> list[dict[str, object]]:
        """A few responses per (role, type) for samples.jsonl."""
        k = self.config.samples_per_step
        out: list[dict[str, object]] = []
        for task_type in TaskType:
            for p in [p for p in proposals if p.request.type is task_type][:k]:
                out.append(
                    {
                        "step": step,
                        "role": Role.PROPOSE.value,
                        "type": task_type.value,
                        **_reward_fields(p.reward),
                        "response": p.completion.text,
                        "finish_reason": p.completion.finish_reason,
                        "parsed": p.parsed.to_dict() if isinstance(p.parsed, Task) else None,
                        "format_error": p.parsed.error.value if isinstance(p.parsed, FormatFailure) else None,
                        "executor_error": (
                            p.validation.error.code.value if p.validation and p.validation.error else None
                        ),
                        "gold_outputs": list(p.validation.outputs or ()) if p.validation else None,
                    }
                )
            for s in [s for s in solves if s.task.type is task_type][:k]:
                out.append(
                    {
                        "step": step,
                        "role": Role.SOLVE.value,
                        "type": task_type.value,
                        **_reward_fields(s.reward),
                        "task": s.task.to_dict(),
                        "response": s.completion.text,
                        "finish_reason": s.completion.finish_reason,
                        "answer": s.parsed.text if isinstance(s.parsed, Answer) else None,
                        "format_error": s.parsed.error.value if isinstance(s.parsed, FormatFailure) else None,
                        "correct": s.judgement.correct if s.judgement else None,
                    }
                )
        return out


def _reward_fields(reward: Reward | NoReward | None) -> dict[str, object]:
    if isinstance(reward, Reward):
        return {"reward": reward.value, "reward_parts": dict(reward.parts)}
    return {
        "reward": None,
        "reward_parts": None,
        "dropped": None if reward is None else reward.error.code.value,
    }


def _uses(proposals: Sequence[Proposal], solves: Sequence[Solve]) -> Counter[tuple[str, TaskUse]]:
    """What each task was used for this round: shown as a reference, drawn to solve, answered (judged),
    answered correctly (learnability rollouts count as answers to the new task, as it joins its buffer)."""
    uses: Counter[tuple[str, TaskUse]] = Counter()
    for p in proposals:
        uses.update((ref.id, TaskUse.REFERENCE) for ref in p.request.references)
        task = p.buffered_task
        for rollouts in p.rollout_sets():
            if task is not None and rollouts.task.id == task.id:
                for judgement in rollouts.judgements:
                    _count_answer(uses, task.id, judgement)
    for s in solves:
        uses[s.task.id, TaskUse.SOLVE] += s.sample == 0  # drawn once, however many answers it gets
        _count_answer(uses, s.task.id, s.judgement)
    return uses


def _count_answer(uses: Counter[tuple[str, TaskUse]], task_id: str, judgement: Judgement | None) -> None:
    if judgement is not None and judgement.ok:
        uses[task_id, TaskUse.SOLVE_ATTEMPTS] += 1
        uses[task_id, TaskUse.SOLVED] += bool(judgement.correct)
