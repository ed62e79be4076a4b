"""Literal values: parsing, canonical text and type-strict comparison, including hostile inputs."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from azr.core.task import ZERO_SEED
from azr.executor.errors import ErrorCode
from azr.executor.values import (
    DEFAULT_LIMITS,
    ValueLimits,
    ValueRejectedError,
    canonical,
    canonical_args,
    parse_args,
    parse_value,
    values_equal,
)

# ------------------------------------------------------------------------------------------ strategies

_hashable_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.binary(max_size=12)
)
_hashables = st.recursive(
    _hashable_scalars, lambda inner: st.tuples(inner, inner) | st.tuples(inner), max_leaves=6
)
values = st.recursive(
    _hashable_scalars,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.lists(inner, max_size=5).map(tuple)
        | st.sets(_hashables, max_size=5)
        | st.dictionaries(_hashables, inner, max_size=5)
    ),
    max_leaves=25,
)
_settings = settings(max_examples=200, deadline=None)


def _code(exc: pytest.ExceptionInfo[ValueRejectedError]) -> ErrorCode:
    return exc.value.error.code


# ---------------------------------------------------------------------------------------- hand cases


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "None"),
        (True, "True"),
        (False, "False"),
        (0, "0"),
        (-17, "-17"),
        (10**30, "1" + "0" * 30),
        (0.1, "0.1"),
        (-0.0, "-0.0"),
        (1e16, "1e+16"),
        (2.5e-8, "2.5e-08"),
        ("it's", '"it\'s"'),
        ("a\nb", "'a\\nb'"),
        ("", "''"),
        (b"\x00a", "b'\\x00a'"),
        ([], "[]"),
        ([1, [2, "x"]], "[1, [2, 'x']]"),
        ((), "()"),
        ((1,), "(1,)"),
        ((1, 2.0), "(1, 2.0)"),
        (set(), "set()"),
        ({3, 1, 2}, "{1, 2, 3}"),
        ({"b", "a", "c"}, "{'a', 'b', 'c'}"),
        ({(2, "b"), (1, "a")}, "{(1, 'a'), (2, 'b')}"),
        ({}, "{}"),
        ({"b": 1, "a": [True, None]}, "{'a': [True, None], 'b': 1}"),
        ({2: "x", 10: "y"}, "{10: 'y', 2: 'x'}"),  # sorted by canonical text, not by value
        ({True: 1, None: 2}, "{None: 2, True: 1}"),
    ],
)
def test_canonical_hand_cases(value: object, text: str) -> None:
    assert canonical(value) == text
    assert canonical(parse_value(text)) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("  [1,2 ,3]  ", "[1, 2, 3]"),
        ("{'b':2,'a':1}", "{'a': 1, 'b': 2}"),
        ("{3,1,1,2}", "{1, 2, 3}"),  # exact repeats collapse, as in Python
        ('"x"', "'x'"),
        ("'a' 'b'", "'ab'"),
        ("1, 2", "(1, 2)"),
        ("-5", "-5"),
        ("+5", "5"),
        ("-2.50", "-2.5"),
        ("0x10", "16"),
        ("1_000", "1000"),
        ("1e3", "1000.0"),
        ("set()", "set()"),
        ("{1: {2: set()}}", "{1: {2: set()}}"),
    ],
)
def test_parse_value_normalises(text: str, expected: str) -> None:
    assert canonical(parse_value(text)) == expected


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("", ErrorCode.BAD_ANSWER),
        ("x", ErrorCode.BAD_ANSWER),
        ("f(1)", ErrorCode.BAD_ANSWER),
        ("frozenset()", ErrorCode.BAD_ANSWER),
        ("set([1])", ErrorCode.BAD_ANSWER),
        ("[*a]", ErrorCode.BAD_ANSWER),
        ("{**a}", ErrorCode.BAD_ANSWER),
        ("1 + 2", ErrorCode.BAD_ANSWER),
        ("--1", ErrorCode.BAD_ANSWER),
        ("-True", ErrorCode.BAD_ANSWER),
        ("-'a'", ErrorCode.BAD_ANSWER),
        ("f'{1}'", ErrorCode.BAD_ANSWER),
        ("[1, 2][0]", ErrorCode.BAD_ANSWER),
        ("{[1]: 2}", ErrorCode.BAD_ANSWER),
        ("{(1, [2])}", ErrorCode.BAD_ANSWER),
        ("{1, True}", ErrorCode.BAD_ANSWER),  # Python would silently drop one of them
        ("{0.0: 'a', -0.0: 'b'}", ErrorCode.BAD_ANSWER),
        ("1 if 1 else 2", ErrorCode.BAD_ANSWER),
        ("lambda: 1", ErrorCode.BAD_ANSWER),
        ("a\x00", ErrorCode.BAD_ANSWER),
        ("...", ErrorCode.UNSUPPORTED_VALUE),
        ("1j", ErrorCode.UNSUPPORTED_VALUE),
        ("1e999", ErrorCode.UNSUPPORTED_VALUE),
        ("-1e999", ErrorCode.UNSUPPORTED_VALUE),
        ("[1e999]", ErrorCode.UNSUPPORTED_VALUE),
    ],
)
def test_parse_value_rejects(text: str, code: ErrorCode) -> None:
    with pytest.raises(ValueRejectedError) as exc:
        parse_value(text)
    assert _code(exc) == code


def test_parse_value_rejects_non_str() -> None:
    with pytest.raises(ValueRejectedError) as exc:
        parse_value(b"1")  # type: ignore[arg-type]
    assert _code(exc) == ErrorCode.BAD_ANSWER


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("[1, 2], 3", ([1, 2], 3)),
        ("(1, 2)", ((1, 2),)),  # one tuple argument
        ("1, 2", (1, 2)),  # two arguments
        ("'Hello world'", ("Hello world",)),
        ("1,", (1,)),
        ("  {'a': 1}  ,  set() ", ({"a": 1}, set())),
        ("1 # a comment", (1,)),
        ("[\n1,\n2\n]", ([1, 2],)),
    ],
)
def test_parse_args(text: str, args: tuple[object, ...]) -> None:
    parsed = parse_args(text)
    assert values_equal(parsed, args)
    assert parse_args(canonical_args(parsed)) == parsed


# Texts that try to escape the argument list (defect 2 of the reference code pasted answers into code).
INJECTIONS = [
    "[9]) or True or (0",
    "[9]) if True else (0",
    "0) or (1",
    "1) + f(2",
    "1)(2",
    "1)[0](2",
    "1); import os; (2",
    "1\n)\n(2",
    "__import__('os').system('true')",
    "x",
    "*[1, 2]",
    "**{'a': 1}",
    "a=1",
    "1, key=2",
    "lambda: 0",
    "(yield)",
    "1 for x in [1]",
    "f'{1}'",
    "[1, 2][0]",
    "1 + 1",
    "'a'.upper()",
    "# )",
    "",
    "1,,2",
    "(1",
    "1)",
    "...",
]


@pytest.mark.parametrize("text", INJECTIONS)
def test_parse_args_refuses_injection(text: str) -> None:
    with pytest.raises(ValueRejectedError) as exc:
        parse_args(text)
    assert _code(exc) in {ErrorCode.BAD_ANSWER, ErrorCode.UNSUPPORTED_VALUE}


def test_canonical_args() -> None:
    assert canonical_args(([1, 2], 3)) == "[1, 2], 3"
    assert canonical_args(((1, 2),)) == "(1, 2)"
    assert canonical_args(("a", {2, 1})) == "'a', {1, 2}"
    for bad in ((), [1]):
        with pytest.raises(ValueRejectedError) as exc:
            canonical_args(bad)  # type: ignore[arg-type]
        assert _code(exc) == ErrorCode.UNSUPPORTED_VALUE


def test_zero_seed_output_is_canonical() -> None:
    (args,) = (parse_args(text) for text in ZERO_SEED.inputs)
    assert ZERO_SEED.outputs == (canonical(args[0]),) == (canonical("Hello world"),)


# ---------------------------------------------------------------------------------------- equality


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        (None, None, True),
        (True, 1, False),
        (False, 0, False),
        (1, 1.0, False),
        ([1], (1,), False),
        ("a", b"a", False),
        (set(), {}, False),
        ((), [], False),
        (0.1 + 0.2, 0.3, True),
        (1.0, 1.0 + 1e-6, False),
        (1e20, 1e20 * (1 + 1e-12), True),
        (0.0, -0.0, True),
        (0.0, 1e-13, False),  # purely relative: no absolute slack near zero
        (1e-300, 1e-285, False),  # an answer 1e15 times a tiny gold value is wrong
        (1e-300, 1e-300 * (1 + 1e-12), True),
        ({-0.0: 1}, {0.0: 1}, True),  # one key for Python
        ({(-0.0, "a")}, {(0.0, "a")}, True),
        ({-0.0: 1}, {0.0: 2}, False),
        # 1 + 7.5e-10 is close to both elements, 1 - 7.5e-10 only to 1.0: a greedy pairing may fail
        ({1.0 + 7.5e-10, 1.0 - 7.5e-10}, {1.0, 1.0 + 1.5e-9}, True),
        ({1.0 - 7.5e-10, 1.0 + 7.5e-10}, {1.0 + 1.5e-9, 1.0}, True),
        ({1.0, 2.0}, {1.0, 3.0}, False),
        (0.0, 1e-9, False),
        ([0.1 + 0.2, "x"], [0.3, "x"], True),
        ({"a": 0.1 + 0.2}, {"a": 0.3}, True),
        ({0.1 + 0.2, 5.0}, {0.3, 5.0}, True),
        ({0.1 + 0.2, 5.0}, {0.3, 6.0}, False),
        ({1: "a"}, {True: "a"}, False),
        ({1: "a"}, {1: "a", 2: "b"}, False),
        ({1, 2}, {2, 1}, True),
        ({(1, "a"), (2, "b")}, {(2, "b"), (1, "a")}, True),
        ([[1, [2]]], [[1, [2]]], True),
        ([[1, [2]]], [[1, [3]]], False),
        ({"k": [1, {2}]}, {"k": [1, {2}]}, True),
    ],
)
def test_values_equal_hand_cases(a: object, b: object, equal: bool) -> None:
    assert values_equal(a, b) is equal
    assert values_equal(b, a) is equal


def test_values_equal_stated_tolerance() -> None:
    exact = ValueLimits(float_rel_tol=0.0, float_abs_tol=0.0)
    assert not values_equal(0.1 + 0.2, 0.3, exact)
    assert values_equal(0.1 + 0.2, 0.3, DEFAULT_LIMITS)


# ------------------------------------------------------------------------------------------ properties


@_settings
@given(values)
def test_canonical_round_trips(value: object) -> None:
    text = canonical(value)
    parsed = parse_value(text)
    assert canonical(parsed) == text
    assert values_equal(parsed, value)


@_settings
@given(st.text(max_size=40))
def test_canonical_of_parsed_text_is_idempotent(text: str) -> None:
    try:
        once = canonical(parse_value(text))
    except ValueRejectedError:
        return
    assert canonical(parse_value(once)) == once


@_settings
@given(st.lists(values, min_size=1, max_size=4).map(tuple))
def test_canonical_args_round_trips(args: tuple[object, ...]) -> None:
    text = canonical_args(args)
    parsed = parse_args(text)
    assert len(parsed) == len(args)
    assert canonical_args(parsed) == text


@_settings
@given(st.lists(_hashables, max_size=8), st.lists(values, max_size=8), st.randoms(use_true_random=False))
def test_sets_and_dicts_are_order_free(members: list[object], vals: list[object], rnd: random.Random) -> None:
    # Python itself keeps whichever of 1 and True (or 0.0 and -0.0) comes first; leave such pairs out.
    assume(len(set(members)) == len({canonical(m) for m in members}))
    items = list(zip(members, vals, strict=False))
    shuffled_members, shuffled_items = members[:], items[:]
    rnd.shuffle(shuffled_members)
    rnd.shuffle(shuffled_items)
    assert canonical(set(members)) == canonical(set(shuffled_members))
    # Later duplicates win in a dict, so build both from the same de-duplicated items.
    dedup = dict(items)
    permuted = dict(rnd.sample(list(dedup.items()), len(dedup)))
    assert canonical(dedup) == canonical(permuted)
    assert values_equal(dedup, permuted)
    assert values_equal(set(members), set(shuffled_members))


@_settings
@given(values)
def test_values_equal_is_reflexive_and_type_strict(value: object) -> None:
    assert values_equal(value, value)
    assert values_equal(value, parse_value(canonical(value)))
    assert not values_equal([value], (value,))
    assert not values_equal([value], {0: value})
    if type(value) is bool:
        assert not values_equal(value, int(value))
    if type(value) is int:
        assert not values_equal(value, float(value))
    if type(value) is str:
        assert not values_equal(value, value.encode())


# -------------------------------------------------------------------------------------------- caps


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("[" * 65 + "]" * 65, ErrorCode.BAD_ANSWER),  # over max_depth
        ("[" * 5000 + "]" * 5000, ErrorCode.BAD_ANSWER),  # over the parser's own nesting limit
        ("-" * 100_000 + "1", ErrorCode.BAD_ANSWER),  # the parser runs out of stack
        ("1" * 5000, ErrorCode.BAD_ANSWER),  # Python refuses decimal literals over 4300 digits
        ("0x" + "f" * 200_000, ErrorCode.UNSUPPORTED_VALUE),  # a hex literal is cheap to parse but too big
        ("'" + "a" * 1_000_001 + "'", ErrorCode.BAD_ANSWER),  # over max_text_chars
        ("[" + "0," * 300_000 + "]", ErrorCode.BAD_ANSWER),  # over max_items, refused before parsing
        ("[" + "[]," * 100_001 + "]", ErrorCode.BAD_ANSWER),
        # chains the parser would turn into huge trees: refused by the linear screen before parsing
        ("1" + "-1" * 300_000, ErrorCode.BAD_ANSWER),
        ("None" + "-None" * 190_000, ErrorCode.BAD_ANSWER),
        ("1.0" + ".real" * 190_000, ErrorCode.BAD_ANSWER),
        ("1" + " if 1 else 1" * 70_000, ErrorCode.BAD_ANSWER),
        ("[1]" + "[0]" * 300_000, ErrorCode.BAD_ANSWER),
        ("set()" + "()" * 300_000, ErrorCode.BAD_ANSWER),
        ("1 # '''\n" + "+1" * 400_000 + " # '''", ErrorCode.BAD_ANSWER),  # quotes in comments hide nothing
        ("'''\n" + "+1" * 400_000, ErrorCode.BAD_ANSWER),  # an unterminated string hides nothing
    ],
)
def test_parse_caps(text: str, code: ErrorCode) -> None:
    with pytest.raises(ValueRejectedError) as exc:
        parse_value(text)
    assert _code(exc) == code


def test_item_bound_ignores_separators_inside_strings() -> None:
    text = "['" + ",:[-" * 50_000 + "', 1]"
    assert parse_value(text) == [",:[-" * 50_000, 1]


def test_item_bound_counts_signed_numbers_once() -> None:
    text = "{" + ", ".join(f"-{i}: -{i}.5e-1" for i in range(45_000)) + "}"
    value = parse_value(text)
    assert type(value) is dict and len(value) == 45_000


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("""['#', '\\'', "'#"]""", ["#", "'", "'#"]),  # '#' and quotes inside strings
        ("[1, # it's a comment with a ' quote\n 2]", [1, 2]),
        ("'''a\n#b'''", "a\n#b"),
        (r"[r'\d', b'x', rb'y', Rb'z', u'w']", ["\\d", b"x", b"y", b"z", "w"]),
        ("[1, \\\n 2]", [1, 2]),  # explicit line continuation
        ("(0x1F, 0o7, 0b1, 1_000, .5, 5., 1E5, -2.5e-3)", (31, 7, 1, 1000, 0.5, 5.0, 1e5, -2.5e-3)),
    ],
)
def test_screen_accepts_every_literal_form(text: str, value: object) -> None:
    assert values_equal(parse_value(text), value)


