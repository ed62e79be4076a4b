"""The compose cluster as the tests drive it: ``docker compose`` on the repository's docker-compose.yml under
a project name of its own, with secrets and ports of its own, and the checks that need the engine itself.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from azr.executor.backends.docker_engine import LABEL, OWNER_LABEL

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
UP_TIMEOUT_S = 300
COMMAND_TIMEOUT_S = 120


def app_image_ref() -> str:
    """``azr-app:<hash>`` of this tree, computed by the same file the image recipe runs; AZR_APP_IMAGE
    names another image to test (one built from an earlier tree, or pulled)."""
    if os.environ.get("AZR_APP_IMAGE"):
        return os.environ["AZR_APP_IMAGE"]
    out = subprocess.run(
        ["python3", str(ROOT / "docker" / "app_image_tag.py")], capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def missing_prerequisite() -> str | None:
    """Why the cluster cannot be started here, or None: the tests skip with this reason."""
    if shutil.which("docker") is None:
        return "no docker CLI"
    if subprocess.run(["docker", "info"], capture_output=True, check=False).returncode != 0:
        return "the Docker engine is not reachable"
    version = subprocess.run(
        ["docker", "compose", "version", "--short"], capture_output=True, text=True, check=False
    )
    if version.returncode != 0 or not version.stdout.strip().lstrip("v").startswith("2."):
        return "Docker Compose v2 is not installed (make compose)"
    app = app_image_ref()
    labels = subprocess.run(
        ["docker", "image", "inspect", "-f", "{{json .Config.Labels}}", app],
        capture_output=True,
        text=True,
        check=False,
    )
    if labels.returncode != 0:
        return f"image {app} is not built for this tree (make images)"
    # The executor runs the sandbox image of the executor code inside the application image.
    sandbox = json.loads(labels.stdout).get("org.azr.sandbox.image", "")
    if subprocess.run(["docker", "image", "inspect", sandbox], capture_output=True, check=False).returncode:
        return f"sandbox image {sandbox!r} of {app} is missing (make images)"
    return None


@dataclass
class Cluster:
    """One compose project; ``up`` starts it, ``down`` removes it with its volumes."""

    project: str
    env_file: Path
    settings: dict[str, str]
    api_token: str = field(default_factory=lambda: secrets.token_hex(16))
    executor_hostname: str = ""

    @classmethod
    def create(cls, workdir: Path, project: str, settings: dict[str, str]) -> Cluster:
        env = {
            "AZR_APP_IMAGE": app_image_ref(),
            "RAY_AUTH_TOKEN": secrets.token_hex(32),
            "AZR_EXECUTOR_TOKEN": secrets.token_hex(32),
            "AZR_API_PORT": "0",  # an ephemeral host port: parallel runs never collide
            "AZR_RAY_DASHBOARD_PORT": "0",
            **settings,
        }
        cluster = cls(project=project, env_file=workdir / f"{project}.env", settings=env)
        env["AZR_API_TOKEN"] = cluster.api_token
        cluster.env_file.write_text("".join(f"{key}={value}\n" for key, value in env.items()))
        return cluster

    def compose(self, *args: str, timeout_s: float = COMMAND_TIMEOUT_S, check: bool = True) -> str:
        command = [
            *("docker", "compose", "-f", str(COMPOSE_FILE), "-p", self.project),
            *("--env-file", str(self.env_file), *args),
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
        if check and done.returncode != 0:
            raise AssertionError(
                f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
            )
        return done.stdout

    def up(self) -> None:
        self.compose("up", "-d", "--wait", "--wait-timeout", str(UP_TIMEOUT_S), timeout_s=UP_TIMEOUT_S + 60)
        self.executor_hostname = self.inspect("executor", "{{.Config.Hostname}}")

    def down(self) -> None:
        self.compose("down", "-v", "--remove-orphans", "--timeout", "60", timeout_s=180)

    def container_ids(self, service: str) -> list[str]:
        return self.compose("ps", "-q", "--all", service).split()

    def inspect(self, service: str, template: str) -> str:
        ids = self.container_ids(service)
        assert ids, f"no container of {service}"
        out = subprocess.run(
            ["docker", "inspect", "-f", template, ids[0]], capture_output=True, text=True, check=True
        )
        return out.stdout.strip()

    def logs(self, service: str = "") -> str:
        return self.compose(
            "logs", "--no-color", "--tail", "80", *([service] if service else []), check=False
        )

    def api_url(self) -> str:
        host_port = self.compose("port", "api", "8000").strip().rsplit(":", 1)[1]
        return f"http://127.0.0.1:{host_port}"

    def stats(self) -> dict[str, Any]:
        response = httpx.get(f"{self.api_url()}/v1/stats", timeout=10)
        response.raise_for_status()
        data: dict[str, Any] = response.json()
        return data

    def wait_for_step(self, step: int, timeout_s: float) -> dict[str, Any]:
        """The stats once the run's latest step is at least ``step``."""
        deadline = time.monotonic() + timeout_s
        stats: dict[str, Any] = {}
        while time.monotonic() < deadline:
            try:
                stats = self.stats()
            except httpx.HTTPError:
                stats = {}
            if stats.get("latest_step") is not None and stats["latest_step"] >= step:
                return stats
            time.sleep(2)
        raise AssertionError(
            f"no step {step} in {timeout_s} s (last stats: {stats}):\n{self.logs('learner')}"
        )

    def exec(self, service: str, *command: str) -> str:
        return self.compose("exec", "-T", service, *command)

    def ray_nodes_alive(self) -> int:
        script = "import ray; ray.init('auto'); print(sum(n['Alive'] for n in ray.nodes()))"
        return int(self.exec("ray-head", "python3", "-c", script).strip().splitlines()[-1])

    def stream_books(self) -> dict[str, int]:
        """The experience stream's bookkeeping, read in one transaction (a consistent snapshot) from the
        learner's container, which reaches Redis on the compose network."""
        script = (
            "import json, redis\n"
            "from azr.services.store.keys import Keys\n"
            "keys = Keys('azr')\n"
            "pipe = redis.Redis.from_url('redis://redis:6379/0').pipeline(transaction=True)\n"
            "pipe.hgetall(keys.counters()); pipe.zcard(keys.trained()); pipe.xlen(keys.experiences())\n"
            "counters, ledger, waiting = pipe.execute()\n"
            "c = {k.decode(): int(v) for k, v in counters.items()}\n"
            "print(json.dumps({'ledger': ledger, 'waiting': waiting, 'added': c.get('stream/added', 0),"
            " 'trained': c.get('stream/trained', 0), 'stale': c.get('stream/stale_dropped', 0)}))"
        )
        books: dict[str, int] = printed_json(self.exec("learner", "python3", "-c", script))
        return books

    def actor_nodes(self) -> dict[str, str]:
        """Class name -> node IP of the cluster's live actors (Ray's state API, asked on the head)."""
        script = (
            "import json, ray\n"
            "from ray.util.state import list_actors, list_nodes\n"
            "ray.init('auto')\n"
            "ips = {n.node_id: n.node_ip for n in list_nodes()}\n"
            "alive = list_actors(filters=[('state', '=', 'ALIVE')])\n"
            "print(json.dumps({a.class_name: ips.get(a.node_id, '') for a in alive}))"
        )
        placement: dict[str, str] = printed_json(self.exec("ray-head", "python3", "-c", script))
        return placement

    def leftovers(self) -> dict[str, list[str]]:
        """What of this project is still on the engine: containers, networks, volumes, sandboxes."""
        label = f"label=com.docker.compose.project={self.project}"
        found = {
            kind: _docker_ids(
                [kind, "ls", "-q", "--all", "--filter", label]
                if kind == "container"
                else [kind, "ls", "-q", "--filter", label]
            )
            for kind in ("container", "network", "volume")
        }
        sandboxes = _docker_ids(["ps", "-a", "--filter", f"label={LABEL}", "--format", "{{.ID}}"])
        found["sandbox"] = [
            cid
            for cid in sandboxes
            if self.executor_hostname and self._sandbox_owner(cid).startswith(self.executor_hostname)
        ]
        return {kind: ids for kind, ids in found.items() if ids}

    @staticmethod
    def _sandbox_owner(container_id: str) -> str:
        out = subprocess.run(
            ["docker", "inspect", "-f", "{{json .Config.Labels}}", container_id],
            capture_output=True,
            text=True,
            check=False,
        )
        labels: dict[str, str] = json.loads(out.stdout or "{}") or {}
        return labels.get(OWNER_LABEL, "")


def _docker_ids(args: list[str]) -> list[str]:
    out = subprocess.run(["docker", *args], capture_output=True, text=True, check=False)
    return out.stdout.split()


def printed_json(output: str) -> Any:
    """The last JSON object a script printed: Ray may print warnings (a lagging raylet's heartbeats) on the
    same stream, before or after it."""
    objects = [line for line in output.splitlines() if line.startswith("{")]
    if not objects:
        raise AssertionError(f"the script printed no JSON object:\n{output}")
    return json.loads(objects[-1])
