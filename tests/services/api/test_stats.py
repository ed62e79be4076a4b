"""Curriculum statistics, the run, the probes and Prometheus, over a store filled like a real run."""

from __future__ import annotations

import json
import time

import httpx
import pytest
import redis
from fastapi.testclient import TestClient

from azr.core.task import Origin, TaskType, TaskUse
from azr.services.api.app import create_app
from azr.services.api.curriculum import Curriculum
from azr.services.store.buffers import TaskBuffers
from azr.services.store.keys import Keys
from azr.services.store.metrics import Counters, MetricsStream, task_use
from tests.services.api.conftest import AUTH, ApiProcess, free_port, settings_for
from tests.services.api.run_data import ERROR_CLASSES, fill_run, proposed_task, step_values


def _stats_after_refresh(api: TestClient) -> dict[str, object]:
    """GET /v1/stats once the app's follower has seen the store as it is now."""
    curriculum: Curriculum = api.app.state.api.curriculum  # type: ignore[attr-defined]
    version = curriculum.version
    deadline = time.monotonic() + 5
    while curriculum.version == version and time.monotonic() < deadline:
        time.sleep(0.05)
    stats: dict[str, object] = api.get("/v1/stats").json()
    return stats


def test_stats_cover_the_curriculum(api: TestClient, store: redis.Redis, keys: Keys) -> None:
    fill_run(store, keys, steps=30, tasks_per_type=20)
    stats = _stats_after_refresh(api)
    assert stats["latest_step"] == 29
    assert stats["steps_seen"] == 30
    assert stats["policy_version"] == 30
    series = stats["series"]
    assert isinstance(series, dict)
    assert series["step"] == list(range(30))
    assert series["solve/deduction/accuracy"][-1] == pytest.approx(
        step_values(29)["solve/deduction/accuracy"], rel=1e-4
    )
    buffers = stats["buffers"]
    assert isinstance(buffers, dict)
    counts = TaskBuffers(store, keys)[TaskType.INDUCTION].counts()
    assert buffers["induction"]["by_origin"] == {o.value: n for o, n in counts.by_origin.items()}
    assert buffers["induction"]["by_origin"]["proposed"] == 20
    assert buffers["induction"]["size"] == counts.size
    assert buffers["abduction"]["distinct_programs"] == 21  # twenty programs and the zero seed's
    assert stats["proposals"]["deduction"]["valid"] == 40  # type: ignore[index]
    expected_errors = {
        c.value: sum(step_values(s)[f"executor/errors/{c.value}"] for s in range(30)) for c in ERROR_CLASSES
    }
    assert stats["error_classes"] == pytest.approx(expected_errors)
    learnability = stats["learnability"]["deduction"]  # type: ignore[index]
    assert sum(learnability["counts"]) == 30
    assert len(stats["newest_tasks"]) == 12  # type: ignore[arg-type]


def test_stats_follow_new_records_and_seeds(api: TestClient, store: redis.Redis, keys: Keys) -> None:
    fill_run(store, keys, steps=5, tasks_per_type=3)
    assert _stats_after_refresh(api)["latest_step"] == 4
    MetricsStream(store, keys).publish(5, step_values(5))
    seed = {"type": "deduction", "program": "def f(x):\n    return x - 1", "inputs": ["10"]}
    task_id = api.post("/v1/seeds", json=seed, headers=AUTH).json()["results"][0]["task_id"]
    Counters(store, keys).incr_many(
        {task_use(task_id, TaskUse.SOLVE_ATTEMPTS): 2, task_use(task_id, TaskUse.SOLVED): 2}
    )
    stats = _stats_after_refresh(api)
    assert stats["latest_step"] == 5
    assert stats["series"]["step"] == [0, 1, 2, 3, 4, 5]  # type: ignore[index]
    (fate,) = stats["user_seeds"]  # type: ignore[misc]
    assert (fate["id"], fate["in_buffer"], fate["use"]["solve_rate"]) == (task_id, True, 1.0)
    assert stats["buffers"]["deduction"]["by_origin"]["user"] == 1  # type: ignore[index]


