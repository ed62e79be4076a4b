"""The cached warm start: built once, reused for the same data and training, rebuilt when they change."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest
from transformers import AutoModelForCausalLM

from azr.core.task import Role, TaskType
from azr.roles.config import RolesConfig
from azr.trainer.tiny import BASE_DIR
from azr.warmstart.build import TASKS_FILE, build_warm_start, draw_examples, warm_start_tasks
from azr.warmstart.config import WarmStartConfig


@pytest.fixture
def cache_dir(tmp_path: Path, tiny_model_dir: Path) -> Path:
    """A cache directory that already holds the session's tiny model (the build reuses it)."""
    shutil.copytree(tiny_model_dir, tmp_path / BASE_DIR)
    return tmp_path


def test_the_warm_start_is_reused_unless_its_data_or_training_change(cache_dir: Path) -> None:
    roles = RolesConfig(wording="compact", max_prompt_tokens=2048)
    config = WarmStartConfig(tasks_per_type=6, steps=2, batch_size=2, roles=roles)

    home = cache_dir / "warm"
    first = build_warm_start(cache_dir, config, directory=home)
    assert not first.reused and len(first.losses) == 2
    assert AutoModelForCausalLM.from_pretrained(str(first.directory)) is not None

    # The propose reward does not reach the model: the same warm start serves every arm of a comparison.
    constant = config.model_copy(update={"roles": roles.model_copy(update={"propose_reward": "constant"})})
    again = build_warm_start(cache_dir, constant, directory=home)
    assert again.reused and again.fingerprint == first.fingerprint
    assert again.report is None, "the same recipe is recognised without drawing the data again"

    # The families' weights do where they change the draw; weighing every family the same is the default.
    assert (
        build_warm_start(
            cache_dir, config.model_copy(update={"family_weights": {"int_mod": 1}}), directory=home
        ).report
        is None
    )
    weighted = config.model_copy(update={"family_weights": {"int_mod": 4}})
    assert not build_warm_start(cache_dir, weighted, directory=cache_dir / "weighted").reused

    # The prompts' wording does: other examples, another model.
    full = config.model_copy(update={"roles": roles.model_copy(update={"wording": "full"})})
    assert build_warm_start(cache_dir, full, directory=cache_dir / "full").fingerprint != first.fingerprint
    assert not build_warm_start(cache_dir, config.model_copy(update={"steps": 3}), directory=home).reused


def test_the_warm_start_lists_the_tasks_it_was_taught_to_solve(cache_dir: Path) -> None:
    config = WarmStartConfig(tasks_per_type=6, steps=1, batch_size=2, roles=RolesConfig(wording="compact"))
    solved = {e.task.id for e in draw_examples(config)[0] if e.role is Role.SOLVE}
    home = cache_dir / "warm"
    built = build_warm_start(cache_dir, config, directory=home)

    taught = warm_start_tasks(built.directory, 2)
    assert Counter(t.type for t in taught) == dict.fromkeys(TaskType, 2)
    assert {t.id for t in taught} <= solved
    assert all(t.outputs == () for t in taught), "the run's executor computes the gold outputs again"
    assert len(warm_start_tasks(built.directory, 100)) == len(solved), "fewer where it has fewer"

    # A warm start cached before the list existed gets it without training again.
    (built.directory / TASKS_FILE).unlink()
    again = build_warm_start(cache_dir, config, directory=home)
    assert again.reused and again.report is not None
    assert warm_start_tasks(again.directory, 2) == taught
