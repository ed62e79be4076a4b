"""Program families of the warm start: small, parametrised programs the project writes itself.

No human-written task, answer or text corpus is used anywhere: a family is a template whose constants,
argument names and style are drawn from a seeded ``random.Random``, and its inputs are random integers,
random lowercase strings and lists of them. The executor computes every output. The programs are kept
small on purpose: the tiny model has a few million parameters and a CPU budget of minutes, and the warm
start must only teach it the formats and a start, leaving room for self-play to improve on.

Streams: ``draw_tasks(label, ...)`` seeds its generator from the label, so the warm start ("warmstart")
and the held-out suite ("heldout") draw from separate streams; the warm start additionally drops any task
that coincides with a held-out one (``azr.warmstart.data``).
"""

from __future__ import annotations

import functools
import math
import random
import re
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from azr.core.task import Origin, Task, TaskType
from azr.executor.values import canonical_args, parse_args

__all__ = [
    "FAMILIES",
    "FAMILY_NAMES",
    "INDUCTION_INPUTS",
    "Draft",
    "draw_task",
    "draw_tasks",
    "family_of",
    "family_weights",
]

INDUCTION_INPUTS = 10
"""Inputs of an induction task, as the paper and ``RolesConfig`` defaults ask (half shown, half judged)."""
_INT_NAMES = ("x", "n", "a", "k", "v")
_STR_NAMES = ("s", "text", "w")
_LIST_NAMES = ("xs", "nums", "items")


@dataclass(frozen=True, slots=True)
class Draft:
    """One drawn program, how to draw an argument-list text for it, and what it does in a few words."""

    program: str
    make_input: Callable[[random.Random], str]
    message: str


def _small_int(rng: random.Random) -> str:
    return str(rng.randint(-9, 20))


def _word(rng: random.Random) -> str:
    return repr("".join(rng.choice(string.ascii_lowercase[:12]) for _ in range(rng.randint(1, 5))))


def _int_list(rng: random.Random) -> str:
    return repr([rng.randint(0, 9) for _ in range(rng.randint(1, 5))])


def _two_ints(rng: random.Random) -> str:
    return f"{_small_int(rng)}, {_small_int(rng)}"


def _def(name: str, body: str, *args: str) -> str:
    return f"def f({', '.join(args) if args else name}):\n    return {body}"


def _int_arith(rng: random.Random) -> Draft:
    x, k = rng.choice(_INT_NAMES), rng.randint(1, 9)
    op, word = rng.choice([("+", "adds"), ("-", "subtracts"), ("*", "multiplies by")])
    return Draft(_def(x, f"{x} {op} {k}"), _small_int, f"{word} {k}")


def _int_affine(rng: random.Random) -> Draft:
    x, a, b = rng.choice(_INT_NAMES), rng.randint(2, 4), rng.randint(1, 9)
    return Draft(_def(x, f"{a} * {x} + {b}"), _small_int, f"times {a} plus {b}")


def _int_unary(rng: random.Random) -> Draft:
    x = rng.choice(_INT_NAMES)
    body, message = rng.choice(
        [
            (x, "returns the number"),
            (f"abs({x})", "absolute value"),
            (f"{x} * {x}", "square"),
            (f"-{x}", "negates"),
        ]
    )
    return Draft(_def(x, body), _small_int, message)


def _int_mod(rng: random.Random) -> Draft:
    x, m = rng.choice(_INT_NAMES), rng.randint(2, 7)
    body, message = rng.choice(
        [(f"{x} % {m}", f"remainder mod {m}"), (f"{x} % {m} == 0", f"divisible by {m}")]
    )
    return Draft(_def(x, body), _small_int, message)


def _int_pair(rng: random.Random) -> Draft:
    body, message = rng.choice(
        [("max(a, b)", "larger"), ("min(a, b)", "smaller"), ("a + b", "sum"), ("a - b", "difference")]
    )
    return Draft(_def("", body, "a", "b"), _two_ints, message)


