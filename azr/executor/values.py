"""Literal values: parsing model text, one canonical text per value, and type-strict comparison.

Every input, output and answer crosses a trust boundary as text. This module turns text into values and
values into text without ever executing anything, and compares values without calling methods that a
program could have overridden.

Threat model
------------
Covered:
- Text from a model or a user (answers, inputs, seeds). It is parsed with ``ast.parse`` only (never
  ``eval``, never pasted into code that runs) and accepted only when its tree is made of literal nodes.
  Before the parser runs, a linear scan refuses texts over ``max_text_chars``, texts holding any token no
  literal has (names, keywords, operators other than signs), and texts whose separators, brackets and
  signs bound the tree above ``max_items`` nodes, so no text within the limits makes the parser build a
  large tree. Nesting depth is checked while walking the tree; the parser itself refuses more than 200
  nested brackets.
- Objects returned by an untrusted ``f`` (``canonical`` runs inside the sandbox child on them). Types are
  matched exactly (``type(v) is int``), so subclasses of builtins with lying ``__eq__``/``__repr__``/
  ``__hash__`` are unsupported values, and no method a program can override is ever called. Work is bounded
  by ``max_depth`` (which also stops self-referencing containers), ``max_items`` (which also stops a list
  holding the same huge sublist many times) and ``max_text_chars``; huge ints are measured with
  ``bit_length`` and a comparison before any decimal conversion.

Not covered:
- A program that tampers with this module inside the sandbox can make the child report any text. The
  trusted parent must therefore re-check every text that comes back with ``parse_value`` and
  ``canonical`` before using it.

Rules
-----
Supported values: ``None``, ``bool``, ``int`` (at most ``max_int_digits`` decimal digits), finite ``float``,
``str``, ``bytes``, ``list``, ``tuple``, ``dict``, ``set`` (``set()`` is the empty set). Not supported:
``complex``, ``Ellipsis``, NaN and infinities, ``frozenset`` and every other type.

Canonical text: floats and strings by ``repr`` (shortest round trip, ``-0.0`` stays ``-0.0``); set
elements sorted by their canonical text; dict items sorted by the canonical text of their keys; ``", "``
between items, ``": "`` between a key and its value; a one-element tuple is ``(x,)``.

Equality (``values_equal``) is structural and type-strict: ``True`` is not ``1``, ``1`` is not ``1.0``, a list
is not a tuple, ``str`` is not ``bytes``. Floats are equal when ``math.isclose(a, b, rel_tol=float_rel_tol,
abs_tol=float_abs_tol)``: by default within a relative 1e-9 and no absolute slack, so a tiny gold value is
never matched by an answer many times its size (``0.0`` equals only ``0.0`` and ``-0.0``). Dict keys and
set elements are the same key when Python says so: exact canonical text, with ``-0.0`` read as ``0.0``
(``{-0.0: 1} == {0.0: 1}`` in Python). Set elements without an exact partner (elements that differ only
within the float tolerance) are paired by a maximum bipartite matching, so a pairing is found whenever
one exists; at most ``_MAX_FUZZY_SET_ELEMENTS`` of them.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass
from functools import lru_cache

from azr.executor.errors import ErrorCode, ExecutorError

__all__ = [
    "DEFAULT_LIMITS",
    "ValueLimits",
    "ValueRejectedError",
    "canonical",
    "canonical_args",
    "parse_args",
    "parse_value",
    "values_equal",
]

_MAX_FUZZY_SET_ELEMENTS = 256
"""Set elements without an exact partner that are paired under the float tolerance (quadratic work)."""

# Pre-parse screening (see _screen): string literals and comments, scanned left to right as the tokenizer
# does, so that a quote inside a comment or a '#' inside a string is read the same way Python reads it.
_STRING_OR_COMMENT = re.compile(
    r"[rRbBuU]{0,2}(?:"
    r"'''(?:\\.|[^\\])*?'''"
    r'|"""(?:\\.|[^\\])*?"""'
    r"|'(?:\\.|[^'\\\n])*+'"
    r'|"(?:\\.|[^"\\\n])*+"'
    r")|#[^\n]*+",
    re.DOTALL,
)
# What may remain of a literal once its strings became '' and its comments went: brackets, separators,
# signs, numbers and four names. Possessive quantifiers keep the match linear.
_NUMBER = (
    r"(?:0[xXoObB][0-9a-fA-F_]++|(?:[0-9][0-9_]*+(?:\.[0-9_]*+)?|\.[0-9][0-9_]*+)(?:[eE][+-]?[0-9_]++)?[jJ]?)"
)
_LITERAL_TOKENS = re.compile(rf"(?:[\s\[\](){{}},:+\-\\]++|''|{_NUMBER}|True|False|None|set|\.\.\.)*+")
# A number, with its sign, where a literal's item starts: it makes one item however its signs are written.
_ITEM_NUMBER = re.compile(rf"(^|[,:(\[{{])\s*[+-]?\s*{_NUMBER}")
_COUNTED = ",:([{+-"
"""Every item but the first of a container follows ',' or ':'; every container or call opens a bracket;
every operator node that could be chained needs a sign. So these characters bound the AST's size."""


