"""``azr seed add`` as a user runs it: a real ``azr`` subprocess against ``azr api`` in another, over real
Redis and the real executor pool."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import redis

from azr.core.task import Origin, TaskType
from azr.services.store.buffers import TaskBuffers
from azr.services.store.keys import Keys
from tests.services.api.conftest import TOKEN, ApiProcess, free_port

DOUBLE = {"type": "deduction", "program": "def f(x):\n    return x * 2", "inputs": ["3", "[1]"]}
FIRST = {"type": "abduction", "program": "def f(xs):\n    return xs[0]", "inputs": ["[4, 5]"]}
FORBIDDEN = {"type": "deduction", "program": "import os\ndef f(x):\n    return os.getcwd()", "inputs": ["1"]}


def seed_add(path: Path, url: str, *args: str, token: str | None = TOKEN) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "AZR_API_TOKEN"}
    if token is not None:
        env["AZR_API_TOKEN"] = token
    azr = Path(sys.executable).with_name("azr")
    command = [str(azr), "seed", "add", str(path), "--url", url, *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)


def write_lines(path: Path, *lines: str) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_file_of_jobs_and_bare_tasks_is_stored_once_with_the_executors_outputs(
    server: ApiProcess, store: redis.Redis, keys: Keys, tmp_path: Path
) -> None:
    job = {"id": "j1", "op": "validate", "task": {**DOUBLE, "outputs": ["wrong", "wrong"]}}
    seeds = write_lines(tmp_path / "seeds.jsonl", json.dumps(job), "", json.dumps(FIRST))
    first = seed_add(seeds, server.url)
    assert first.returncode == 0, first.stderr
    assert "2 seed(s) stored (2 created)" in first.stdout
    buffers = TaskBuffers(store, keys)
    assert buffers[TaskType.DEDUCTION].counts().by_origin[Origin.USER] == 1
    assert buffers[TaskType.ABDUCTION].counts().by_origin[Origin.USER] == 1
    stored = buffers[TaskType.DEDUCTION].newest(5) + buffers[TaskType.ABDUCTION].newest(5)
    assert [task.outputs for task in stored] == [("6", "[1, 1]"), ("4",)]

    again = seed_add(seeds, server.url)
    assert again.returncode == 0, again.stderr
    assert "2 seed(s) stored (2 exists)" in again.stdout
    assert sum(buffers.sizes().values()) == 2


def test_a_seed_breaking_the_seed_rules_stops_the_file_before_anything_is_sent(
    server: ApiProcess, store: redis.Redis, keys: Keys, tmp_path: Path
) -> None:
    one_pair = {"type": "induction", "program": "def f(x):\n    return x", "inputs": ["1"], "message": "m"}
    seeds = write_lines(tmp_path / "seeds.jsonl", json.dumps(DOUBLE), json.dumps(one_pair))
    result = seed_add(seeds, server.url)
    assert result.returncode == 2
    assert "none sent" in result.stderr
    assert "task 2:" in result.stderr and "needs at least 2 inputs" in result.stderr
    assert sum(TaskBuffers(store, keys).sizes().values()) == 0


def test_a_seed_the_executor_refuses_is_named_and_earlier_requests_stay_stored(
    server: ApiProcess, store: redis.Redis, keys: Keys, tmp_path: Path
) -> None:
    seeds = write_lines(
        tmp_path / "seeds.jsonl", json.dumps(DOUBLE), json.dumps(FORBIDDEN), json.dumps(FIRST)
    )
    result = seed_add(seeds, server.url, "--batch", "1")
    assert result.returncode == 2
    assert "1 stored by earlier requests" in result.stderr
    assert "task 2: forbidden:" in result.stderr
    sizes = TaskBuffers(store, keys).sizes()
    assert (sizes[TaskType.DEDUCTION], sizes[TaskType.ABDUCTION]) == (1, 0)


def test_rate_limits_are_waited_out(keys: Keys, store: redis.Redis, tmp_path: Path) -> None:
    server = ApiProcess(keys, seed_rate_per_s=4.0, seed_burst=2, max_seeds_per_request=2).start()
    try:
        lines = [json.dumps({**DOUBLE, "inputs": [str(n)]}) for n in range(6)]
        result = seed_add(write_lines(tmp_path / "seeds.jsonl", *lines), server.url, "--batch", "2")
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr
    assert "6 seed(s) stored (6 created)" in result.stdout
    assert TaskBuffers(store, keys)[TaskType.DEDUCTION].size() == 6


def test_a_wrong_token_or_no_api_fails_with_its_reason(server: ApiProcess, tmp_path: Path) -> None:
    seeds = write_lines(tmp_path / "seeds.jsonl", json.dumps(DOUBLE))
    wrong = seed_add(seeds, server.url, token="not-the-token")
    assert wrong.returncode == 1
    assert "HTTP 401" in wrong.stderr and "AZR_API_TOKEN" in wrong.stderr
    nobody = seed_add(seeds, f"http://127.0.0.1:{free_port()}")
    assert nobody.returncode == 1
    assert "cannot reach the API" in nobody.stderr
