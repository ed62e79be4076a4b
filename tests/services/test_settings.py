"""The settings root: presets, ``--set`` overrides, checks across sections, nothing secret on disk."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from azr.core.task import TaskType
from azr.services.settings import PRESETS, dump, merge, parse_overrides, resolve


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_resolves(preset: str) -> None:
    settings = resolve(preset, {})
    assert settings.stream.max_staleness == settings.selfplay.max_staleness


def test_overrides_are_dotted_paths_read_as_json_where_they_parse() -> None:
    overrides = parse_overrides(
        ["selfplay.batch_size=8", "trainer.lr=1e-5", "model=/models/x", 'ray.address="auto"']
    )
    assert overrides == {
        "selfplay": {"batch_size": 8},
        "trainer": {"lr": 1e-5},
        "model": "/models/x",
        "ray": {"address": "auto"},
    }
    settings = resolve("tiny", overrides)
    assert (settings.selfplay.batch_size, settings.trainer["lr"], settings.model) == (8, 1e-5, "/models/x")
    assert settings.selfplay.steps == PRESETS["tiny"]["selfplay"]["steps"], "the preset fills the rest"


@pytest.mark.parametrize("item", ["no-equals", "=3", "a..b=1"])
def test_a_malformed_override_says_how_to_write_one(item: str) -> None:
    with pytest.raises(ValueError, match=r"KEY\.PATH=VALUE"):
        parse_overrides([item])


def test_the_staleness_bound_is_set_once_and_the_stream_follows() -> None:
    assert resolve("tiny", {"selfplay": {"max_staleness": 0}}).stream.max_staleness == 0
    with pytest.raises(ValidationError, match=r"set selfplay\.max_staleness only"):
        resolve("tiny", {"selfplay": {"max_staleness": 0}, "stream": {"max_staleness": 2}})


def test_sections_are_checked_together_before_a_run_starts() -> None:
    with pytest.raises(ValidationError, match="temperature"):
        resolve("tiny", {"rollout": {"temperature": 0.7}})
    with pytest.raises(ValidationError, match="lr"):
        resolve("tiny", {"trainer": {"lr": -1}})
    with pytest.raises(ValidationError, match="model="):
        resolve("tiny", {"trainer": {"model": "x"}})
    with pytest.raises(ValueError, match="unknown preset"):
        resolve("huge", {})


def test_per_prompt_estimators_need_several_answers_per_task_and_no_proposer() -> None:
    grpo = parse_overrides(["trainer.algo.estimator=grpo"])
    with pytest.raises(ValidationError, match="the proposer would never learn"):
        resolve("tiny", merge(grpo, {"selfplay": {"solve_samples": 4}}))
    with pytest.raises(ValidationError, match=r"set selfplay\.solve_samples to 2 or more"):
        resolve("tiny", merge(grpo, {"selfplay": {"propose": False}}))
    settings = resolve("tiny", merge(grpo, {"selfplay": {"propose": False, "solve_samples": 4}}))
    assert (settings.selfplay.propose, settings.selfplay.solve_samples) == (False, 4)


def test_the_run_directory_never_holds_the_executor_token() -> None:
    settings = resolve("tiny", {"executor": {"url": "http://executor:8100", "token": "s3cret-token-value"}})
    assert settings.executor.token is not None
    saved = dump(settings)
    assert saved["executor"]["token"] is None
    assert "s3cret-token-value" not in str(saved)


def test_evaluation_suites_are_built_in_ones_each_named_once() -> None:
    overrides = parse_overrides(["selfplay.eval_every=5", "selfplay.eval_suites=zero-seed"])
    assert resolve("tiny", overrides).selfplay.eval_suites == ("zero-seed",), "one name needs no brackets"
    with pytest.raises(ValidationError, match=r"no built-in suite 'heldut': choose from heldout, zero-seed"):
        resolve("tiny", {"selfplay": {"eval_every": 5, "eval_suites": ["heldut"]}})
    with pytest.raises(ValidationError, match="heldout more than once"):
        resolve("tiny", {"selfplay": {"eval_suites": ["heldout", "heldout"]}})
    with pytest.raises(ValidationError, match="at least 1 item"):
        resolve("tiny", {"selfplay": {"eval_suites": []}})


def test_demonstration_types_are_task_types_each_named_once() -> None:
    overrides = parse_overrides(["selfplay.demonstrations=4", "selfplay.demonstration_types=deduction"])
    assert resolve("tiny", overrides).selfplay.demonstration_types == (TaskType.DEDUCTION,)
    with pytest.raises(ValidationError, match="demonstration_types names deduction more than once"):
        resolve("tiny", {"selfplay": {"demonstration_types": ["deduction", "deduction"]}})
    with pytest.raises(ValidationError, match="'deduction', 'abduction' or 'induction'"):
        resolve("tiny", {"selfplay": {"demonstration_types": ["riddle"]}})


def test_the_warm_start_takes_the_runs_prompts_and_refuses_unknown_fields() -> None:
    settings = resolve("tiny", {"roles": {"wording": "compact"}, "warm_start": {"steps": 7}})
    config = settings.warm_start_config()
    assert (config.roles, config.steps) == (settings.roles, 7)
    with pytest.raises(ValidationError, match="stepz"):
        resolve("tiny", {"warm_start": {"stepz": 7}})


def test_each_warm_start_recipe_is_cached_in_a_directory_of_its_own() -> None:
    """A run or ``azr pretrain`` with another recipe never replaces the tiny preset's build (15 minutes on
    2 cores), and finds its own again."""
    home = resolve("tiny", {}).warm_start_dir()
    assert home == resolve("tiny", {}).cache_dir / "models" / "tiny-warm"
    never_an_example = [{"roles": {"propose_reward": "constant"}}, {"executor": {"workers": 4}}]
    assert {resolve("tiny", o).warm_start_dir() for o in never_an_example} == {home}

    recipes = [
        {"warm_start": {"seed": 1}},
        {"warm_start": {"steps": 1}},
        {"roles": {"min_induction_inputs": 9}},
    ]
    others = [resolve("tiny", o).warm_start_dir() for o in recipes]
    assert len(set(others)) == 3 and home not in others
    assert all(d.parent == home.parent and d.name.startswith("tiny-warm-") for d in others)
    assert resolve("tiny", recipes[0]).warm_start_dir() == others[0]
