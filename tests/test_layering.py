"""The import rules of the package layout, checked on the source (a rule broken silently is a rule lost).

- ``azr.core`` (the vocabulary) imports nothing of ours; ``azr.core.task`` only the standard library.
- ``azr.executor`` imports only ``azr.core`` and the standard library (the Docker SDK, lazily, in the
  docker backend).
- ``azr.roles``, ``azr.proposer`` and ``azr.solver`` may import ``azr.executor`` and ``azr.core``, never
  torch, ray or redis.
- ``azr.trainer`` and ``azr.rollout`` import none of the executor or the roles: they see only experiences
  and prompts as token ids.
- ``azr.selfplay`` is the loop as plain code: everything above, never Ray, Redis or ``azr.services``.
- Nothing below ``azr.services`` imports ``azr.services``.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "azr"
HEAVY = {"torch", "ray", "redis", "transformers", "deepspeed", "vllm", "numpy", "fastapi"}
SERVICES = {"ray", "redis", "fastapi", "uvicorn"}
LIGHT = {"core", "executor", "roles", "proposer", "solver"}
"""Packages that never import a heavy dependency (``azr.core.experience`` may use numpy)."""

ALLOWED_OURS = {
    "core": {"core"},
    "executor": {"core", "executor"},
    "roles": {"core", "executor", "roles"},
    "proposer": {"core", "executor", "roles", "proposer"},
    "solver": {"core", "executor", "roles", "solver"},
    "trainer": {"core", "trainer"},
    "rollout": {"core", "trainer", "rollout"},
    "selfplay": {"core", "executor", "roles", "proposer", "solver", "rollout", "trainer", "selfplay"},
    "eval": {"core", "executor", "roles", "proposer", "solver", "rollout", "trainer", "selfplay", "eval"},
    "warmstart": {
        *("core", "executor", "roles", "proposer", "solver", "rollout", "trainer", "selfplay"),
        *("eval", "warmstart"),
    },
    "report": {"report"},
}


def _imports(path: Path) -> set[str]:
    """Every absolute module name imported by ``path``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("package", sorted(ALLOWED_OURS))
def test_package_imports_only_what_its_layer_allows(package: str) -> None:
    broken = []
    for path in sorted((PACKAGE / package).rglob("*.py")):
        for name in _imports(path):
            root, _, rest = name.partition(".")
            if root == "azr" and rest and rest.split(".")[0] not in ALLOWED_OURS[package]:
                broken.append(f"{path.relative_to(PACKAGE.parent)} imports {name}")
            numpy_ok = path.name == "experience.py" and root == "numpy"
            if package in LIGHT and root in HEAVY and not numpy_ok:
                broken.append(f"{path.relative_to(PACKAGE.parent)} imports heavy dependency {name}")
            if root in SERVICES:
                broken.append(f"{path.relative_to(PACKAGE.parent)} imports service dependency {name}")
    assert not broken, "layering rules broken:\n" + "\n".join(broken)


def test_executor_uses_only_the_standard_library() -> None:
    third_party = []
    paths = [*sorted((PACKAGE / "executor").rglob("*.py")), PACKAGE / "core" / "task.py"]
    for path in paths:
        for name in _imports(path):
            root = name.split(".")[0]
            if root in {"azr", "__future__"} or root in sys.stdlib_module_names:
                continue
            if root == "docker" and path.name.startswith("docker"):
                continue  # the docker backend's SDK, imported only when that backend is chosen
            third_party.append(f"{path.relative_to(PACKAGE.parent)} imports {name}")
    assert not third_party, "the executor must stay standard-library only:\n" + "\n".join(third_party)
