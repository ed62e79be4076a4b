"""``family_of`` names the family of every program the warm-start families write, and of no other; the
families' weights shape the draw and refuse what they cannot mean."""

from __future__ import annotations

import random
import re

import pytest
from pydantic import ValidationError

from azr.warmstart.config import WarmStartConfig
from azr.warmstart.programs import FAMILIES, FAMILY_NAMES, draw_tasks, family_of


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__.lstrip("_"))
def test_every_drawn_program_is_named_by_its_family(family) -> None:
    rng = random.Random(family.__name__)
    programs = {family(rng).program for _ in range(2_000)}
    assert {p: family_of(p) for p in programs} == {p: family.__name__.lstrip("_") for p in programs}


@pytest.mark.parametrize(
    "program",
    [
        "def f(x):\n    return x + y",  # a name the program does not take
        "def f(x):\n    return n * 2",  # another int name than its argument
        "def f(s):\n    return s.lower()",  # a method no family calls
        "def f(xs):\n    return sorted(xs, reverse=True)",
        "def f(a, b):\n    return a * b",
        "def f(x):\n    return x + 1\n",  # not the families' layout
        "def g(x):\n    return x",
    ],
)
def test_a_program_no_family_writes_has_none(program: str) -> None:
    assert family_of(program) is None


def test_weights_shape_the_draw_and_equal_weights_draw_the_default_stream() -> None:
    default = draw_tasks("warmstart", 60)
    assert draw_tasks("warmstart", 60, weights=dict.fromkeys(FAMILY_NAMES, 3.0)) == default

    only_arith = draw_tasks("warmstart", 60, weights=dict.fromkeys(FAMILY_NAMES, 0.0) | {"int_arith": 1.0})
    assert {family_of(t.program) for t in only_arith} == {"int_arith"}

    # int_arith weighs 8 of 16: about half the tasks, against a ninth in the default stream.
    weighted = draw_tasks("warmstart", 100, weights={"int_arith": 8.0})
    share = sum(family_of(t.program) == "int_arith" for t in weighted) / len(weighted)
    assert 0.4 < share < 0.6
    assert sum(family_of(t.program) == "int_arith" for t in default) / len(default) < 0.2


@pytest.mark.parametrize(
    ("weights", "reason"),
    [
        ({"int_arithmetic": 2.0}, "no program family is named int_arithmetic; the families: int_arith, "),
        ({"int_mod": -1.0}, "a family's weight must be a finite number, 0 or more: int_mod"),
        ({"int_mod": float("inf")}, "a family's weight must be a finite number, 0 or more: int_mod"),
        (dict.fromkeys(FAMILY_NAMES, 0.0), "every program family weighs 0"),
    ],
)
def test_weights_that_cannot_draw_are_refused_with_the_reason(weights: dict[str, float], reason: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(reason)):
        WarmStartConfig(family_weights=weights)
