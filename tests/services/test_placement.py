"""Actor placement on a real multi-node Ray cluster (one raylet per node, all on this machine)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import ray
from ray.cluster_utils import Cluster
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from azr.services.actors.placement import NodeRoundRobin

pytestmark = pytest.mark.slow


class Probe:
    def node(self) -> str:
        return str(ray.get_runtime_context().get_node_id())


ProbeActor: Any = ray.remote(Probe)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    for _ in range(2):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, logging_level=logging.WARNING)
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()  # type: ignore[no-untyped-call]


def test_actors_that_need_nothing_go_one_to_each_node(cluster: Cluster) -> None:
    placement = NodeRoundRobin.of_cluster()
    assert len(placement.nodes) == 3
    probes = [ProbeActor.options(**placement.next()).remote() for _ in range(4)]
    nodes = ray.get([p.node.remote() for p in probes])
    assert nodes[:3] == placement.nodes
    assert nodes[3] == nodes[0], "the fourth actor starts the round again"


def test_placement_waits_for_a_node_that_joins_late(cluster: Cluster) -> None:
    placed: list[NodeRoundRobin] = []
    waiting = threading.Thread(
        target=lambda: placed.append(NodeRoundRobin.of_cluster(min_nodes=4, wait_s=120))
    )
    waiting.start()
    time.sleep(2.0)
    assert not placed, "placed before the fourth node joined"
    late = cluster.add_node(num_cpus=1)  # Ray starts nodes from the main thread only
    waiting.join()
    assert late.node_id in placed[0].nodes and len(placed[0].nodes) == 4
    cluster.remove_node(late)


def test_placement_stops_waiting_and_uses_the_nodes_it_has(cluster: Cluster) -> None:
    placement = NodeRoundRobin.of_cluster(min_nodes=9, wait_s=2)
    assert len(placement.nodes) == 3


def test_a_restarted_actor_leaves_its_dead_node(cluster: Cluster) -> None:
    extra = cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    extra_id = extra.node_id
    placement = NodeRoundRobin([extra_id])
    probe = ProbeActor.options(max_restarts=-1, max_task_retries=-1, **placement.next()).remote()
    assert ray.get(probe.node.remote()) == extra_id
    cluster.remove_node(extra)
    assert ray.get(probe.node.remote(), timeout=120) != extra_id


def test_an_actor_that_needs_a_gpu_is_not_pinned() -> None:
    first, second = "aa" * 28, "bb" * 28  # node ids: 28 bytes, in hex
    placement = NodeRoundRobin([first, second])
    assert placement.next(num_gpus=1)["scheduling_strategy"] == "SPREAD"
    pin = placement.next()["scheduling_strategy"]
    assert isinstance(pin, NodeAffinitySchedulingStrategy)
    assert pin.node_id == first, "a GPU actor does not take a node's turn"
