"""Naming of the sandbox image, shared by the image recipe (``docker/build-sandbox-image.sh``) and the
Docker backend.

The tag is a content hash of the code the image carries (``azr/__init__.py`` and every ``.py`` file of
``azr.executor``) together with the recipe's version, so a checkout never runs a stale supervisor: when
the executor changes, the expected tag changes and the backend asks for a rebuild instead of running old
code.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

IMAGE_REPOSITORY = "azr-sandbox"
RECIPE_VERSION = "2"
"""Raise when docker/sandbox.Dockerfile or docker/build-sandbox-image.sh change what the image holds."""

_PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # .../azr


def image_tag(package_root: Path = _PACKAGE_ROOT) -> str:
    """The tag for the sandbox image built from the ``azr`` package at ``package_root``."""
    digest = hashlib.sha256(f"recipe {RECIPE_VERSION}\n".encode())
    files = [package_root / "__init__.py", *sorted((package_root / "executor").rglob("*.py"))]
    for path in files:
        data = path.read_bytes()
        digest.update(f"{path.relative_to(package_root).as_posix()}\n{len(data)}\n".encode())
        digest.update(data)
    return digest.hexdigest()[:16]


@functools.cache
def image_ref(package_root: Path = _PACKAGE_ROOT) -> str:
    """``repository:tag`` of the sandbox image matching this checkout, computed once per process, close
    to when the process imported the executor, so an edit of the tree while it runs does not change the
    image it asks for."""
    return f"{IMAGE_REPOSITORY}:{image_tag(package_root)}"


if __name__ == "__main__":
    print(image_ref())  # the image recipe reads this line
