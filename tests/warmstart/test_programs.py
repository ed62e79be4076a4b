"""``family_of`` names the family of every program the warm-start families write, and of no other."""

from __future__ import annotations

import random

import pytest

from azr.warmstart.programs import FAMILIES, family_of


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