def test_long_histories_are_averaged_into_buckets(keys: Keys, store: redis.Redis) -> None:
    stream = MetricsStream(store, keys)
    for step in range(25):
        stream.publish(step, {"train/kl": float(step)} if step != 4 else {})
    with TestClient(create_app(settings_for(keys, series_points=10))) as api:
        stats = api.get("/v1/stats").json()
    assert stats["bucket_steps"] == 3
    assert stats["series"]["step"] == [1, 4, 7, 10, 13, 16, 19, 22, 24]
    assert stats["series"]["train/kl"][:2] == [1.0, 4.0]  # the second bucket lacks step 4: mean of 3 and 5


def test_current_run_and_probes(api: TestClient, store: redis.Redis, keys: Keys) -> None:
    fill_run(store, keys, steps=3, tasks_per_type=2)
    run = api.get("/v1/runs/current").json()
    assert run["policy_version"] == 3
    assert run["step"] == 2
    assert run["buffer_sizes"] == {t.value: n for t, n in TaskBuffers(store, keys).sizes().items()}
    assert run["buffer_sizes"]["induction"] >= 2
    assert api.get("/healthz").json() == {"status": "ok"}
    assert api.get("/readyz").json()["status"] == "ready"
    _stats_after_refresh(api)
    text = api.get("/metrics").text
    assert "azr_policy_version 3.0" in text
    assert 'azr_buffer_tasks{origin="proposed",type="induction"} 2.0' in text
    assert 'azr_api_requests_total{method="GET",route="/v1/runs/current",status="200"} 1.0' in text


def test_not_ready_when_the_executor_service_is_unreachable(keys: Keys, store: redis.Redis) -> None:
    settings = settings_for(keys, executor="service", executor_url=f"http://127.0.0.1:{free_port()}")
    with TestClient(create_app(settings)) as api:
        assert api.get("/healthz").status_code == 200
        reply = api.get("/readyz")
    assert reply.status_code == 503
    assert (reply.json()["redis"], reply.json()["executor"]) == (True, False)


def test_the_event_stream_sends_one_event_per_step(
    server: ApiProcess, store: redis.Redis, keys: Keys
) -> None:
    stream = MetricsStream(store, keys)
    stream.publish(0, step_values(0))
    events: list[tuple[str, dict[str, object]]] = []
    with httpx.stream("GET", f"{server.url}/v1/stats/stream", timeout=10) as reply:
        assert reply.headers["content-type"].startswith("text/event-stream")
        lines = reply.iter_lines()
        published = False
        event_id = ""
        for line in lines:
            if line.startswith("id: "):
                event_id = line[4:]
            if line.startswith("data: "):
                events.append((event_id, json.loads(line[6:])))
                if not published:
                    for step in (1, 2):
                        stream.publish(step, step_values(step))
                    published = True
            if len(events) == 3:
                break
    assert [e["step"] for _, e in events] == [0, 1, 2]
    assert events[2][1]["values"]["perf/tokens_per_s"] == step_values(2)["perf/tokens_per_s"]  # type: ignore[index]
    # A browser that reconnects with Last-Event-ID gets what it missed, and nothing twice.
    stream.publish(3, step_values(3))
    with httpx.stream(
        "GET", f"{server.url}/v1/stats/stream", headers={"Last-Event-ID": events[1][0]}, timeout=10
    ) as reply:
        resumed = [json.loads(line[6:])["step"] for line in _first_data_lines(reply.iter_lines(), 2)]
    assert resumed == [2, 3]


def _first_data_lines(lines: object, n: int) -> list[str]:
    found: list[str] = []
    for line in lines:  # type: ignore[attr-defined]
        if line.startswith("data: "):
            found.append(line)
            if len(found) == n:
                return found
    return found


def test_seeds_of_all_origins_are_counted_per_buffer(api: TestClient, store: redis.Redis, keys: Keys) -> None:
    buffers = TaskBuffers(store, keys)
    buffers.ensure_zero_seed()
    buffers.add(proposed_task(TaskType.INDUCTION, 1, origin=Origin.USER))
    stats = _stats_after_refresh(api)
    assert stats["buffers"]["induction"]["by_origin"]["user"] == 1  # type: ignore[index]
    assert stats["buffers"]["induction"]["by_origin"]["proposed"] == 0  # type: ignore[index]
    assert stats["buffers"]["abduction"]["by_origin"]["zero-seed"] == 1  # type: ignore[index]
