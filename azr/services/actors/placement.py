"""Where the run's actors go: each to the next live node of the cluster, in turn.

Ray places an actor that asks for no resources at all on a node of its own choosing, whatever its
scheduling strategy: with ``num_cpus=0`` and ``"SPREAD"``, all three actors of the compose cluster landed
on one of its three nodes in some runs. So every actor asks for a nominal CPU share (``NOMINAL_CPUS``),
which it does not hold back from anything, and is pinned to the next node in turn. The pin is soft: Ray
restarts an actor elsewhere when its node is gone, and starts it elsewhere when the node died so recently
that it was still listed alive.

Actors that need GPUs are not pinned: a pin to a node whose GPUs are all taken waits for them forever, and
Ray's resource-aware placement already finds them a node with a free GPU.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

log = logging.getLogger(__name__)

NOMINAL_CPUS = 0.01
"""The CPU share each actor asks for: enough for Ray to honour its placement, too little to matter."""
NODE_WAIT_S = 300.0
"""How long a run waits for the nodes it expects before it places its actors over the nodes it has."""
NODE_POLL_S = 1.0


class NodeRoundRobin:
    """Hands out soft node pins over ``nodes`` (Ray node ids, hex), one node after another."""

    def __init__(self, nodes: Sequence[str]) -> None:
        if not nodes:
            raise ValueError("a placement needs at least one node")
        self.nodes = list(nodes)
        self._next = 0

    @classmethod
    def of_cluster(cls, min_nodes: int = 1, wait_s: float = NODE_WAIT_S) -> NodeRoundRobin:
        """Over the connected cluster's live nodes, in a fixed order (by node id), once ``min_nodes`` of
        them are up; after ``wait_s`` without them, over those that are (an actor placed now never moves
        to a node that joins later)."""
        deadline = time.monotonic() + wait_s
        while len(nodes := _live_nodes()) < min_nodes and time.monotonic() < deadline:
            time.sleep(NODE_POLL_S)
        if len(nodes) < min_nodes:
            log.warning(
                "%d of the %d Ray nodes expected are up: placing the actors over them", len(nodes), min_nodes
            )
        return cls(nodes)

    def next(self, num_gpus: float = 0.0) -> dict[str, Any]:
        """The resource and scheduling options (``.options(**...)``) of the next actor, which needs
        ``num_gpus`` GPUs."""
        options: dict[str, Any] = {"num_cpus": NOMINAL_CPUS, "num_gpus": num_gpus}
        if num_gpus > 0:
            return options | {"scheduling_strategy": "SPREAD"}
        node = self.nodes[self._next % len(self.nodes)]
        self._next += 1
        return options | {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=node, soft=True)}


def _live_nodes() -> list[str]:
    return sorted(node["NodeID"] for node in ray.nodes() if node["Alive"])  # type: ignore[no-untyped-call]
