"""The cached warm start: built once, reused for the same data and training, rebuilt when they change."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from transformers import AutoModelForCausalLM

from azr.roles.config import RolesConfig
from azr.warmstart.build import BASE_MODEL_DIR, build_warm_start
from azr.warmstart.config import WarmStartConfig


@pytest.fixture
def cache_dir(tmp_path: Path, tiny_model_dir: Path) -> Path:
    """A cache directory that already holds the session's tiny model (the build reuses it)."""
    shutil.copytree(tiny_model_dir, tmp_path / BASE_MODEL_DIR)
    return tmp_path


def test_the_warm_start_is_reused_unless_its_data_or_training_change(cache_dir: Path) -> None:
    roles = RolesConfig(wording="compact", max_prompt_tokens=2048)
    config = WarmStartConfig(tasks_per_type=6, steps=2, batch_size=2, roles=roles)

    first = build_warm_start(cache_dir, config)
    assert not first.reused and len(first.losses) == 2
    assert AutoModelForCausalLM.from_pretrained(str(first.directory)) is not None

    # The propose reward does not reach the model: the same warm start serves every arm of a comparison.
    constant = config.model_copy(update={"roles": roles.model_copy(update={"propose_reward": "constant"})})
    again = build_warm_start(cache_dir, constant)
    assert again.reused and again.fingerprint == first.fingerprint
    assert again.report is None, "the same recipe is recognised without drawing the data again"

    # The prompts' wording does: other examples, another model.
    full = config.model_copy(update={"roles": roles.model_copy(update={"wording": "full"})})
    assert build_warm_start(cache_dir, full, directory=cache_dir / "full").fingerprint != first.fingerprint
    assert not build_warm_start(cache_dir, config.model_copy(update={"steps": 3})).reused
