"""``azr selfplay`` end to end: the real command in a subprocess, with real Ray, Redis, the local executor and
the tiny model; then faults a user or an operator would meet, injected from outside as they would happen.

Each run is the tiny preset made smaller (one task per type, 16-token completions) so that a step takes
seconds; the checks read what the run leaves behind: metrics.jsonl, samples.jsonl, checkpoints, and the
run's Redis (its AOF), where the trained-id ledger proves that every experience was trained exactly once.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import ClassVar

import psutil
import pytest
import redis

from azr.services.store.embedded import EmbeddedRedis
from azr.services.store.keys import Keys
from azr.trainer.tiny import BASE_DIR

pytestmark = [pytest.mark.slow, pytest.mark.redis]

TYPES = ("deduction", "abduction", "induction")
STEP_KEYS = [
    "step",
    "policy_version",
    "time_s",
    *(
        f"propose/{t}/{k}"
        for t in ("deduction", "abduction", "induction")
        for k in ("valid_rate", "reward_mean")
    ),
    *(f"propose/{t}/learnability_mean" for t in ("deduction", "abduction", "induction")),
    *(f"solve/{t}/{k}" for t in ("deduction", "abduction", "induction") for k in ("accuracy", "reward_mean")),
    *(f"buffer/{t}/size" for t in ("deduction", "abduction", "induction")),
    "executor/errors/infra_error",
    "executor/errors/syntax_error",
    "train/pg_loss",
    "train/entropy",
    "train/kl",
    "train/clip_frac",
    "train/grad_norm",
    "perf/tokens_per_s",
    "perf/step_s",
    "perf/generate_s",
    "perf/execute_s",
    "perf/train_s",
    "perf/publish_s",
    "perf/trainer_idle_ratio",
    "batch/staleness_max",
]
RUN_TIMEOUT_S = 420
DOUBLE = "def f(x):\n    return x * 2"


def small(model: Path) -> list[str]:
    return [
        "--preset",
        "tiny",
        "--no-progress",
        "--set",
        f"model={json.dumps(str(model))}",
        "--set",
        "selfplay.batch_size=1",
        "--set",
        "rollout.max_new_tokens=16",
        "--set",
        "roles.n_learnability_rollouts=2",
        "--set",
        "trainer.checkpoint_interval=1",
        "--set",
        "executor.workers=1",
        "--set",
        "ray.num_cpus=2",
    ]


class Run:
    """``azr selfplay`` as a subprocess, with what it wrote."""

    started: ClassVar[list[Run]] = []
    """Every run a test started, for ``_no_run_outlives_its_test``."""

    def __init__(self, out: Path, args: Sequence[str]) -> None:
        Run.started.append(self)
        self.out = out
        self.log = (out.parent / f"{out.name}.log").open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "azr", "selfplay", "--out", str(out), *args],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=os.environ | {"PYTHONUNBUFFERED": "1"},
        )

    def steps(self) -> list[dict[str, float]]:
        path = self.out / "metrics.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def wait_for_steps(self, count: int) -> None:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while len(self.steps()) < count:
            assert self.proc.poll() is None, f"the run ended early:\n{self.output()}"
            assert time.monotonic() < deadline, f"no step {count} in {RUN_TIMEOUT_S} s:\n{self.output()}"
            time.sleep(0.5)

    def finish(self) -> int:
        try:
            return self.proc.wait(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"the run did not finish in {RUN_TIMEOUT_S} s:\n{self.output()}") from None
        finally:
            self.log.close()

    def output(self) -> str:
        """The log's tail, for assertion messages."""
        return self.full_output()[-6000:]

    def full_output(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return (self.out.parent / f"{self.out.name}.log").read_text(errors="replace")

    def actor_processes(self, name: str) -> list[psutil.Process]:
        """The run's actor processes of one class (Ray names them ``ray::<Class>...``)."""
        found = []
        for child in psutil.Process(self.proc.pid).children(recursive=True):
            try:
                if any(part.startswith(f"ray::{name}") for part in child.cmdline()):
                    found.append(child)
            except psutil.NoSuchProcess:
                continue
        return found


@pytest.fixture(autouse=True)
def _no_run_outlives_its_test() -> Iterator[None]:
    """Kill what a failed test left running. pytest-timeout interrupts a test in the middle of a wait, past
    ``Run.finish``'s own kill; an orphaned run with its Ray cluster would hold the CPUs and make the tests
    after it time out in turn."""
    yield
    for run in Run.started:
        if run.proc.poll() is None:
            parent = psutil.Process(run.proc.pid)
            for process in [*parent.children(recursive=True), parent]:
                try:
                    process.kill()
                except psutil.NoSuchProcess:
                    continue
            run.proc.wait()
    Run.started.clear()


@pytest.fixture
def run_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "run"


def assert_well_formed(steps: list[dict[str, float]], *, max_staleness: int) -> None:
    for record in steps:
        missing = [k for k in STEP_KEYS if k not in record]
        assert not missing, f"step {record.get('step')} lacks {missing}"
        assert all(record[k] is not None and math.isfinite(record[k]) for k in STEP_KEYS)
        assert record["batch/staleness_max"] <= max_staleness
    versions = [r["policy_version"] for r in steps]
    assert versions == sorted(versions), f"the policy version went backwards: {versions}"


def ledger(run_dir: Path) -> dict[str, int]:
    """The run's stream bookkeeping, read from its Redis (restarted from the AOF it left behind)."""
    with EmbeddedRedis(run_dir / "redis") as server:
        client = redis.Redis.from_url(server.url)
        keys = Keys("azr")
        counters = {k.decode(): int(v) for k, v in client.hgetall(keys.counters()).items()}
        out = {
            "ledger": int(client.zcard(keys.trained())),
            "waiting": int(client.xlen(keys.experiences())),
            "added": counters.get("stream/added", 0),
            "trained": counters.get("stream/trained", 0),
            "stale": counters.get("stream/stale_dropped", 0),
        }
        client.close()
    return out


def assert_exactly_once(run_dir: Path, *, max_waiting: int = 0) -> None:
    """Every experience added was trained once, dropped as stale (counted), or still waits in the stream
    for the next run (after a learner restart the steps may end one round behind)."""
    books = ledger(run_dir)
    assert books["waiting"] <= max_waiting, books
    assert books["trained"] == books["ledger"], f"an experience was counted as trained twice: {books}"
    assert books["ledger"] + books["stale"] + books["waiting"] == books["added"], (
        f"an experience was lost: {books}"
    )


def test_async_run_stopped_by_ctrl_c_then_resumed(run_dir: Path, tiny_model_dir: Path) -> None:
    run = Run(run_dir, [*small(tiny_model_dir), "--steps", "50"])
    run.wait_for_steps(2)
    run.proc.send_signal(signal.SIGINT)
    assert run.finish() == 0, run.output()
    assert "(stopped)" in run.output() and "checkpoints:" in run.output()
    steps = run.steps()
    done = len(steps)
    assert 2 <= done < 50
    assert [r["step"] for r in steps] == list(range(done))
    assert_well_formed(steps, max_staleness=1)
    assert [r["policy_version"] for r in steps] == list(range(1, done + 1))
    assert max(r["batch/staleness_max"] for r in steps) == 1, "rollouts overlapped training"
    assert (run_dir / "checkpoints" / f"step-{done:08d}").is_dir(), "a clean stop checkpoints"
    assert (run_dir / "samples.jsonl").read_text().strip()
    assert list((run_dir / "tensorboard").iterdir())

    again = Run(run_dir, ["--resume", "--steps", str(done + 1), "--no-progress"])
    assert again.finish() == 0, again.output()
    steps = again.steps()
    assert [r["step"] for r in steps] == list(range(done + 1)), "the resumed run continues at its step count"
    assert steps[-1]["policy_version"] > steps[-2]["policy_version"]
    assert_exactly_once(run_dir)


def test_sigterm_stops_a_run_as_cleanly_as_ctrl_c(run_dir: Path, tiny_model_dir: Path) -> None:
    """What ``docker compose stop`` sends: the steps in flight finish and the learner checkpoints, where
    Ray's own handler would end the driver mid-step."""
    run = Run(run_dir, [*small(tiny_model_dir), "--steps", "50"])
    run.wait_for_steps(2)
    run.proc.send_signal(signal.SIGTERM)
    assert run.finish() == 0, run.output()
    log = run.full_output()
    assert "SIGTERM: stopping after the steps in flight" in log
    assert "(stopped)" in log and "SIGTERM received" not in log, "Ray's handler did not take over"
    done = len(run.steps())
    assert 2 <= done < 50
    assert (run_dir / "checkpoints" / f"step-{done:08d}").is_dir(), "a clean stop checkpoints"


def test_sync_run_trains_only_on_the_current_policy_and_scores_it(
    run_dir: Path, tiny_model_dir: Path
) -> None:
    """The run also scores its policy, solver and proposer (on the three zero-seed tasks, which costs
    seconds): before any step, as the row of step -1, then every second step and after the last, within
    the step's row."""
    evaluation = ["--set", "selfplay.eval_every=2", "--set", "selfplay.eval_suites=zero-seed"]
    evaluation += ["--set", "selfplay.eval_proposer_samples=1"]
    run = Run(run_dir, [*small(tiny_model_dir), "--steps", "2", "--sync", *evaluation])
    assert run.finish() == 0, run.output()
    baseline, *steps = run.steps()
    assert len(steps) == 2
    assert_well_formed(steps, max_staleness=0)
    assert [r["rollout/policy_version"] for r in steps] == [0, 1]

    scores = {
        f"eval/zero-seed/{t}/{k}" for t in (*TYPES, "overall") for k in ("accuracy", "format_error_rate")
    } | {f"eval/zero-seed/propose/{t}/valid_rate" for t in (*TYPES, "overall")}
    assert (baseline["step"], baseline["policy_version"]) == (-1, 0)
    assert [scores <= r.keys() for r in (baseline, *steps)] == [True, False, True]
    assert all(0.0 <= r[k] <= 1.0 for r in (baseline, steps[1]) for k in scores)
    assert "eval/zero-seed/overall/accuracy" in run.output(), "the summary shows the last scores"


def test_killed_actors_are_restarted_and_the_run_finishes(run_dir: Path, tiny_model_dir: Path) -> None:
    """A rollout worker killed mid-run, then the learner: Ray restarts each, the worker loads the newest
    weights, the learner resumes from its checkpoint, and no experience is lost or trained twice."""
    run = Run(run_dir, [*small(tiny_model_dir), "--steps", "5"])
    for count, actor in ((1, "RolloutWorker"), (2, "LearnerActor")):
        run.wait_for_steps(count)
        (victim,) = run.actor_processes(actor)
        victim.send_signal(signal.SIGKILL)
    assert run.finish() == 0, run.output()
    steps = run.steps()
    assert [r["step"] for r in steps] == [0, 1, 2, 3, 4]
    assert_well_formed(steps, max_staleness=1)
    assert_exactly_once(run_dir, max_waiting=6)  # one round: a task per type, two roles


def test_a_redis_outage_is_ridden_out(run_dir: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path / "redis")
    url = server.start()
    try:
        run = Run(run_dir, [*small(tiny_model_dir), "--steps", "3", "--redis-url", url])
        run.wait_for_steps(1)
        server.kill()
        time.sleep(3)
        server.restart()
        assert run.finish() == 0, run.output()
        assert len(run.steps()) == 3
        assert_well_formed(run.steps(), max_staleness=1)
    finally:
        server.stop()


def test_the_solver_trains_alone_on_a_seed_file(run_dir: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    """``--seed-tasks`` with ``selfplay.propose=false``: the seeds join the buffers with the executor's
    outputs, nothing is proposed, and every trained experience is a solver's. The untrained tiny model
    lists no tasks it was taught, so the preset's ``warm_start_seeds`` adds none, and says so."""
    seeds = tmp_path / "seeds.jsonl"
    job = {"id": "a", "op": "validate", "task": {"type": "deduction", "program": DOUBLE, "inputs": ["3"]}}
    bare = {"type": "abduction", "program": "def f(s):\n    return s[::-1]", "inputs": ["'ab'"]}
    seeds.write_text(f"{json.dumps(job)}\n\n{json.dumps(bare)}\n")  # a job, a blank line, a bare task
    solver_only = ["--seed-tasks", str(seeds), "--set", "selfplay.propose=false"]
    run = Run(run_dir, [*small(tiny_model_dir), "--steps", "2", "--sync", *solver_only])
    assert run.finish() == 0, run.output()
    steps = run.steps()
    assert len(steps) == 2
    assert not [k for r in steps for k in r if k.startswith("propose/")], "nothing was proposed"
    assert [r["buffer/deduction/size"] for r in steps] == [2, 2], "the zero seed and the file's task"
    said = " ".join(run.output().split())
    assert "lists no tasks it was trained on" in said, "the preset's warm-start seeds: none from this model"
    assert all(r[f"solve/{t}/count"] == 1 for r in steps for t in TYPES)
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert samples and {s["role"] for s in samples} == {"solve"}
    assert_exactly_once(run_dir)


def test_a_run_from_the_warm_start_seeds_its_buffers_with_the_tasks_it_was_taught(
    run_dir: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    """``selfplay.warm_start_seeds``: the warm start (built small here, from the session's tiny model) lists
    the tasks it was trained to solve, and the run adds the first of each type to the buffers."""
    cache = tmp_path / "cache"
    shutil.copytree(tiny_model_dir, cache / BASE_DIR)
    warm = ["model=tiny-warm", f"cache_dir={cache}", "warm_start.steps=1", "warm_start.tasks_per_type=6"]
    seeded = [*warm, "selfplay.warm_start_seeds=2", "selfplay.propose=false"]
    run = Run(
        run_dir,
        [*small(tiny_model_dir), "--steps", "1", "--sync", *(a for s in seeded for a in ("--set", s))],
    )
    assert run.finish() == 0, run.output()
    (step,) = run.steps()
    assert [step[f"buffer/{t}/size"] for t in TYPES] == [3, 3, 3], "the zero seed and two taught tasks"
    assert "seed tasks: 6 from the warm start's tasks, 6 new to the buffers" in " ".join(run.output().split())


def test_a_seed_file_with_an_invalid_task_stops_the_run_before_training(
    run_dir: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text('{"type": "deduction", "program": "def f(x):\\n    return 1 / 0", "inputs": ["3"]}\n')
    run = Run(run_dir, [*small(tiny_model_dir), "--steps", "2", "--seed-tasks", str(seeds)])
    assert run.finish() == 2, run.output()
    said = " ".join(run.output().split())  # the console wraps long lines
    assert "1 invalid seed task(s), none added: task 1: runtime_error" in said
    assert run.steps() == []
