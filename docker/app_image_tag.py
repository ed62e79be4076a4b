"""The tag of the application image: a content hash of what the image is built from.

Shared by the image recipe (``docker/build-app-image.sh`` prints ``azr-app:<tag>`` from this file) and by
the compose tests, which look for the image under that tag and skip when it is missing, so that a test run
never rebuilds the image and a changed tree never runs stale code. Standard library only: the recipe runs
it with the system ``python3``.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

REPOSITORY = "azr-app"
RECIPE_VERSION = "1"
"""Raise when the recipe changes what the image holds in a way the hashed files do not show."""

ROOT = Path(__file__).resolve().parents[1]
RECIPE_FILES = (
    "pyproject.toml",
    "docker/app.Dockerfile",
    "docker/build-app-image.sh",
    "docker/debian-mirror.sh",
    "docker/app_image_tag.py",
)
SKIPPED_PARTS = frozenset({"__pycache__"})


def source_files(root: Path = ROOT) -> list[Path]:
    """Every file of the ``azr`` package (code and package data) and of the recipe, in a stable order."""
    package = [
        path
        for path in (root / "azr").rglob("*")
        if path.is_file() and not SKIPPED_PARTS.intersection(path.relative_to(root).parts)
    ]
    return sorted([*package, *(root / name for name in RECIPE_FILES)])


def image_tag(root: Path = ROOT, variant: str = "cpu") -> str:
    digest = hashlib.sha256(f"recipe {RECIPE_VERSION}\nvariant {variant}\n".encode())
    for path in source_files(root):
        data = path.read_bytes()
        digest.update(f"{path.relative_to(root).as_posix()}\n{len(data)}\n".encode())
        digest.update(data)
    return digest.hexdigest()[:16]


def image_ref(root: Path = ROOT, variant: str = "cpu") -> str:
    repository = REPOSITORY if variant == "cpu" else f"{REPOSITORY}-{variant}"
    return f"{repository}:{image_tag(root, variant)}"


if __name__ == "__main__":
    print(image_ref(variant=sys.argv[1] if len(sys.argv) > 1 else "cpu"))