def _str_method(rng: random.Random) -> Draft:
    s = rng.choice(_STR_NAMES)
    body, message = rng.choice(
        [
            (f"{s}.upper()", "upper case"),
            (f"{s}[::-1]", "reversed"),
            (f"len({s})", "length"),
            (f"{s}[0]", "first letter"),
            (f"{s}[-1]", "last letter"),
            (s, "returns the text"),
        ]
    )
    return Draft(_def(s, body), _word, message)


def _str_const(rng: random.Random) -> Draft:
    s, c = rng.choice(_STR_NAMES), rng.choice(string.ascii_lowercase[:12])
    body, message = rng.choice(
        [
            (f"{s} + '{c}'", f"appends {c}"),
            (f"'{c}' + {s}", f"prepends {c}"),
            (f"{s}.count('{c}')", f"counts {c}"),
            (f"{s} * {rng.randint(2, 3)}", "repeats"),
        ]
    )
    return Draft(_def(s, body), _word, message)


def _list_reduce(rng: random.Random) -> Draft:
    xs = rng.choice(_LIST_NAMES)
    body, message = rng.choice(
        [
            (f"sum({xs})", "sum"),
            (f"len({xs})", "length"),
            (f"max({xs})", "largest"),
            (f"min({xs})", "smallest"),
            (f"{xs}[0]", "first item"),
            (f"{xs}[-1]", "last item"),
        ]
    )
    return Draft(_def(xs, body), _int_list, message)


def _list_map(rng: random.Random) -> Draft:
    xs, k = rng.choice(_LIST_NAMES), rng.randint(1, 5)
    body, message = rng.choice(
        [
            (f"sorted({xs})", "sorted"),
            (f"{xs}[::-1]", "reversed"),
            (f"[v + {k} for v in {xs}]", f"adds {k} to each"),
            (f"[v * {k} for v in {xs}]", f"multiplies each by {k}"),
            (f"[v for v in {xs} if v > {k}]", f"keeps items above {k}"),
            (f"{xs} + [{k}]", f"appends {k}"),
        ]
    )
    return Draft(_def(xs, body), _int_list, message)


FAMILIES: tuple[Callable[[random.Random], Draft], ...] = (
    _int_arith,
    _int_affine,
    _int_unary,
    _int_mod,
    _int_pair,
    _str_method,
    _str_const,
    _list_reduce,
    _list_map,
)
"""Every family; drawn uniformly unless weighted (``family_weights``)."""
FAMILY_NAMES: tuple[str, ...] = tuple(family.__name__.removeprefix("_") for family in FAMILIES)
"""Each family's name, in the order of ``FAMILIES``: ``int_arith`` for ``_int_arith``."""

# What each family writes: its arguments, and its bodies with ``{x}`` for the argument, ``<d>`` for a digit
# and ``<c>`` for a letter. ``family_of`` reads a program back to its family with these.
_SHAPES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "int_arith": (_INT_NAMES, ("{x} + <d>", "{x} - <d>", "{x} * <d>")),
    "int_affine": (_INT_NAMES, ("<d> * {x} + <d>",)),
    "int_unary": (_INT_NAMES, ("{x}", "abs({x})", "{x} * {x}", "-{x}")),
    "int_mod": (_INT_NAMES, ("{x} % <d>", "{x} % <d> == 0")),
    "int_pair": (("a, b",), ("max(a, b)", "min(a, b)", "a + b", "a - b")),
    "str_method": (_STR_NAMES, ("{x}.upper()", "{x}[::-1]", "len({x})", "{x}[0]", "{x}[-1]", "{x}")),
    "str_const": (_STR_NAMES, ("{x} + '<c>'", "'<c>' + {x}", "{x}.count('<c>')", "{x} * <d>")),
    "list_reduce": (_LIST_NAMES, ("sum({x})", "len({x})", "max({x})", "min({x})", "{x}[0]", "{x}[-1]")),
    "list_map": (
        _LIST_NAMES,
        (
            "sorted({x})",
            "{x}[::-1]",
            "[v + <d> for v in {x}]",
            "[v * <d> for v in {x}]",
            "[v for v in {x} if v > <d>]",
            "{x} + [<d>]",
        ),
    ),
}