def test_parse_depth_at_the_limit_is_accepted() -> None:
    deep = "[" * 64 + "]" * 64
    assert canonical(parse_value(deep)) == deep


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    ("make", "code"),
    [
        (lambda: _nested(65), ErrorCode.UNSUPPORTED_VALUE),
        (lambda: 10**4300, ErrorCode.UNSUPPORTED_VALUE),
        (lambda: -(10**4300), ErrorCode.UNSUPPORTED_VALUE),
        (lambda: 1 << 50_000_000, ErrorCode.UNSUPPORTED_VALUE),  # refused by bit_length, no decimal text
        (lambda: [[0] * 1000] * 1000, ErrorCode.UNSUPPORTED_VALUE),  # one sublist shared: 1M items
        (lambda: "a" * 1_000_000, ErrorCode.OUTPUT_LIMIT),
        (lambda: "\x01" * 300_000, ErrorCode.OUTPUT_LIMIT),  # short str, long repr
        (lambda: b"\x00" * 300_000, ErrorCode.OUTPUT_LIMIT),
        (lambda: ["a" * 1000] * 2000, ErrorCode.OUTPUT_LIMIT),
    ],
)
def test_canonical_caps(make: Any, code: ErrorCode) -> None:
    with pytest.raises(ValueRejectedError) as exc:
        canonical(make())
    assert _code(exc) == code


