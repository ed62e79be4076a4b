"""``azr pretrain`` refuses settings it cannot build from, with the reason, before any work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_an_unknown_program_family_is_refused_with_the_families_named(tmp_path: Path) -> None:
    azr = Path(sys.executable).with_name("azr")
    command = [str(azr), "pretrain", "--out", str(tmp_path / "warm")]
    command += ["--set", "warm_start.family_weights.int_arithmetic=2"]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    output = " ".join(done.stdout.split())
    assert "no program family is named int_arithmetic; the families: int_arith, int_affine" in output
    assert not (tmp_path / "warm").exists()