@functools.cache
def _patterns() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """Each family's programs as one pattern, compiled on first use rather than when a run imports this."""

    def pattern(args: tuple[str, ...], bodies: tuple[str, ...]) -> re.Pattern[str]:
        programs = (re.escape(_def(arg, body.format(x=arg))) for arg in args for body in bodies)
        return re.compile("|".join(programs).replace("<d>", r"\d").replace("<c>", "[a-z]"))

    return tuple((name, pattern(*shape)) for name, shape in _SHAPES.items())


def family_of(program: str) -> str | None:
    """The name of the family that wrote ``program`` (``"int_affine"`` for ``2 * x + 7``, as the
    generators are named), or None for a program no family writes: held-out scores read by family."""
    return next((name for name, shape in _patterns() if shape.fullmatch(program)), None)


def family_weights(weights: Mapping[str, float]) -> tuple[float, ...] | None:
    """Each family's weight in the order of ``FAMILIES`` (a family ``weights`` does not name weighs 1), or
    None when every family weighs the same: the uniform draw, whose stream the default warm start is."""
    if unknown := sorted(set(weights) - set(FAMILY_NAMES)):
        raise ValueError(
            f"no program family is named {', '.join(unknown)}; the families: {', '.join(FAMILY_NAMES)}"
        )
    if bad := sorted(name for name, weight in weights.items() if not 0 <= weight < math.inf):
        raise ValueError(f"a family's weight must be a finite number, 0 or more: {', '.join(bad)}")
    resolved = tuple(float(weights.get(name, 1.0)) for name in FAMILY_NAMES)
    if not any(resolved):
        raise ValueError("every program family weighs 0: at least one must weigh more")
    return None if len(set(resolved)) == 1 else resolved


def draw_task(rng: random.Random, task_type: TaskType, weights: Sequence[float] | None = None) -> Task | None:
    """One unlabelled task of ``task_type`` (inputs only) from a family drawn uniformly or with
    ``weights`` (one per family, as ``family_weights`` gives them), or None when the draw had too few
    distinct inputs for induction."""
    family = rng.choice(FAMILIES) if weights is None else rng.choices(FAMILIES, weights)[0]
    draft = family(rng)
    wanted = INDUCTION_INPUTS if task_type is TaskType.INDUCTION else 1
    inputs: list[str] = []
    for _ in range(20 * wanted):
        text = canonical_args(parse_args(draft.make_input(rng)))
        if text not in inputs:
            inputs.append(text)
        if len(inputs) == wanted:
            break
    if len(inputs) < wanted:
        return None
    return Task(
        type=task_type,
        program=draft.program,
        inputs=tuple(inputs),
        message=draft.message if task_type is TaskType.INDUCTION else "",
        origin=Origin.USER,
    )


def draw_tasks(
    label: str, per_type: int, *, seed: int = 0, weights: Mapping[str, float] | None = None
) -> list[Task]:
    """``per_type`` distinct tasks of each type, the types in turn, reproducible from ``(label, seed)``
    and the families' ``weights`` (by name; see ``family_weights``)."""
    resolved = family_weights(weights or {})
    rng = random.Random(f"{label}/{seed}")
    out: list[Task] = []
    seen: set[str] = set()
    types = tuple(TaskType)
    for _ in range(100 * per_type * len(types) + 100):
        if len(out) == per_type * len(types):
            return out
        task = draw_task(rng, types[len(out) % len(types)], resolved)
        if task is not None and task.id not in seen:
            seen.add(task.id)
            out.append(task)
    raise RuntimeError(f"the families yield only {len(out)} distinct tasks for {label!r}; ask for fewer")