def test_interpreter_int_limit_is_reported_not_raised() -> None:
    with pytest.raises(ValueRejectedError) as exc:
        canonical(10**5000, ValueLimits(max_int_digits=10_000))  # above Python's own 4300-digit limit
    assert _code(exc) == ErrorCode.UNSUPPORTED_VALUE


def test_caps_at_the_limit_are_accepted() -> None:
    assert canonical(10**4300 - 1) == "9" * 4300
    assert canonical(_nested(64)).count("[") == 64
    text = canonical("a" * (1_000_000 - 2))
    assert len(text) == 1_000_000
    assert canonical_args(("a" * 10,), ValueLimits(max_text_chars=12)) == "'" + "a" * 10 + "'"
    with pytest.raises(ValueRejectedError) as exc:
        canonical_args(("a" * 10, 1), ValueLimits(max_text_chars=14))
    assert _code(exc) == ErrorCode.OUTPUT_LIMIT


# ---------------------------------------------------------------------------------- hostile objects


class _TrapError(AssertionError):
    """Raised by any method a hostile object overrides: canonical must never call them."""


def _trap(*_args: object, **_kwargs: object) -> Any:
    raise _TrapError


_TRAPS = {
    name: _trap for name in ("__eq__", "__ne__", "__hash__", "__repr__", "__str__", "__lt__", "__format__")
}
LyingInt = type("LyingInt", (int,), dict(_TRAPS))
LyingFloat = type("LyingFloat", (float,), dict(_TRAPS))
LyingStr = type("LyingStr", (str,), dict(_TRAPS))
LyingBytes = type("LyingBytes", (bytes,), dict(_TRAPS))
LyingList = type("LyingList", (list,), {**_TRAPS, "__iter__": _trap, "__len__": _trap})
LyingTuple = type("LyingTuple", (tuple,), {**_TRAPS, "__iter__": _trap, "__len__": _trap})
LyingDict = type("LyingDict", (dict,), {**_TRAPS, "items": _trap, "__iter__": _trap})
# Members of sets and dict keys must hash to be stored at all; everything else still traps.
LyingIntKey = type("LyingIntKey", (int,), {**_TRAPS, "__hash__": int.__hash__})
LyingStrKey = type("LyingStrKey", (str,), {**_TRAPS, "__hash__": str.__hash__})


