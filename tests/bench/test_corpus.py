"""The benchmark corpus: varied, reproducible, accepted by the gate, and deterministic when run.

The corpus programs are trusted code written for this repository, so these tests run them in-process with
``exec`` instead of in the sandbox (which has its own tests). Determinism across hash seeds needs separate
interpreters, so one test runs the whole corpus in two subprocesses with different ``PYTHONHASHSEED``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from azr.core.task import Task, TaskType
from azr.executor.gate import check_program
from azr.executor.values import canonical, canonical_args, parse_args
from bench.corpus import corpus

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return corpus()


def run_task(task: Task) -> list[str]:
    """Canonical outputs of ``task``'s program on each input, in a fresh namespace."""
    namespace: dict[str, object] = {}
    exec(compile(task.program, "<corpus>", "exec"), namespace)
    f = namespace["f"]
    assert callable(f)
    return [canonical(f(*parse_args(text))) for text in task.inputs]


def corpus_outputs(n: int, seed: int) -> list[list[str]]:
    return [run_task(task) for task in corpus(n, seed)]


def test_size_variety_and_shape(tasks: list[Task]) -> None:
    assert len(tasks) == 600
    assert len({t.id for t in tasks}) == 600
    assert len({t.program for t in tasks}) >= 500
    assert Counter(t.type for t in tasks) == {
        TaskType.DEDUCTION: 200,
        TaskType.ABDUCTION: 200,
        TaskType.INDUCTION: 200,
    }
    imports = Counter(
        line.split()[1]
        for t in tasks
        for line in t.program.splitlines()
        if line.startswith(("import", "from"))
    )
    assert len(imports) >= 10, imports
    for task in tasks:
        if task.type is TaskType.INDUCTION:
            assert len(set(task.inputs)) == len(task.inputs) >= 6
            assert task.message
        else:
            assert len(task.inputs) == 1
            assert not task.message
        assert task.outputs == ()


def test_reproducible_from_the_seed() -> None:
    assert corpus(60, seed=3) == corpus(60, seed=3)
    assert corpus(60, seed=3) != corpus(60, seed=4)
    assert corpus(30, seed=3) == corpus(60, seed=3)[:30]


def test_every_program_passes_the_gate(tasks: list[Task]) -> None:
    refused = {t.id: error for t in tasks if (error := check_program(t.program)) is not None}
    assert refused == {}


def test_every_input_is_a_canonical_argument_list(tasks: list[Task]) -> None:
    for task in tasks:
        for text in task.inputs:
            assert canonical_args(parse_args(text)) == text


def test_programs_run_and_return_supported_values(tasks: list[Task]) -> None:
    for task in tasks:
        first = run_task(task)
        assert run_task(task) == first, task.program
        assert len(first) == len(task.inputs)


def test_outputs_do_not_depend_on_the_hash_seed() -> None:
    code = (
        "import json\n"
        "from tests.bench.test_corpus import corpus_outputs\n"
        "print(json.dumps(corpus_outputs(600, 0)))"
    )
    results = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        results.append(json.loads(done.stdout))
    assert results[0] == results[1]
    assert results[0] == corpus_outputs(600, 0)
