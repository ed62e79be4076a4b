"""Golden snapshots of rendered prompts.

A snapshot file starts with the template version it was written for. When the rendered text differs, the
test fails: if the wording change is meant, bump ``TEMPLATE_VERSION`` and rewrite the snapshots with
``AZR_UPDATE_GOLDEN=1``.
"""

from __future__ import annotations

import os
from pathlib import Path

from azr.roles.templates import TEMPLATE_VERSION


def check_golden(path: Path, text: str) -> None:
    expected = f"template-version: {TEMPLATE_VERSION}\n{text}\n"
    if os.environ.get("AZR_UPDATE_GOLDEN") == "1":
        path.write_text(expected, encoding="utf-8")
    stored = path.read_text(encoding="utf-8")
    stored_version = stored.split("\n", 1)[0]
    if stored != expected:
        hint = (
            "prompt wording changed: bump TEMPLATE_VERSION, then rerun with AZR_UPDATE_GOLDEN=1"
            if stored_version == f"template-version: {TEMPLATE_VERSION}"
            else "TEMPLATE_VERSION was bumped: rerun with AZR_UPDATE_GOLDEN=1 to rewrite the snapshot"
        )
        raise AssertionError(f"{path.name}: {hint}")
