"""When a run scores its policy: every ``eval_every`` steps and after the last one (the baseline, before
any step, is the driver's)."""

from __future__ import annotations

from azr.selfplay.config import SelfPlayConfig


def evaluated(config: SelfPlayConfig) -> list[int]:
    return [step for step in range(config.steps) if config.evaluates_after(step)]


def test_every_nth_step_and_the_last_one() -> None:
    assert evaluated(SelfPlayConfig(steps=7, eval_every=3)) == [2, 5, 6]
    assert evaluated(SelfPlayConfig(steps=6, eval_every=3)) == [2, 5]
    assert evaluated(SelfPlayConfig(steps=6, eval_every=1)) == [0, 1, 2, 3, 4, 5]
    assert evaluated(SelfPlayConfig(steps=4, eval_every=10)) == [3]


def test_off_by_default() -> None:
    assert evaluated(SelfPlayConfig(steps=7)) == []