class AlwaysEqual:
    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return 0


def _self_list() -> list[Any]:
    x: list[Any] = [1]
    x.append(x)
    return x


def _self_dict() -> dict[str, Any]:
    d: dict[str, Any] = {}
    d["me"] = d
    return d


HOSTILE = [
    pytest.param(lambda: LyingInt(3), id="int-subclass"),
    pytest.param(lambda: LyingFloat(1.5), id="float-subclass"),
    pytest.param(lambda: LyingStr("a"), id="str-subclass"),
    pytest.param(lambda: LyingBytes(b"a"), id="bytes-subclass"),
    pytest.param(lambda: LyingList([1]), id="list-subclass"),
    pytest.param(lambda: LyingTuple((1,)), id="tuple-subclass"),
    pytest.param(lambda: LyingDict(a=1), id="dict-subclass"),
    pytest.param(lambda: [1, LyingInt(2)], id="subclass-in-list"),
    pytest.param(lambda: {LyingStrKey("k"): 1}, id="subclass-as-dict-key"),
    pytest.param(lambda: {"k": LyingStr("v")}, id="subclass-as-dict-value"),
    pytest.param(lambda: {1, LyingIntKey(7)}, id="subclass-in-set"),
    pytest.param(AlwaysEqual, id="always-equal"),
    pytest.param(lambda: [AlwaysEqual()], id="always-equal-in-list"),
    pytest.param(_self_list, id="self-referential-list"),
    pytest.param(_self_dict, id="self-referential-dict"),
    pytest.param(lambda: float("nan"), id="nan"),
    pytest.param(lambda: float("inf"), id="inf"),
    pytest.param(lambda: [float("-inf")], id="minus-inf-in-list"),
    pytest.param(lambda: 1 + 2j, id="complex"),
    pytest.param(lambda: ..., id="ellipsis"),
    pytest.param(lambda: frozenset({1}), id="frozenset"),
    pytest.param(lambda: bytearray(b"a"), id="bytearray"),
    pytest.param(lambda: range(3), id="range"),
    pytest.param(lambda: (i for i in range(3)), id="generator"),
    pytest.param(object, id="object"),
    pytest.param(lambda: int, id="type"),
    pytest.param(lambda: print, id="builtin-function"),
]


@pytest.mark.parametrize("make", HOSTILE)
def test_hostile_values_are_unsupported(make: Any) -> None:
    value = make()
    with pytest.raises(ValueRejectedError) as exc:
        canonical(value)
    assert _code(exc) == ErrorCode.UNSUPPORTED_VALUE


@pytest.mark.parametrize("make", HOSTILE)
def test_hostile_values_never_compare_equal(make: Any) -> None:
    value = make()
    assert not values_equal(value, value)
    assert not values_equal([value], [value])
    assert not values_equal(value, 3)
