"""``docker compose up``: the whole cluster on the real engine, trained on, faulted, and removed.

One cluster serves the module (starting it costs minutes on two cores); the tests run in file order:
the run trains and takes a seed, then survives a killed Ray worker (while the actors are where the first
driver placed them, one per node), a killed learner and a restarted Redis, and at the end ``down -v``
leaves nothing of the project on the engine.
"""

from __future__ import annotations

import time

import httpx
import pytest

from tests.compose.cluster import Cluster

pytestmark = [pytest.mark.slow, pytest.mark.docker]

STEP_TIMEOUT_S = 300
ACTORS = {"LearnerActor", "RolloutWorker", "ExecutorActor"}
SEED = {"type": "deduction", "program": "def f(x):\n    return x * 3", "inputs": ["7"]}


def test_cluster_trains_and_takes_a_seed(cluster: Cluster) -> None:
    response = httpx.post(
        f"{cluster.api_url()}/v1/seeds",
        json=SEED,
        headers={"Authorization": f"Bearer {cluster.api_token}"},
        timeout=60,
    )
    assert response.status_code in (200, 201), response.text
    outcome = response.json()["results"][0]
    assert outcome["outputs"] == ["21"], outcome
    unauthorised = httpx.post(f"{cluster.api_url()}/v1/seeds", json=SEED, timeout=30)
    assert unauthorised.status_code == 401

    stats = cluster.wait_for_step(1, STEP_TIMEOUT_S)  # steps 0 and 1: two training steps
    assert stats["steps_seen"] >= 2
    task = httpx.get(f"{cluster.api_url()}/v1/tasks/{outcome['task_id']}", timeout=10)
    assert task.status_code == 200 and task.json()["origin"] == "user"


def test_ray_nodes_of_three_containers_carry_the_run(cluster: Cluster) -> None:
    # head, one ray-worker and the learner's own node (the driver attaches to a local node)
    assert cluster.ray_nodes_alive() == 3
    placement = cluster.actor_nodes()
    assert placement.keys() >= ACTORS, placement
    # The driver waited for all three nodes and placed one actor on each.
    assert len(set(placement.values())) == 3, f"actors share a node: {placement}"
    dashboard = cluster.compose("port", "ray-head", "8265").strip()
    assert dashboard.rsplit(":", 1)[1].isdigit()


def test_killed_ray_worker_and_the_run_goes_on(cluster: Cluster) -> None:
    placement_before = cluster.actor_nodes()
    worker_ip = cluster.inspect("ray-worker", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}")
    assert worker_ip in placement_before.values(), placement_before
    cluster.compose("kill", "ray-worker")
    # Ray declares the node dead after its missed health checks and restarts its actor on another node:
    # until then the state API reports the actor alive where it was, and while it restarts, not at all.
    # The learner may meanwhile train on experiences already in the stream, so steps are counted only
    # once every actor is alive again off the dead node (pytest's timeout bounds a hang).
    while worker_ip in (placement := cluster.actor_nodes()).values() or not placement.keys() >= ACTORS:
        time.sleep(5)
    before = cluster.stats()["latest_step"]
    cluster.wait_for_step(before + 2, STEP_TIMEOUT_S)  # steps trained with the actor on its new node
    placement_after = cluster.actor_nodes()
    assert worker_ip not in placement_after.values(), (placement_before, placement_after)
    assert placement_after.keys() >= ACTORS, placement_after
    # The node comes back for the tests that follow: a restarted learner waits for all three nodes.
    cluster.compose("up", "-d", "--wait", "--wait-timeout", "120", "ray-worker", timeout_s=180)


def test_killed_learner_restarts_and_resumes(cluster: Cluster) -> None:
    before = cluster.stats()["latest_step"]
    restarts = int(cluster.inspect("learner", "{{.RestartCount}}"))
    # A crash from inside, as an OOM kill or a fault would end it: the driver dies with SIGKILL.
    cluster.exec(
        "learner",
        "sh",
        "-c",
        "for p in /proc/[0-9]*; do grep -qas '[s]elfplay' $p/cmdline && kill -9 ${p#/proc/}; done; true",
    )
    deadline = time.monotonic() + 60
    while int(cluster.inspect("learner", "{{.RestartCount}}")) == restarts:
        assert time.monotonic() < deadline, cluster.logs("learner")
        time.sleep(1)
    stats = cluster.wait_for_step(before + 2, STEP_TIMEOUT_S)
    steps = stats["series"]["step"]
    assert steps == sorted(steps), f"steps went back after the restart: {steps}"
    assert steps.count(0) == 1, f"the run started over instead of resuming: {steps}"
    assert_exactly_once(cluster)


def assert_exactly_once(cluster: Cluster) -> None:
    """Every experience added was trained once, dropped as stale, or still waits in the stream."""
    books = cluster.stream_books()
    assert books["trained"] > 0, books
    assert books["trained"] == books["ledger"], f"an experience was counted as trained twice: {books}"
    assert books["ledger"] + books["stale"] + books["waiting"] == books["added"], (
        f"an experience was lost: {books}"
    )


def test_redis_restart_keeps_the_buffers_and_the_run_goes_on(cluster: Cluster) -> None:
    before = cluster.stats()
    sizes_before = {t: before["buffers"][t]["size"] for t in before["buffers"]}
    cluster.compose("restart", "redis")
    cluster.compose("up", "-d", "--wait", "--wait-timeout", "120", "redis", timeout_s=180)
    after = cluster.wait_for_step(before["latest_step"] + 1, STEP_TIMEOUT_S)
    for task_type, size in sizes_before.items():
        assert after["buffers"][task_type]["size"] >= size, (task_type, before["buffers"], after["buffers"])
    assert_exactly_once(cluster)


def test_down_leaves_nothing_behind(cluster: Cluster) -> None:
    cluster.down()
    assert cluster.leftovers() == {}
