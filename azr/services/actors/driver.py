"""The driver of a self-play run: starts what the run needs, seeds the buffers, runs the schedule.

It owns the round (``azr.selfplay.round``), which runs here against the actors: rollout workers sample,
the executor actor judges, the learner actor trains. Redis holds the buffers, the experience stream, the
metrics stream and the run state; a private ``redis-server`` is started in the run directory when no
Redis URL is given, and Ray is started in this process when no cluster address is given.

With ``selfplay.eval_every`` set, the learner also scores the policy on the evaluation suites: once before
any training, written as the row of step -1 (``BASELINE_STEP``), and after every ``eval_every``-th step and
the last, within that step's row.

Ctrl-C stops cleanly: no new round starts, the steps in flight finish, the learner checkpoints. A second
Ctrl-C stops at once (the next ``--resume`` continues from the last checkpoint).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray
from tqdm import tqdm

from azr.core.task import Task
from azr.eval.policy import PolicyEvalSettings
from azr.eval.suites import load_tasks_file
from azr.rollout.sampler import Completion
from azr.selfplay.config import SelfPlayConfig
from azr.selfplay.rendering import PromptRenderer
from azr.selfplay.round import RoundResult, SelfPlayRound
from azr.selfplay.schedule import Schedule, StepRecord
from azr.selfplay.seeding import SeedTasksError, add_seed_tasks, seed_buffers
from azr.services.actors.executor_actor import ExecutorActor, RayExecutor, make_executor
from azr.services.actors.learner_actor import LearnerActor
from azr.services.actors.placement import NodeRoundRobin
from azr.services.actors.rollout_worker import RolloutWorker
from azr.services.adapters import RedisTaskStore, StreamSink
from azr.services.config import RedisConfig
from azr.services.run_dir import RunDirectory, StepWriter
from azr.services.settings import TINY_MODEL, TINY_WARM_MODEL, RunSettings, dump
from azr.services.store import connect
from azr.services.store.buffers import TaskBuffers
from azr.services.store.embedded import EmbeddedRedis
from azr.services.store.experience_stream import ExperienceStream
from azr.services.store.keys import Keys
from azr.services.store.metrics import STREAM_COUNTERS, Counters, MetricsStream
from azr.services.store.run_state import RunState
from azr.trainer.models import load_tokenizer
from azr.trainer.tiny import build_tiny_model, tiny_model_dir
from azr.warmstart.build import TASKS_FILE, build_warm_start, warm_start_tasks

log = logging.getLogger(__name__)

ACTOR_OPTIONS: dict[str, Any] = {"max_restarts": -1, "max_task_retries": -1}
"""Ray restarts a dead actor and re-issues the call it was serving."""

PROGRESS_KEYS = {
    "solve": ("solve/deduction/accuracy", "solve/abduction/accuracy", "solve/induction/accuracy"),
    "valid": ("propose/deduction/valid_rate", "propose/abduction/valid_rate", "propose/induction/valid_rate"),
}

BASELINE_STEP = -1
"""The row of the evaluation before any training. Step k's row holds the policy after k + 1 updates (its
``policy_version``), so the initial policy's row is step -1: an evaluation curve starts at the initial
accuracy, just left of step 0, and never shares a step with the first update's scores."""

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""Signals that end a run cleanly: the steps in flight finish and the learner checkpoints."""


@dataclass(slots=True)
class RunSummary:
    run_dir: Path
    steps_done: int
    policy_version: int
    last: dict[str, float] = field(default_factory=dict)
    interrupted: bool = False


class RayGenerator:
    """The round's ``Generator`` over N rollout workers: prompts split evenly, results in prompt order."""

    def __init__(self, workers: Sequence[Any]) -> None:
        self.workers = list(workers)

    async def generate(self, prompts: Sequence[Sequence[int]], n: int) -> list[list[Completion]]:
        if not prompts:
            return []
        size = -(-len(prompts) // len(self.workers))
        chunks = [list(prompts[i : i + size]) for i in range(0, len(prompts), size)]
        parts = await asyncio.gather(
            *(w.generate.remote(c, n) for w, c in zip(self.workers, chunks, strict=False))
        )
        return [row for part in parts for row in part]

    async def sync(self) -> int:
        """Every worker loads the newest published weights; the oldest version any of them holds."""
        versions: list[int] = await asyncio.gather(*(w.sync.remote() for w in self.workers))
        return min(versions)


class RolloutSide:
    def __init__(self, generator: RayGenerator, round_: SelfPlayRound) -> None:
        self.generator = generator
        self.round_ = round_

    async def sync_weights(self) -> int:
        return await self.generator.sync()

    async def round(self, step: int, policy_version: int) -> RoundResult:
        return await self.round_.run(step, policy_version)


class LearnerSide:
    def __init__(self, actor: Any, selfplay: SelfPlayConfig) -> None:
        self.actor = actor
        self.selfplay = selfplay

    async def step(self, step: int, expected: int) -> dict[str, float]:
        metrics: dict[str, float] = await self.actor.step.remote(
            expected, self.selfplay.evaluates_after(step)
        )
        return metrics


WARM_START_SEEDS = "the warm start's tasks"
"""The source named for ``selfplay.warm_start_seeds`` in the log and in a refusal."""


def resolve_model(settings: RunSettings) -> str:
    """The model's directory or hub id; the tiny model is built (or reused) in the cache directory."""
    if settings.model == TINY_MODEL:
        spec = settings.warm_start_config().tiny
        return str(build_tiny_model(tiny_model_dir(settings.cache_dir, spec), spec))
    if settings.model == TINY_WARM_MODEL:
        config = settings.warm_start_config()
        executor = make_executor(settings.executor)  # the run's own executor labels the warm start's data
        built = build_warm_start(
            settings.cache_dir, config, directory=settings.warm_start_dir(), executor=executor
        )
        return str(built.directory)
    return settings.model


@contextmanager
def ray_cluster(settings: RunSettings) -> Iterator[None]:
    """Join the configured Ray cluster, or start a one-node cluster in this process for the run."""
    if ray.is_initialized():
        yield
        return
    if settings.ray.address is not None:
        ray.init(address=settings.ray.address, logging_level=logging.WARNING)
    else:
        ray.init(num_cpus=settings.ray.num_cpus, include_dashboard=False, logging_level=logging.WARNING)
    try:
        yield
    finally:
        ray.shutdown()


def run_selfplay(
    settings: RunSettings, run_dir: RunDirectory, *, resume: bool = False, progress: bool = True
) -> RunSummary:
    """Run (or, with ``resume``, continue) self-play in ``run_dir``; returns when the steps are done or
    the run was stopped."""
    run_dir.create()
    if not resume and run_dir.last_step() is not None:
        raise FileExistsError(f"{run_dir.root} already holds a run: pass --resume to continue it")
    seeds = _read_seed_tasks(settings.selfplay.seed_tasks) if not resume else {}
    run_dir.write_config(dump(settings))
    model = resolve_model(settings)
    if settings.selfplay.warm_start_seeds and not resume:
        seeds |= _warm_start_seeds(Path(model), settings.selfplay.warm_start_seeds)
    with ExitStack() as stack:
        redis = settings.redis
        if redis is None:
            embedded = stack.enter_context(EmbeddedRedis(run_dir.redis))
            redis = RedisConfig(url=embedded.url)
        stack.enter_context(ray_cluster(settings))
        # One actor per node in turn, so that a run uses a cluster's machines rather than piling onto one.
        placement = NodeRoundRobin.of_cluster(settings.ray.min_nodes)
        return asyncio.run(_drive(settings, run_dir, model, redis, placement, seeds=seeds, progress=progress))


async def _drive(
    settings: RunSettings,
    run_dir: RunDirectory,
    model: str,
    redis: RedisConfig,
    placement: NodeRoundRobin,
    *,
    seeds: Mapping[str, Sequence[Task]],
    progress: bool,
) -> RunSummary:
    client = connect(redis)
    keys = Keys(redis.prefix)
    run_state = RunState(client, keys)
    buffers = TaskBuffers(client, keys, settings.buffer, seed=settings.selfplay.seed)
    buffers.ensure_zero_seed()
    producer = ExperienceStream(client, keys, settings.stream, consumer="driver")
    metrics_stream = MetricsStream(client, keys, settings.metrics)
    counters = Counters(client, keys)

    executor: Any = (
        ray.remote(ExecutorActor).options(**placement.next(), **ACTOR_OPTIONS).remote(settings.executor)
    )
    evaluation = _evaluation(settings)
    learner: Any = (
        ray.remote(LearnerActor)
        .options(**placement.next(settings.ray.learner_gpus), **ACTOR_OPTIONS)
        .remote(
            settings.trainer_config(run_dir.checkpoints, model),
            redis,
            settings.stream,
            str(run_dir.weights),
            settings.rollout.temperature,
            evaluation=evaluation,
            executor=None if evaluation is None else RayExecutor(executor),
        )
    )
    steps_done, version = await learner.state.remote()
    workers: list[Any] = [
        ray.remote(RolloutWorker)
        .options(**placement.next(settings.ray.rollout_gpus), **ACTOR_OPTIONS)
        .remote(model, settings.rollout, str(run_dir.weights))
        for _ in range(settings.ray.rollout_workers)
    ]
    generator = RayGenerator(workers)
    round_ = SelfPlayRound(
        settings.selfplay,
        settings.roles,
        executor=RayExecutor(executor),
        generator=generator,
        store=RedisTaskStore(buffers, counters),
        sink=StreamSink(producer),
        render=PromptRenderer(load_tokenizer(model), settings.selfplay.prompt_format),
        temperature=settings.rollout.temperature,
        max_response_tokens=settings.rollout.max_new_tokens,
        run_id=run_state.run_id(),
    )
    fresh = steps_done == 0 and run_dir.last_step() is None
    if fresh:
        await _seed(round_, generator, settings, seeds)

    schedule = Schedule(
        RolloutSide(generator, round_),
        LearnerSide(learner, settings.selfplay),
        max_staleness=settings.selfplay.max_staleness,
        max_seconds=None if settings.selfplay.max_minutes is None else 60 * settings.selfplay.max_minutes,
    )
    last: dict[str, float] = {}
    progress_eval = f"eval/{settings.selfplay.eval_suites[0]}/overall/accuracy"
    evaluated: float | None = None  # the latest evaluation's accuracy, shown until the next one
    bar = tqdm(
        total=settings.selfplay.steps, initial=steps_done, desc="self-play", unit="step", disable=not progress
    )

    def on_step(record: StepRecord) -> None:
        nonlocal last, evaluated
        # The stream's gauges and lifetime counters (stale drops, duplicates, quarantine) join the step's.
        totals = {name: float(v) for name, v in counters.get_many(STREAM_COUNTERS).items()}
        last = record.metrics | producer.health() | totals
        writer.write(record.step, last, record.samples)
        metrics_stream.publish(record.step, last)
        evaluated = last.get(progress_eval, evaluated)
        bar.update(1)
        bar.set_postfix(
            # A series the run does not record (no proposer in a run of the solver alone) is left out.
            {
                name: f"{sum(last[k] for k in ks) / len(ks):.2f}"
                for name, ks in PROGRESS_KEYS.items()
                if all(k in last for k in ks)
            }
            | {"v": int(last.get("policy_version", 0))}
            | ({} if evaluated is None else {"eval": f"{evaluated:.2f}"})
        )

    with StepWriter(run_dir) as writer, _stop_on_signals(schedule):
        if fresh and evaluation is not None:
            baseline = await _evaluation_row(learner, BASELINE_STEP, float(version), writer, metrics_stream)
            evaluated = baseline.get(progress_eval)
            log.info("evaluation before training: %s", _accuracies(baseline))
        await schedule.run(steps_done, settings.selfplay.steps, on_step)
        if evaluation is not None and last and not any(k.startswith("eval/") for k in last):
            # Stopped early (the time budget or Ctrl-C): the curve still ends at the final policy.
            final_version = last.get("policy_version", float(version))
            final = await _evaluation_row(learner, int(last["step"]), final_version, writer, metrics_stream)
            log.info("evaluation of the final policy: %s", _accuracies(final))
    bar.close()
    await learner.checkpoint.remote()
    await executor.close.remote()
    steps_done, version = await learner.state.remote()
    return RunSummary(
        run_dir=run_dir.root,
        steps_done=steps_done,
        policy_version=version,
        last=last,
        interrupted=schedule.stop.is_set(),
    )


async def _seed(
    round_: SelfPlayRound,
    generator: RayGenerator,
    settings: RunSettings,
    seeds: Mapping[str, Sequence[Task]],
) -> None:
    """Before the first step of a new run: the seed tasks of each source, then the seeding stage."""
    for source, tasks in seeds.items():
        added = await add_seed_tasks(round_, tasks, source=source)
        log.info("seed tasks: %d from %s, %d new to the buffers", len(tasks), source, added)
    await generator.sync()
    report = await seed_buffers(round_, settings.selfplay)
    log.info("seeding: %d rounds, %d tasks added", report.rounds, report.added)


def _read_seed_tasks(path: Path | None) -> dict[str, list[Task]]:
    """The seed file's tasks by their source, read before anything starts so that a missing or malformed
    file stops the run at once."""
    if path is None:
        return {}
    try:
        return {str(path): load_tasks_file(path)}
    except (OSError, ValueError) as exc:
        raise SeedTasksError(f"cannot read the seed tasks: {exc}") from exc


def _warm_start_seeds(model: Path, per_type: int) -> dict[str, list[Task]]:
    """The first ``per_type`` tasks of each type that the model was trained to solve, where it lists them
    (a warm start built by ``azr pretrain`` does)."""
    if not (model / TASKS_FILE).is_file():
        log.warning(
            "%s lists no tasks it was trained on (no %s): selfplay.warm_start_seeds adds none",
            model,
            TASKS_FILE,
        )
        return {}
    return {WARM_START_SEEDS: warm_start_tasks(model, per_type)}


async def _evaluation_row(
    learner: Any, step: int, version: float, writer: StepWriter, metrics_stream: MetricsStream
) -> dict[str, float]:
    """Score the learner's policy and record it as a row of its own for ``step``."""
    scores: dict[str, float] = await learner.evaluate.remote()
    row = {"step": float(step), "policy_version": version} | scores
    writer.write(step, row, [])
    metrics_stream.publish(step, row)
    return row


def _evaluation(settings: RunSettings) -> PolicyEvalSettings | None:
    """What the learner scores its policy on, or None when the run does not evaluate."""
    if settings.selfplay.eval_every == 0:
        return None
    return PolicyEvalSettings(
        suites=settings.selfplay.eval_suites,
        roles=settings.roles,
        prompt_format=settings.selfplay.prompt_format,
        max_new_tokens=settings.rollout.max_new_tokens,
        proposer_samples=settings.selfplay.eval_proposer_samples,
        temperature=settings.rollout.temperature,
    )


def _accuracies(metrics: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.3f}" for k, v in sorted(metrics.items()) if k.endswith("/overall/accuracy"))


@contextmanager
def _stop_on_signals(schedule: Schedule) -> Iterator[None]:
    """The first Ctrl-C (SIGINT) or SIGTERM (``docker compose stop``, a job scheduler) finishes the steps
    in flight, checkpoints and ends the run; a second one takes the default action at once.

    Installed after ``ray.init``, these replace Ray's own SIGTERM handler for the run, which would dump a
    stack trace and end the driver mid-step without a checkpoint."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be installed by the main thread (an embedding application)
        return
    loop = asyncio.get_running_loop()

    def first(signum: signal.Signals) -> None:
        log.warning("%s: stopping after the steps in flight (send it again to stop at once)", signum.name)
        schedule.stop.set()
        for each in STOP_SIGNALS:
            loop.remove_signal_handler(each)

    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, first, signum)
    try:
        yield
    finally:
        for signum in STOP_SIGNALS:
            loop.remove_signal_handler(signum)
