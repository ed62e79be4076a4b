"""The static gate: a fast, purely syntactic filter applied to every program before it runs.

It applies to proposed programs and to programs written by the induction solver alike.

Threat model
------------
This is a quality filter, not the security boundary: the sandbox is. The gate turns away programs that
cannot be judged or that reach for things a self-contained function has no use for, cheaply and with a
clear message, so that they never cost a sandbox run and never earn a reward. It reads the source with
``ast.parse`` and never runs it.

Covered (each refused with ``FORBIDDEN`` and a message naming what was found):
- imports outside an allowlist, matched on the root and on the full dotted name (``import os.path``,
  ``from os import path``), relative imports, private submodules;
- names that run or reach code and state: ``eval``, ``exec``, ``compile``, ``open``, ``__import__``,
  ``globals``, ``vars``, ``__builtins__`` ... (any use, so ``__import__('subpro' + 'cess')`` is refused
  whatever the string is built from);
- ``getattr``/``setattr``/``delattr``/``operator.attrgetter``/``operator.methodcaller`` unless called
  directly with constant attribute names that pass the attribute rules;
- dunder attribute access (``().__class__.__bases__``) except a few harmless ones (``__init__``), frame
  and code attributes (``f_back``, ``gi_frame``, ``tb_frame``), and module attributes that lead back to the
  interpreter (``typing.sys``);
- string constants that name such attributes, which also covers ``operator.attrgetter('__class__')`` and
  format fields such as ``'{0.__class__}'``;
- nondeterminism by construction: ``id``, ``hash``, randomness and clock imports;
- programs over the size or AST node caps.

``id``, ``hash``, ``dir`` and ``input`` are refused only in programs that do not bind these names
themselves, since models often name their own variables so (``for id, name in rows``).

Not covered: anything decided at run time (attribute names computed by code the gate cannot follow, such
as a format string built at run time and passed to ``str.format``; resource exhaustion, infinite loops,
hash-order dependence). The sandbox contains those, and determinism is checked by running twice under
different hash seeds.

``print`` is allowed: its output goes to a capped stream that is never part of a result, and refusing it
would punish harmless debugging habits of models.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from azr.executor.errors import ErrorCode, ExecError

__all__ = ["DEFAULT_POLICY", "GatePolicy", "check_program"]

ALLOWED_IMPORTS = frozenset(
    {
        "__future__",
        "abc",
        "bisect",
        "collections",
        "copy",
        "dataclasses",
        "decimal",
        "enum",
        "fractions",
        "functools",
        "heapq",
        "itertools",
        "json",
        "math",
        "numbers",
        "operator",
        "re",
        "statistics",
        "string",
        "textwrap",
        "typing",
        "unicodedata",
    }
)
"""Deterministic, side-effect free modules; the sandbox may pre-import exactly these."""

FORBIDDEN_NAMES = frozenset(
    {
        "__builtins__",
        "__import__",
        "__loader__",
        "__spec__",
        "breakpoint",
        "compile",
        "dir",
        "eval",
        "exec",
        "exit",
        "globals",
        "hash",
        "help",
        "id",
        "input",
        "locals",
        "memoryview",
        "open",
        "quit",
        "vars",
    }
)
"""Builtins that run code, reach interpreter state, read input, or give run-dependent results."""

SHADOWABLE_NAMES = frozenset({"dir", "hash", "id", "input"})
"""Forbidden names that programs often use for their own variables (``for id, name in rows``). They are
refused only when the program never binds them itself. Harmless when misjudged: they are forbidden for
quality, not safety (a stray ``id()`` still fails the determinism check)."""

ATTRIBUTE_FUNCTIONS = frozenset({"getattr", "setattr", "delattr", "attrgetter", "methodcaller"})
"""Functions that reach an attribute named by a string: allowed only as direct calls whose attribute names
are string constants that pass the attribute rules (``getattr(x, name)`` could name anything)."""

_NAME_ARGUMENTS = {
    "getattr": slice(1, 2),
    "setattr": slice(1, 2),
    "delattr": slice(1, 2),
    "methodcaller": slice(0, 1),
}
"""Which positional arguments are attribute names; ``attrgetter`` takes only (dotted) names."""

SAFE_DUNDERS = frozenset({"__init__", "__post_init__", "__name__", "__main__", "__slots__", "__all__"})
"""Dunder names that lead nowhere: constructors, names, the ``__main__`` idiom, ``__slots__``."""

FORBIDDEN_ATTRIBUTES = frozenset(
    {
        # frames, generators, coroutines, tracebacks and code objects
        "f_back",
        "f_builtins",
        "f_code",
        "f_globals",
        "f_locals",
        "f_trace",
        "gi_code",
        "gi_frame",
        "gi_yieldfrom",
        "cr_await",
        "cr_code",
        "cr_frame",
        "ag_await",
        "ag_code",
        "ag_frame",
        "tb_frame",
        "tb_next",
        "co_code",
        "co_consts",
        "co_names",
        # modules that allowed modules import and expose as attributes (``typing.sys``, ``re._compiler``)
        "builtins",
        "importlib",
        "inspect",
        "os",
        "subprocess",
        "sys",
        "_os",
        "_sys",
    }
)
"""Attribute names refused wherever they appear (attribute access, getattr constants, string constants)."""

_DUNDER = re.compile(r"__[A-Za-z][A-Za-z0-9_]*?__")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FRAME_WORDS = frozenset(a for a in FORBIDDEN_ATTRIBUTES if a not in {"builtins", "os", "sys", "_os", "_sys"})


@dataclass(frozen=True, slots=True)
class GatePolicy:
    """What the gate accepts; the defaults suit AZR tasks."""

    max_program_chars: int = 20_000
    """Longest program source accepted, in characters."""
    max_ast_nodes: int = 5_000
    """Most AST nodes in one program (a rough measure of program size that whitespace cannot inflate)."""
    allowed_imports: frozenset[str] = ALLOWED_IMPORTS
    """Top-level modules a program may import; submodules of these are allowed unless private."""
    forbidden_names: frozenset[str] = FORBIDDEN_NAMES
    """Names refused wherever they are used."""
    shadowable_names: frozenset[str] = SHADOWABLE_NAMES
    """Forbidden names allowed in a program that binds them itself (as a parameter, variable, ...)."""
    forbidden_attributes: frozenset[str] = FORBIDDEN_ATTRIBUTES
    """Attribute names refused, besides every dunder outside ``safe_dunders``."""
    safe_dunders: frozenset[str] = SAFE_DUNDERS
    """Dunder names allowed as names, attributes and string constants."""
    entry_name: str = "f"
    """Name of the top-level function every program must define."""

    def __post_init__(self) -> None:
        if self.max_program_chars < 1 or self.max_ast_nodes < 1:
            raise ValueError("max_program_chars and max_ast_nodes must be at least 1")
        if not self.entry_name.isidentifier():
            raise ValueError(f"entry_name {self.entry_name!r} is not a Python identifier")


DEFAULT_POLICY = GatePolicy()


def _forbidden(message: str) -> ExecError:
    return ExecError(ErrorCode.FORBIDDEN, message)


def check_program(source: str, policy: GatePolicy = DEFAULT_POLICY) -> ExecError | None:
    """Return ``None`` when ``source`` passes the gate, else the first problem found.

    Codes: ``SYNTAX_ERROR`` (not Python), ``FORBIDDEN`` (a cap or a rule of the module docstring),
    ``NO_ENTRY_FUNCTION`` (no top-level ``def f``; helpers and classes are fine).
    """
    parsed = _parse(source, policy)
    if isinstance(parsed, ExecError):
        return parsed
    tree, nodes = parsed
    checker = _Checker(policy, _bound_names(nodes) & policy.shadowable_names)
    for node in nodes:
        problem = checker.check(node)
        if problem is not None:
            return _forbidden(problem)
    if not any(isinstance(n, ast.FunctionDef) and n.name == policy.entry_name for n in tree.body):
        return ExecError(ErrorCode.NO_ENTRY_FUNCTION, f"no top-level 'def {policy.entry_name}(...)' found")
    return None


def _parse(source: str, policy: GatePolicy) -> tuple[ast.Module, list[ast.AST]] | ExecError:
    """The tree and its nodes in breadth-first order, or the size or syntax error."""
    if type(source) is not str:
        return ExecError(ErrorCode.SYNTAX_ERROR, f"program must be a str, got {type(source).__name__}")
    if len(source) > policy.max_program_chars:
        return _forbidden(f"program has {len(source)} characters; the limit is {policy.max_program_chars}")
    try:
        tree = ast.parse(source, mode="exec")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        line = getattr(exc, "lineno", None)
        where = f" (line {line})" if line else ""
        return ExecError(ErrorCode.SYNTAX_ERROR, f"{type(exc).__name__}: {getattr(exc, 'msg', exc)}{where}")
    nodes = list(ast.walk(tree))
    if len(nodes) > policy.max_ast_nodes:
        return _forbidden(f"program has {len(nodes)} AST nodes; the limit is {policy.max_ast_nodes}")
    return tree, nodes


class _Checker:
    """Rules per node; ``ast.walk`` visits parents before children, which ``_callees`` relies on."""

    def __init__(self, policy: GatePolicy, shadowed: frozenset[str]) -> None:
        self.policy = policy
        self.allowed_names = shadowed  # forbidden names the program binds itself
        self._callees: set[int] = set()  # ids of getattr-like callee nodes already checked as direct calls

    def check(self, node: ast.AST) -> str | None:  # noqa: PLR0911 - one branch per node kind
        if isinstance(node, ast.Import):
            return next((p for a in node.names if (p := self._module(a.name)) is not None), None)
        if isinstance(node, ast.ImportFrom):
            return self._import_from(node)
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.Name):
            return self._name(node)
        if isinstance(node, ast.Attribute):
            if node.attr in ATTRIBUTE_FUNCTIONS and id(node) not in self._callees:
                return f"{node.attr!r} may only be called directly with constant attribute names"
            return self._attribute(node.attr)
        if isinstance(node, ast.Constant) and type(node.value) is str:
            return self._string(node.value)
        if isinstance(node, ast.alias) and node.asname is not None:
            return self._binding(node.asname)
        if isinstance(node, ast.MatchClass):  # ``case C(attr=x)`` reads ``attr`` like an attribute access
            return next((p for a in node.kwd_attrs if (p := self._attribute(a)) is not None), None)
        return None

    def _module(self, dotted: str) -> str | None:
        parts = dotted.split(".")
        if parts[0] not in self.policy.allowed_imports:
            return f"import of {dotted!r} is not allowed"
        private = next((p for p in parts[1:] if p.startswith("_")), None)
        if private is not None:
            return f"import of {dotted!r} is not allowed (private module {private!r})"
        return None

    def _import_from(self, node: ast.ImportFrom) -> str | None:
        if node.level:
            return f"relative import {'.' * node.level}{node.module or ''} is not allowed"
        assert node.module is not None
        problem = self._module(node.module)
        if problem is not None:
            return problem
        for alias in node.names:
            if alias.name != "*" and (problem := self._binding(alias.name)) is not None:
                return f"{problem} (imported from {node.module!r})"
        return None

    def _binding(self, name: str) -> str | None:
        if name in self.policy.forbidden_names:
            return f"use of {name!r} is not allowed"
        return self._attribute(name)

    def _name(self, node: ast.Name) -> str | None:
        name = node.id
        if name in self.policy.forbidden_names and name not in self.allowed_names:
            return f"use of {name!r} is not allowed"
        if name in ATTRIBUTE_FUNCTIONS and id(node) not in self._callees:
            return f"{name!r} may only be called directly with constant attribute names"
        if _is_dunder(name) and name not in self.policy.safe_dunders:
            return f"use of the dunder name {name!r} is not allowed"
        return None

    def _call(self, node: ast.Call) -> str | None:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name not in ATTRIBUTE_FUNCTIONS:
            return None
        if any(isinstance(a, ast.Starred) for a in node.args) or (node.keywords and name != "methodcaller"):
            return f"{name!r} needs its attribute names as plain positional arguments"
        names = node.args[_NAME_ARGUMENTS[name]] if name in _NAME_ARGUMENTS else node.args
        if not names:
            return f"{name!r} needs a constant attribute name"
        for arg in names:
            if not (isinstance(arg, ast.Constant) and type(arg.value) is str):
                return f"{name!r} with a non-constant attribute name is not allowed"
            for part in arg.value.split("."):  # attrgetter follows dotted paths
                problem = self._attribute(part)
                if problem is not None:
                    return f"{problem} (through {name})"
        self._callees.add(id(func))
        return None

    def _attribute(self, attr: str) -> str | None:
        if _is_dunder(attr) and attr not in self.policy.safe_dunders:
            return f"access to the dunder attribute {attr!r} is not allowed"
        if attr in self.policy.forbidden_attributes:
            return f"access to the attribute {attr!r} is not allowed"
        return None

    def _string(self, text: str) -> str | None:
        # Only dunders and frame/code words: module words such as "os" are ordinary English in strings.
        for match in _DUNDER.finditer(text):
            if match.group() not in self.policy.safe_dunders:
                return f"string constant names the dunder attribute {match.group()!r}"
        frame_words = _FRAME_WORDS & self.policy.forbidden_attributes
        word = next((w for w in _WORD.findall(text) if w in frame_words), None)
        if word is not None:
            return f"string constant names the attribute {word!r}"
        return None


_NAMED_BINDERS = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.ExceptHandler,
    ast.MatchAs,
    ast.MatchStar,
)


def _bound_names(nodes: list[ast.AST]) -> frozenset[str]:
    """Every name the program binds anywhere (scopes are not told apart: this only relaxes quality rules)."""
    bound: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, _NAMED_BINDERS) and node.name is not None:
            bound.add(node.name)
    return frozenset(bound)


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")
