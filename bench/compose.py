"""The compose cluster's start-up: from ``docker compose up`` to healthy services and to the first steps.

    python -m bench.compose [--steps 3]

Starts the repository's docker-compose.yml under a project name of its own (the images must be built:
``make images``), with the smaller tiny run the cluster tests use, and times: every healthcheck passing
(``up --wait``), the first seed accepted by the API, and the first and second training steps seen in
``/v1/stats``. Then ``down -v``. Prints a table and writes bench/results/compose.json.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

from tests.compose.cluster import Cluster, missing_prerequisite
from tests.compose.conftest import SMALL_RUN

RESULTS = Path(__file__).parent / "results" / "compose.json"
STEP_TIMEOUT_S = 600
SEED = {"type": "deduction", "program": "def f(x):\n    return x + 2", "inputs": ["5"]}


def measure(steps: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as workdir:
        cluster = Cluster.create(
            Path(workdir),
            project=f"azr-bench-{os.getpid()}",
            settings={"AZR_STEPS": str(steps), "AZR_SELFPLAY_ARGS": SMALL_RUN},
        )
        started = time.monotonic()
        try:
            cluster.up()
            healthy_s = time.monotonic() - started
            response = httpx.post(
                f"{cluster.api_url()}/v1/seeds",
                json=SEED,
                headers={"Authorization": f"Bearer {cluster.api_token}"},
                timeout=60,
            )
            response.raise_for_status()
            seed_s = time.monotonic() - started
            cluster.wait_for_step(0, STEP_TIMEOUT_S)
            first_step_s = time.monotonic() - started
            cluster.wait_for_step(1, STEP_TIMEOUT_S)
            second_step_s = time.monotonic() - started
        finally:
            down_started = time.monotonic()
            cluster.down()
            down_s = time.monotonic() - down_started
    return {
        "up_to_healthy_s": healthy_s,
        "up_to_seed_accepted_s": seed_s,
        "up_to_first_step_s": first_step_s,
        "up_to_second_step_s": second_step_s,
        "down_s": down_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--steps", type=int, default=3, help="Steps of the run (at least 2).")
    args = parser.parse_args()
    reason = missing_prerequisite()
    if reason is not None:
        raise SystemExit(f"cannot start the cluster: {reason}")
    result = measure(max(args.steps, 2))
    table = Table(title="docker compose: tiny run, 3 Ray nodes")
    table.add_column("phase")
    table.add_column("seconds", justify="right")
    for key, value in result.items():
        table.add_row(key.removesuffix("_s").replace("_", " "), f"{value:.1f}")
    Console().print(table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"cpus": os.cpu_count(), **result}, indent=2) + "\n")


if __name__ == "__main__":
    main()
