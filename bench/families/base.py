"""What every program family shares: the draft it returns and helpers for names, values and text."""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["LIST_NAMES", "STR_NAMES", "Draft", "Family", "fill", "ints", "sentence", "word"]

InputMaker = Callable[[random.Random], str]


@dataclass(frozen=True, slots=True)
class Draft:
    """One drawn program, a way to draw argument-list texts for it, and a one-line description."""

    program: str
    make_input: InputMaker
    message: str


Family = Callable[[random.Random], Draft]

LIST_NAMES = ("nums", "values", "arr", "data", "xs", "items", "numbers", "seq")
STR_NAMES = ("s", "text", "word", "line", "msg", "sentence")
_WORD_TEXT = (
    "apple banana cherry delta echo fox golf hotel india juliet kilo lima mango nova oscar papa "
    "queen river sun tango umbrella violet whale xray yak zebra stack heap graph tree node edge"
)
_WORDS = tuple(_WORD_TEXT.split())


def fill(template: str, **params: object) -> str:
    """Substitute ``<<name>>`` placeholders (no brace escaping needed in program text)."""
    out = template.strip("\n")
    for key, value in params.items():
        out = out.replace(f"<<{key}>>", str(value))
    assert "<<" not in out, out
    return out + "\n"


def ints(rng: random.Random, lo: int = -20, hi: int = 50, n_lo: int = 0, n_hi: int = 9) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(rng.randint(n_lo, n_hi))]


def word(rng: random.Random, lo: int = 1, hi: int = 9) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(lo, hi)))


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 7)))