@dataclass(frozen=True, slots=True)
class ValueLimits:
    """Caps that bound the work spent on one value (or one argument list)."""

    max_text_chars: int = 1_000_000
    """Longest literal text accepted by the parsers and produced by ``canonical``."""
    max_depth: int = 64
    """Deepest container nesting; ``[[1]]`` has depth 2, a scalar depth 0."""
    max_items: int = 100_000
    """Scalars plus containers in one value (for argument lists: in all arguments together)."""
    max_int_digits: int = 4300
    """Decimal digits of the largest int (sign excluded); longer ints are ``unsupported_value``."""
    float_rel_tol: float = 1e-9
    """Relative tolerance of float comparison (``math.isclose``)."""
    float_abs_tol: float = 0.0
    """Absolute tolerance of float comparison; 0 keeps the comparison purely relative."""

    def __post_init__(self) -> None:
        if min(self.max_text_chars, self.max_depth, self.max_items, self.max_int_digits) < 1:
            raise ValueError("max_text_chars, max_depth, max_items and max_int_digits must be at least 1")
        if not (self.float_rel_tol >= 0 and self.float_abs_tol >= 0):
            raise ValueError("float_rel_tol and float_abs_tol must be non-negative (0 means exact)")


DEFAULT_LIMITS = ValueLimits()


class ValueRejectedError(ExecutorError):
    """A text or value outside the supported literal domain; ``.error.code`` says which rule it broke."""


def _bad(message: str) -> ValueRejectedError:
    return ValueRejectedError(ErrorCode.BAD_ANSWER, message)


def _unsupported(message: str) -> ValueRejectedError:
    return ValueRejectedError(ErrorCode.UNSUPPORTED_VALUE, message)


@lru_cache(maxsize=8)
def _int_bound(max_int_digits: int) -> int:
    """The smallest int with more than ``max_int_digits`` digits."""
    bound: int = 10**max_int_digits
    return bound


def _check_int(value: int, limits: ValueLimits) -> None:
    # bit_length first: an int of a million bits is refused without building 10**digits or a decimal text.
    if value.bit_length() > 4 * limits.max_int_digits or abs(value) >= _int_bound(limits.max_int_digits):
        raise _unsupported(f"int with more than {limits.max_int_digits} digits")


def _check_float(value: float) -> None:
    if not math.isfinite(value):
        raise _unsupported(f"non-finite float {value!r}")


# ---------------------------------------------------------------------------------------------- parsing


def _check_text(text: object, limits: ValueLimits) -> str:
    if type(text) is not str:
        raise _bad(f"expected a str of literal text, got {type(text).__name__}")
    if len(text) > limits.max_text_chars:
        raise _bad(f"literal text of {len(text)} characters exceeds the limit of {limits.max_text_chars}")
    if "\x00" in text:
        raise _bad("literal text contains a NUL character")
    _screen(text, limits)
    return text


def _screen(text: str, limits: ValueLimits) -> None:
    """Refuse, in linear time and before the (memory-hungry) parser runs, texts that hold a token no
    literal has (names, operators other than signs, keywords) or certainly more than ``max_items`` items."""
    skeleton = _STRING_OR_COMMENT.sub(lambda m: "" if m.group().startswith("#") else "''", text)
    end = _LITERAL_TOKENS.match(skeleton)
    assert end is not None  # the pattern matches the empty string
    if end.end() != len(skeleton):
        raise _bad(f"not a Python literal: unexpected {skeleton[end.end() : end.end() + 12]!r}")
    skeleton = _ITEM_NUMBER.sub(lambda m: m.group(1) + "0", skeleton)  # -1.5e-3 counts once
    if sum(skeleton.count(c) for c in _COUNTED) + 1 > limits.max_items:
        raise _bad(f"literal text holds more than {limits.max_items} items")


