"""The batch contract of DESIGN.md: job and result lines, and `azr executor run` run as a subprocess."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from azr.core.task import Origin, Task, TaskType
from azr.executor.errors import ErrorCode, ExecError
from azr.executor.jobs import Job, JobOp, JobResult, MalformedJobError, decode_job

ADD_ONE = "def f(x):\n    return x + 1"
SLOW = "def f(n):\n    t = 0\n    for i in range(n):\n        t += i\n    return t"
AZR = [sys.executable, "-c", "from azr.services.cli import main; main()"]


def job_line(**fields: Any) -> str:
    return json.dumps(fields)


DESIGN_JOBS = [
    job_line(id="j1", op="validate", task={"type": "deduction", "program": ADD_ONE, "inputs": ["3"]}),
    job_line(
        id="j2",
        op="check",
        task={"type": "deduction", "program": ADD_ONE, "inputs": ["3"], "outputs": ["4"]},
        answer="4",
    ),
    job_line(
        id="j3",
        op="check",
        task={"type": "abduction", "program": ADD_ONE, "inputs": ["3"], "outputs": ["4"]},
        answer="3",
    ),
    job_line(
        id="j4",
        op="check",
        task={"type": "induction", "program": ADD_ONE, "inputs": ["1", "2"], "outputs": ["2", "3"]},
        answer=ADD_ONE,
    ),
    job_line(
        id="j9",
        op="validate",
        task={"type": "deduction", "program": "import os\ndef f(x):\n    return x", "inputs": ["1"]},
    ),
]


def azr_executor_run(
    *args: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*AZR, "executor", "run", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def results_of(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


@pytest.mark.slow
def test_design_examples_and_malformed_lines(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.jsonl"
    malformed = [
        "{not json",
        job_line(op="validate", task={"type": "deduction", "program": ADD_ONE, "inputs": ["1"]}),  # no id
        job_line(id="bad-op", op="explode", task={}),
        job_line(id="no-answer", op="check", task={"type": "deduction", "program": ADD_ONE, "inputs": ["1"]}),
        job_line(id="bad-type", op="validate", task={"type": "poetry", "program": ADD_ONE, "inputs": ["1"]}),
    ]
    too_long = job_line(id="huge", pad="x" * (17 * 1024**2))  # over the 16 MiB line cap: skipped, not read
    jobs.write_bytes("\n".join([*DESIGN_JOBS, "", *malformed, too_long]).encode() + b"\n\xff\xfe\n")
    out = tmp_path / "results.jsonl"

    done = azr_executor_run("--in", str(jobs), "--out", str(out), "--workers", "1")

    assert done.returncode == 0, done.stderr
    results = {r["id"]: r for r in results_of(out.read_text())}
    assert len(results) == len(DESIGN_JOBS) + len(malformed) + 2
    assert {k: results["j1"][k] for k in ("ok", "outputs", "error")} == {
        "ok": True,
        "outputs": ["4"],
        "error": None,
    }
    for job_id in ("j2", "j3", "j4"):
        assert {k: results[job_id][k] for k in ("ok", "correct", "error")} == {
            "ok": True,
            "correct": True,
            "error": None,
        }
        assert "outputs" not in results[job_id]
    assert results["j9"]["ok"] is False
    assert results["j9"]["error"] == {"code": "forbidden", "message": "import of 'os' is not allowed"}
    assert "outputs" not in results["j9"] and "correct" not in results["j9"]
    # Lines 1-5 are jobs, 6 is blank (skipped), 7 and 8 have no usable id, 12 is too long, 13 not UTF-8.
    for job_id in ("line-7", "line-8", "bad-op", "no-answer", "bad-type", "line-12", "line-13"):
        assert results[job_id]["ok"] is False
        assert results[job_id]["error"]["code"] == "bad_answer"
        assert results[job_id]["error"]["message"].startswith("malformed job")
    assert all(isinstance(r["elapsed_ms"], float) for r in results.values())


@pytest.mark.slow
def test_results_stream_as_jobs_finish() -> None:
    """A slow job read first does not hold back a fast one, and each result is flushed as it is ready.

    Input stays open after the jobs are written, so the fast result can only be seen if it was written
    and flushed before the run ended.
    """
    process = subprocess.Popen(
        [*AZR, "executor", "run", "--in", "-", "--out", "-", "--workers", "2"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        slow = {"type": "deduction", "program": SLOW, "inputs": ["20000000"]}
        fast = {"type": "deduction", "program": ADD_ONE, "inputs": ["1"]}
        process.stdin.write(job_line(id="slow", op="validate", task=slow) + "\n")
        process.stdin.write(job_line(id="fast", op="validate", task=fast) + "\n")
        process.stdin.flush()
        ready, _, _ = select.select([process.stdout], [], [], 60)
        assert ready, "no result while the input was still open"
        first = json.loads(process.stdout.readline())
        assert first["id"] == "fast" and first["outputs"] == ["2"]
        process.stdin.close()
        second = json.loads(process.stdout.readline())
        assert second["id"] == "slow"
        assert process.wait(timeout=60) == 0
    finally:
        process.kill()
        process.wait()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--in", "/nonexistent/jobs.jsonl", "--out", "-"], "cannot read /nonexistent/jobs.jsonl"),
        (
            ["--in", "-", "--out", "/nonexistent/dir/results.jsonl"],
            "cannot write /nonexistent/dir/results.jsonl",
        ),
    ],
    ids=["unreadable-input", "unwritable-output"],
)
def test_exit_code_when_files_fail(args: list[str], message: str) -> None:
    done = azr_executor_run(*args)
    assert done.returncode == 1
    assert message in done.stderr


def test_exit_code_when_the_backend_cannot_start(tmp_path: Path) -> None:
    """Without bubblewrap on the PATH the local backend cannot isolate, so it refuses to start."""
    env = {**os.environ, "PATH": str(tmp_path)}
    done = azr_executor_run("--in", "-", "--out", "-", stdin=DESIGN_JOBS[0] + "\n", env=env)
    assert done.returncode == 1
    assert "backend did not start" in done.stderr
    assert done.stdout == ""


def test_usage_error_exit_code() -> None:
    assert azr_executor_run("--out", "-").returncode == 2


@pytest.mark.slow
def test_demo_shows_the_examples() -> None:
    done = subprocess.run(
        [*AZR, "executor", "demo"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
        cwd=Path(__file__).resolve().parents[2],
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "forbidden: import of 'os' is not allowed" in done.stdout
    assert "isolation full" in done.stdout


def test_gate_off_leaves_containment_to_the_sandbox() -> None:
    """With the gate off a program importing os is run (in the sandbox) rather than refused."""
    done = azr_executor_run(
        "--in", "-", "--out", "-", "--workers", "1", "--gate", "off", stdin=DESIGN_JOBS[4]
    )
    assert done.returncode == 0, done.stderr
    [result] = results_of(done.stdout)
    assert (result["id"], result["ok"], result["outputs"]) == ("j9", True, ["1"])


def test_jobs_and_results_round_trip_through_json() -> None:
    task = Task(TaskType.ABDUCTION, ADD_ONE, ("3",), ("4",), origin=Origin.USER)
    job = Job("a1", JobOp.CHECK, task, answer="3")
    assert decode_job(job.to_json(), 1) == job
    result = JobResult("a1", ok=True, correct=False, error=ExecError(ErrorCode.BAD_ANSWER, "not a literal"))
    assert JobResult.from_dict(json.loads(result.to_json())) == result
    with pytest.raises(MalformedJobError) as malformed:
        decode_job(json.dumps({**job.to_dict(), "answer": 3}), 7)
    assert malformed.value.job_id == "a1"
