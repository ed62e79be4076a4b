"""docker-compose.yml as Compose v2 reads it (``docker compose config``), and the application image's tag.

Fast: no container starts. The file's promises are checked on the configuration Compose itself renders:
secrets without defaults, the Docker socket in the executor alone, healthchecks and healthy dependencies,
Redis with AOF on a volume, Ray's token authentication, one published API port.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.compose.cluster import COMPOSE_FILE, ROOT

# A standalone script of the image recipe (run with the system python3), loaded from its file.
_spec = importlib.util.spec_from_file_location("app_image_tag", ROOT / "docker" / "app_image_tag.py")
assert _spec is not None and _spec.loader is not None
app_image_tag = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(app_image_tag)

SECRETS = ("RAY_AUTH_TOKEN", "AZR_EXECUTOR_TOKEN", "AZR_API_TOKEN")
RAY_NODES = ("ray-head", "ray-worker", "learner")


def compose_v2_missing() -> bool:
    if shutil.which("docker") is None:
        return True
    done = subprocess.run(
        ["docker", "compose", "version", "--short"], capture_output=True, text=True, check=False
    )
    return done.returncode != 0 or not done.stdout.strip().lstrip("v").startswith("2.")


needs_compose = pytest.mark.skipif(compose_v2_missing(), reason="Docker Compose v2 is not installed")


def render(env_file: Path, *profiles: str) -> subprocess.CompletedProcess[str]:
    args = [arg for profile in profiles for arg in ("--profile", profile)]
    base = ["docker", "compose", "-f", str(COMPOSE_FILE), "--env-file", str(env_file)]
    return subprocess.run(
        [*base, *args, "config", "--format", "json"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )


def example_env(tmp_path: Path, **values: str) -> Path:
    text = (ROOT / ".env.example").read_text()
    lines = [f"{line}{values[line[:-1]]}" if line[:-1] in values else line for line in text.splitlines()]
    path = tmp_path / ".env"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if compose_v2_missing():
        pytest.skip("Docker Compose v2 is not installed")
    env = example_env(
        tmp_path_factory.mktemp("env"), **{name: f"{name.lower()}-0123456789" for name in SECRETS}
    )
    done = render(env, "gpu")
    assert done.returncode == 0, done.stderr
    rendered: dict[str, Any] = json.loads(done.stdout)
    return rendered


@needs_compose
@pytest.mark.parametrize("secret", SECRETS)
def test_each_secret_is_required(tmp_path: Path, secret: str) -> None:
    env = example_env(tmp_path, **{name: "x" * 32 for name in SECRETS if name != secret})
    done = render(env)
    assert done.returncode != 0
    assert secret in done.stderr


def test_only_the_executor_reaches_the_docker_engine(config: dict[str, Any]) -> None:
    with_socket = {
        name
        for name, service in config["services"].items()
        for volume in service.get("volumes", [])
        if volume.get("source") == "/var/run/docker.sock"
    }
    assert with_socket == {"executor"}
    assert not any(service.get("privileged") for service in config["services"].values())


def test_every_service_is_checked_and_started_after_what_it_needs(config: dict[str, Any]) -> None:
    services = config["services"]
    for name, service in services.items():
        assert service.get("healthcheck", {}).get("test"), f"{name} has no healthcheck"
        assert service.get("restart") in ("unless-stopped", "on-failure"), name
        assert service["deploy"]["resources"], f"{name} has no resource limits or reservations"
        for needed in service.get("depends_on", {}).values():
            assert needed["condition"] == "service_healthy", name
    assert set(services["learner"]["depends_on"]) == {"redis", "ray-head", "executor"}
    assert set(services["api"]["depends_on"]) == {"redis", "executor"}


def test_redis_persists_with_aof_on_a_volume(config: dict[str, Any]) -> None:
    redis = config["services"]["redis"]
    command = redis["command"]
    assert command[command.index("--appendonly") + 1] == "yes"
    assert command[command.index("--maxmemory-policy") + 1] == "noeviction"
    assert [(v["type"], v["target"]) for v in redis["volumes"]] == [("volume", "/data")]
    assert "ports" not in redis


def test_ray_nodes_share_a_token_and_the_run_volume(config: dict[str, Any]) -> None:
    services = config["services"]
    for name in (*RAY_NODES, "learner-gpu"):
        environment = services[name]["environment"]
        assert environment["RAY_AUTH_MODE"] == "token", name
        assert environment["RAY_AUTH_TOKEN"] == "ray_auth_token-0123456789", name
        assert {(v["source"], v["target"]) for v in services[name]["volumes"]} == {
            ("azr-data", "/var/lib/azr")
        }


def test_published_ports_are_the_api_and_rays_dashboard(config: dict[str, Any]) -> None:
    published = {
        (name, port["target"])
        for name, service in config["services"].items()
        for port in service.get("ports", [])
    }
    assert published == {("api", 8000), ("ray-head", 8265)}


def test_gpu_profile_reserves_gpus_and_is_off_by_default(tmp_path: Path, config: dict[str, Any]) -> None:
    devices = config["services"]["learner-gpu"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["capabilities"] == ["gpu"]
    env = example_env(tmp_path, **{name: "x" * 32 for name in SECRETS})
    default = json.loads(render(env).stdout)
    assert "learner-gpu" not in default["services"] and "learner" in default["services"]


def tree(root: Path) -> Path:
    (root / "azr" / "sub").mkdir(parents=True)
    (root / "azr" / "__init__.py").write_text("")
    (root / "azr" / "sub" / "mod.py").write_text("X = 1\n")
    (root / "docker").mkdir()
    for name in app_image_tag.RECIPE_FILES:
        (root / name).write_text(f"# {name}\n")
    return root


def test_image_tag_follows_the_code_and_the_recipe_not_the_caches(tmp_path: Path) -> None:
    root = tree(tmp_path)
    tag = app_image_tag.image_tag(root)
    (root / "azr" / "sub" / "__pycache__").mkdir()
    (root / "azr" / "sub" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"\0")
    assert app_image_tag.image_tag(root) == tag
    assert app_image_tag.image_tag(root, variant="gpu") != tag
    (root / "azr" / "sub" / "mod.py").write_text("X = 2\n")
    changed = app_image_tag.image_tag(root)
    assert changed != tag
    (root / "docker" / "app.Dockerfile").write_text("# changed\n")
    assert app_image_tag.image_tag(root) != changed