def _parse_tree(source: str) -> ast.expr:
    try:
        return ast.parse(source, mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        raise _bad(f"not a Python literal: {type(exc).__name__}: {getattr(exc, 'msg', exc)}") from None


class _Builder:
    """Builds a value from literal AST nodes, counting items and depth against the limits."""

    def __init__(self, limits: ValueLimits) -> None:
        self.limits = limits
        self.items = 0

    def build(self, node: ast.expr, depth: int = 0) -> object:
        self.items += 1
        if self.items > self.limits.max_items:
            raise _bad(f"literal holds more than {self.limits.max_items} items")
        if isinstance(node, ast.Constant):
            return self._constant(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            operand = node.operand
            if not (isinstance(operand, ast.Constant) and type(operand.value) in (int, float)):
                raise _bad("a sign may only precede an int or float literal")
            number = self._constant(operand.value)
            assert type(number) is int or type(number) is float
            return -number if isinstance(node.op, ast.USub) else number
        if isinstance(node, ast.Call):
            if (
                isinstance(node.func, ast.Name)
                and node.func.id == "set"
                and not node.args
                and not node.keywords
            ):
                return set()
            raise _bad("calls are not literals (only set() is accepted)")
        if isinstance(node, ast.List | ast.Tuple | ast.Set | ast.Dict):
            if depth + 1 > self.limits.max_depth:
                raise _bad(f"literal nested deeper than {self.limits.max_depth} containers")
            return self._container(node, depth + 1)
        raise _bad(f"{type(node).__name__} is not a literal")

    def _constant(self, value: object) -> object:
        if value is None or type(value) in (bool, str, bytes):
            return value
        if type(value) is int:
            _check_int(value, self.limits)
            return value
        if type(value) is float:
            _check_float(value)
            return value
        raise _unsupported(f"{type(value).__name__} literals are not supported")

    def _container(self, node: ast.List | ast.Tuple | ast.Set | ast.Dict, depth: int) -> object:
        if isinstance(node, ast.Dict):
            keys: list[object] = []
            for key in node.keys:
                if key is None:
                    raise _bad("'**' unpacking is not a literal")
                keys.append(self.build(key, depth))
            values = [self.build(v, depth) for v in node.values]
            _check_distinct(keys, self.limits, "dict keys")
            return dict(zip(keys, values, strict=True))
        elements: list[object] = []
        for element in node.elts:
            if isinstance(element, ast.Starred):
                raise _bad("'*' unpacking is not a literal")
            elements.append(self.build(element, depth))
        if isinstance(node, ast.List):
            return elements
        if isinstance(node, ast.Tuple):
            return tuple(elements)
        _check_distinct(elements, self.limits, "set elements")
        return set(elements)


def _hashable(value: object) -> bool:
    if type(value) is tuple:
        return all(_hashable(v) for v in value)
    return type(value) not in (list, dict, set)


def _check_distinct(members: list[object], limits: ValueLimits, what: str) -> None:
    """Refuse unhashable members and members that Python would merge although their types differ.

    ``{1, True}`` and ``{0.0: 'a', -0.0: 'b'}`` silently lose a member in Python; exact repeats such as
    ``{1, 1}`` are harmless and accepted.
    """
    for member in members:
        if not _hashable(member):
            raise _bad(f"{what} must be hashable, got {type(member).__name__}")
    by_text = {canonical(m, limits): m for m in members}
    if len(set(by_text.values())) != len(by_text):
        raise _bad(f"{what} collide: values of different types that Python treats as equal")


def parse_value(text: str, limits: ValueLimits = DEFAULT_LIMITS) -> object:
    """Parse one literal (``"[1, 2]"``, ``"'a'"``, ``"set()"``).

    Raises ``ValueRejectedError`` with ``BAD_ANSWER`` for text that is not a supported literal or breaks a
    cap, and with ``UNSUPPORTED_VALUE`` for a well-formed literal outside the value domain (``1e999``, ``1j``,
    an int with too many digits). ``"1, 2"`` is the tuple ``(1, 2)``, as in Python.
    """
    text = _check_text(text, limits)
    return _Builder(limits).build(_parse_tree(text.strip()))


def parse_args(text: str, limits: ValueLimits = DEFAULT_LIMITS) -> tuple[object, ...]:
    """Parse an argument list: ``"[1, 2], 3"`` is ``([1, 2], 3)`` and ``"(1, 2)"`` is ``((1, 2),)``.

    The text is parsed (never run) as the call ``f(<text>)``; it is accepted only when the whole expression
    is exactly one call of the name ``f`` with at least one positional literal argument. Text that closes
    the call early, as in ``"[9]) or True or (0"``, makes the expression something other than that call and
    is refused. Errors as in ``parse_value``.
    """
    text = _check_text(text, limits)
    tree = _parse_tree("f(" + text + "\n)")
    if not (isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and tree.func.id == "f"):
        raise _bad("not a plain argument list")
    if tree.keywords:
        raise _bad("keyword arguments are not supported")
    if not tree.args:
        raise _bad("an argument list needs at least one argument")
    builder = _Builder(limits)
    args: list[object] = []
    for node in tree.args:
        if isinstance(node, ast.Starred):
            raise _bad("'*' unpacking is not a literal")
        args.append(builder.build(node))
    return tuple(args)


# ------------------------------------------------------------------------------------------ canonical


class _Writer:
    """Writes canonical text, counting items, depth and characters against the limits.

    Characters are counted exactly (framing included) before each piece is built, so an oversized value is
    refused without first building its whole text.
    """

    def __init__(self, limits: ValueLimits) -> None:
        self.limits = limits
        self.items = 0
        self.chars = 0

    def _reserve(self, n_chars: int) -> None:
        """Refuse now if ``n_chars`` more characters would not fit."""
        if self.chars + n_chars > self.limits.max_text_chars:
            raise ValueRejectedError(
                ErrorCode.OUTPUT_LIMIT, f"canonical text exceeds {self.limits.max_text_chars} characters"
            )

    def _charge(self, n_chars: int) -> None:
        self._reserve(n_chars)
        self.chars += n_chars

    def _scalar(self, text: str) -> str:
        self._charge(len(text))
        return text

    def write(self, value: object, depth: int = 0) -> str:  # noqa: PLR0911 - one branch per type
        self.items += 1
        if self.items > self.limits.max_items:
            raise _unsupported(f"value holds more than {self.limits.max_items} items")
        kind = type(value)
        if value is None:
            return self._scalar("None")
        if kind is bool:
            return self._scalar("True" if value else "False")
        if kind is int:
            assert isinstance(value, int)
            _check_int(value, self.limits)
            try:
                return self._scalar(int.__repr__(value))
            except ValueError:  # the interpreter's own int-to-text limit is lower than max_int_digits
                raise _unsupported("int too long for this interpreter's int-to-text limit") from None
        if kind is float:
            assert isinstance(value, float)
            _check_float(value)
            return self._scalar(float.__repr__(value))
        if kind is str:
            assert isinstance(value, str)
            self._reserve(len(value) + 2)  # a repr is at least two quotes longer: refuse before building it
            return self._scalar(str.__repr__(value))
        if kind is bytes:
            assert isinstance(value, bytes)
            self._reserve(len(value) + 3)
            return self._scalar(bytes.__repr__(value))
        if kind in (list, tuple, set, dict):
            if depth + 1 > self.limits.max_depth:
                raise _unsupported(f"value nested deeper than {self.limits.max_depth} containers")
            return self._container(value, depth + 1)
        raise _unsupported(f"values of type {kind.__name__} are not supported")

    def _container(self, value: object, depth: int) -> str:
        assert isinstance(value, list | tuple | set | dict)
        n = len(value)
        if type(value) is set and n == 0:
            return self._scalar("set()")
        # Brackets, ", " between members, ": " in each dict item, the comma of a one-element tuple.
        self._charge(2 + 2 * max(n - 1, 0) + (2 * n if type(value) is dict else 0))
        if type(value) is tuple and n == 1:
            self._charge(1)
            return "(" + self.write(value[0], depth) + ",)"
        if type(value) is list:
            return "[" + ", ".join([self.write(v, depth) for v in value]) + "]"
        if type(value) is tuple:
            return "(" + ", ".join([self.write(v, depth) for v in value]) + ")"
        if type(value) is set:
            return "{" + ", ".join(sorted([self.write(v, depth) for v in value])) + "}"
        assert type(value) is dict
        items = sorted([(self.write(k, depth), self.write(v, depth)) for k, v in value.items()])
        return "{" + ", ".join([k + ": " + v for k, v in items]) + "}"


def canonical(value: object, limits: ValueLimits = DEFAULT_LIMITS) -> str:
    """The one canonical literal text of ``value``.

    Raises ``ValueRejectedError`` with ``UNSUPPORTED_VALUE`` for values outside the domain or over the depth,
    item and int-digit caps, and with ``OUTPUT_LIMIT`` when the text would exceed ``max_text_chars``.
    """
    return _Writer(limits).write(value)


def canonical_args(args: tuple[object, ...], limits: ValueLimits = DEFAULT_LIMITS) -> str:
    """The canonical argument-list text of ``args``; ``parse_args`` reads it back."""
    if type(args) is not tuple:
        raise _unsupported(f"an argument list is a tuple, got {type(args).__name__}")
    if not args:
        raise _unsupported("an argument list needs at least one argument")
    writer = _Writer(limits)
    writer._charge(2 * (len(args) - 1))
    return ", ".join([writer.write(a) for a in args])


# ----------------------------------------------------------------------------------------- comparison


def values_equal(a: object, b: object, limits: ValueLimits = DEFAULT_LIMITS) -> bool:
    """Type-strict structural equality of two supported values (see the module docstring).

    Values outside the supported domain, or nested deeper than ``max_depth``, compare unequal: only the
    builtin equality of exact builtin types is ever used.
    """
    return _Comparer(limits).equal(a, b, 0)


class _Comparer:
    def __init__(self, limits: ValueLimits) -> None:
        self.limits = limits

    def equal(self, a: object, b: object, depth: int) -> bool:  # noqa: PLR0911 - one branch per type
        kind = type(a)
        if kind is not type(b):
            return False
        if a is None:
            return True
        if kind in (bool, int, str, bytes):
            return a == b
        if kind is float:
            assert isinstance(a, float) and isinstance(b, float)
            if not (math.isfinite(a) and math.isfinite(b)):
                return False
            return math.isclose(a, b, rel_tol=self.limits.float_rel_tol, abs_tol=self.limits.float_abs_tol)
        if kind not in (list, tuple, set, dict) or depth >= self.limits.max_depth:
            return False
        if kind is list or kind is tuple:
            assert isinstance(a, list | tuple) and isinstance(b, list | tuple)
            return len(a) == len(b) and all(self.equal(x, y, depth + 1) for x, y in zip(a, b, strict=True))
        if kind is dict:
            assert isinstance(a, dict) and isinstance(b, dict)
            return self._dicts(a, b, depth + 1)
        assert isinstance(a, set) and isinstance(b, set)
        return self._sets(a, b, depth + 1)

    def _keyed(self, members: object) -> dict[str, object] | None:
        assert isinstance(members, set | dict)
        try:
            return {canonical(_unsigned_zeros(m), self.limits): m for m in members}
        except ValueRejectedError:
            return None

    def _dicts(self, a: dict[object, object], b: dict[object, object], depth: int) -> bool:
        if len(a) != len(b):
            return False
        keys_a, keys_b = self._keyed(a), self._keyed(b)
        if keys_a is None or keys_b is None or keys_a.keys() != keys_b.keys():
            return False
        return all(self.equal(a[keys_a[t]], b[keys_b[t]], depth) for t in keys_a)

    def _sets(self, a: set[object], b: set[object], depth: int) -> bool:
        if len(a) != len(b):
            return False
        texts_a, texts_b = self._keyed(a), self._keyed(b)
        if texts_a is None or texts_b is None:
            return False
        rest_a = [v for t, v in texts_a.items() if t not in texts_b]
        rest_b = [v for t, v in texts_b.items() if t not in texts_a]
        if len(rest_a) > _MAX_FUZZY_SET_ELEMENTS:
            return False
        edges = [[j for j, y in enumerate(rest_b) if self.equal(x, y, depth)] for x in rest_a]
        return _perfect_matching(edges, len(rest_b))


def _unsigned_zeros(value: object) -> object:
    """``value`` with every ``-0.0`` read as ``0.0`` (they are one key for Python); other values as is."""
    if type(value) is float and value == 0.0:
        return 0.0
    if type(value) is tuple:
        return tuple(_unsigned_zeros(v) for v in value)
    return value


def _perfect_matching(edges: list[list[int]], right: int) -> bool:
    """Whether every left vertex can be paired with a distinct right one (Kuhn's augmenting paths).

    ``edges[i]`` lists the right vertices left vertex ``i`` may take. A greedy pairing can take the only
    partner of a later element; augmenting paths re-pair earlier choices, so a pairing is found whenever
    one exists. Iterative, so deep paths cannot exhaust the stack.
    """
    owner = [-1] * right
    for start in range(len(edges)):
        parent_of: dict[int, int] = {}  # right vertex -> left vertex that reached it
        seen_left = {start}
        frontier = [start]
        found = -1
        while frontier and found < 0:
            nxt = []
            for left in frontier:
                for r in edges[left]:
                    if r in parent_of:
                        continue
                    parent_of[r] = left
                    if owner[r] < 0:
                        found = r
                        break
                    if owner[r] not in seen_left:
                        seen_left.add(owner[r])
                        nxt.append(owner[r])
                if found >= 0:
                    break
            frontier = nxt
        if found < 0:
            return False
        r = found
        while True:  # flip the path back to its start
            left = parent_of[r]
            previous = next((p for p, o in enumerate(owner) if o == left), -1)
            owner[r] = left
            if left == start:
                break
            r = previous
    return True
