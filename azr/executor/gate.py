"""The static gate: a fast, purely syntactic filter applied to every program before it runs.

It applies to proposed programs and to programs written by the induction solver alike.

Threat model
------------
This is a quality filter, not the security boundary: the sandbox is. The gate turns away programs that
cannot be judged or that reach for things a self-contained function has no use for, cheaply and with a
clear message, so that they never cost a sandbox run and never earn a reward. It reads the source with
``ast.parse`` and never runs it.

Covered (each refused with ``FORBIDDEN`` and a message naming what was found). The allowlist is one of
names, not only of modules:

- imports outside an allowlist, matched on the root and on the full dotted name (``import os.path``,
  ``from os import path``), relative imports, private submodules, star imports (``from re import *``
  would hand the program whatever the module imported, ``sys`` among them);
- module attributes outside a per-module list (``azr.executor.gate_names``): ``typing.sys``,
  ``enum.bltns``, ``json.codecs.open``, ``string.Formatter``; the same lists apply to ``from m import
  name``, and a module may only be used as ``m.name`` (never passed around, so ``getattr(m, ...)`` and
  ``[m][0].sys`` are refused too);
- names that run or reach code and state: ``eval``, ``exec``, ``compile``, ``open``, ``__import__``,
  ``globals``, ``vars``, ``__builtins__`` ... (any use, so ``__import__('subpro' + 'cess')`` is refused
  whatever the string is built from);
- ``getattr``/``setattr``/``delattr``/``operator.attrgetter``/``operator.methodcaller`` unless called
  directly with constant attribute names that pass the attribute rules;
- dunder attribute access (``().__class__.__bases__``) except a few harmless ones (``__init__``); private
  attributes (``_x``) the program does not define itself (``self._items`` is fine, ``obj._evaluate`` is
  not); frame and code attributes (``f_back``, ``gi_frame``, ``tb_frame``) and interpreter modules as
  attributes of any object (``x.sys``);
- format-string field lookups: ``str.format``/``format_map`` only on a literal template, and no template
  field that looks up an attribute or item (``'{0.__class__}'``, ``'{0[key]}'``), since a template
  computed at run time could walk any attribute chain;
- string constants that name dunders or frame attributes (how they would be named to ``getattr``); module
  names are separate, so a string that says "inspect" or "os" is ordinary text;
- nondeterminism by construction: ``id``, ``hash``, randomness and clock imports;
- programs over the size or AST node caps.

``id``, ``hash``, ``dir`` and ``input`` are refused only in programs that do not bind these names
themselves, since models often name their own variables so (``for id, name in rows``). Scopes are not
told apart: a program that imports ``string`` and also names a parameter ``string`` has that parameter's
attributes checked against the module's list, which refuses some innocent programs, never admits one.

Not covered: anything decided at run time that the gate cannot follow (resource exhaustion, infinite
loops, hash-order dependence) and attributes of the objects allowed names return (which the dunder,
private and frame rules still screen). The sandbox contains those, and determinism is checked by running
under several hash seeds.

``print`` is allowed: its output goes to a capped stream that is never part of a result, and refusing it
would punish harmless debugging habits of models.
"""

from __future__ import annotations

import ast
import re
import string as _string_module
from collections.abc import Mapping
from dataclasses import dataclass, field

from azr.executor.errors import ErrorCode, ExecError
from azr.executor.gate_names import MODULE_ATTRIBUTES

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

FRAME_ATTRIBUTES = frozenset(
    {
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
    }
)
"""Attributes of frames, generators, coroutines, tracebacks and code objects: refused as attributes and as
words in string constants (a string is how they would be named to ``getattr`` or a format field)."""

INTERPRETER_MODULES = frozenset({"builtins", "importlib", "inspect", "os", "subprocess", "sys"})
"""Modules that lead back to the interpreter, refused as attributes of any object (``x.sys``). Unlike
frame attributes they are ordinary words in text, so a string that says "inspect" or "os" is fine."""

FORMAT_METHODS = frozenset({"format", "format_map"})
"""String methods that look up attributes and items named in their format string (``'{0.real}'``)."""


@dataclass(frozen=True, slots=True)
class GatePolicy:
    """What the gate accepts; the defaults suit AZR tasks."""

    max_program_chars: int = 20_000
    """Longest program source accepted, in characters."""
    max_ast_nodes: int = 5_000
    """Most AST nodes in one program (a rough measure of program size that whitespace cannot inflate)."""
    allowed_imports: frozenset[str] = ALLOWED_IMPORTS
    """Top-level modules a program may import; a submodule only when ``module_attributes`` lists it."""
    module_attributes: Mapping[str, frozenset[str]] = field(default_factory=lambda: MODULE_ATTRIBUTES)
    """Per module (and allowed submodule), the names a program may use on it or import from it."""
    forbidden_names: frozenset[str] = FORBIDDEN_NAMES
    """Names refused wherever they are used."""
    shadowable_names: frozenset[str] = SHADOWABLE_NAMES
    """Forbidden names allowed in a program that binds them itself (as a parameter, variable, ...)."""
    frame_attributes: frozenset[str] = FRAME_ATTRIBUTES
    """Attribute names refused as attributes and as words of string constants."""
    interpreter_modules: frozenset[str] = INTERPRETER_MODULES
    """Attribute names refused on any object, but allowed as words in strings."""
    safe_dunders: frozenset[str] = SAFE_DUNDERS
    """Dunder names allowed as names, attributes and string constants."""
    entry_name: str = "f"
    """Name of the top-level function every program must define."""

    def __post_init__(self) -> None:
        if self.max_program_chars < 1 or self.max_ast_nodes < 1:
            raise ValueError("max_program_chars and max_ast_nodes must be at least 1")
        if not self.entry_name.isidentifier():
            raise ValueError(f"entry_name {self.entry_name!r} is not a Python identifier")
        unlisted = sorted(self.allowed_imports - set(self.module_attributes))
        if unlisted:
            raise ValueError(
                f"allowed imports {unlisted} have no entry in module_attributes; list the names a program "
                "may use from each (an empty set allows the import alone)"
            )


_DUNDER = re.compile(r"__[A-Za-z][A-Za-z0-9_]*?__")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LOOKUP_FIELD = re.compile(r"[A-Za-z0-9_]*[.\[]")
"""A format field that looks something up (``0.real``, ``x[1]``), told apart from other text in braces."""

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
    checker = _Checker(policy, nodes)
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

    def __init__(self, policy: GatePolicy, nodes: list[ast.AST]) -> None:
        self.policy = policy
        bound = _bound_names(nodes)
        self.allowed_names = bound & policy.shadowable_names  # forbidden names the program binds itself
        # Private attributes are the program's own business when it defines them (``self._items = []``).
        self.own_names = bound | {n.attr for n in nodes if isinstance(n, ast.Attribute) and _stores(n)}
        self.modules = _module_bindings(nodes, policy)
        self.attribute_bases = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}
        self._callees: set[int] = set()  # ids of callee nodes already checked as direct calls

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
            return self._attribute_node(node)
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
        if any(".".join(parts[:i]) not in self.policy.module_attributes for i in range(2, len(parts) + 1)):
            return f"import of {dotted!r} is not allowed"
        return None

    def _import_from(self, node: ast.ImportFrom) -> str | None:
        if node.level:
            return f"relative import {'.' * node.level}{node.module or ''} is not allowed"
        assert node.module is not None
        problem = self._module(node.module)
        if problem is not None:
            return problem
        for alias in node.names:
            if alias.name == "*":
                return f"star import from {node.module!r} is not allowed; import the names it uses"
            problem = self._module_name(node.module, alias.name) or self._binding(alias.name)
            if problem is not None:
                return f"{problem} (imported from {node.module!r})"
        return None

    def _module_name(self, module: str, name: str) -> str | None:
        """Whether ``module.name`` is on the module's list (or is an allowed submodule)."""
        listed = self.policy.module_attributes.get(module, frozenset())
        if name in listed or f"{module}.{name}" in self.policy.module_attributes:
            return None
        return f"{name!r} is not an allowed name of module {module!r}"

    def _module_of(self, node: ast.expr) -> str | None:
        """The module an expression names (``typing``, ``collections.abc``), or ``None``."""
        if isinstance(node, ast.Name):
            return self.modules.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self._module_of(node.value)
            if base is not None and f"{base}.{node.attr}" in self.policy.module_attributes:
                return f"{base}.{node.attr}"
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
        if name in self.modules and isinstance(node.ctx, ast.Load) and id(node) not in self.attribute_bases:
            return f"the module {name!r} may only be used as {name}.<name>, not passed around as a value"
        return None

    def _call(self, node: ast.Call) -> str | None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in FORMAT_METHODS and _is_name(func.value, "str"):
            return self._unbound_format_call(func, node.args)
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        return self._attribute_function_call(node, name) if name in ATTRIBUTE_FUNCTIONS else None

    def _attribute_function_call(self, node: ast.Call, name: str) -> str | None:
        """``getattr(x, 'name')`` and its kind: called directly, with constant names that pass the rules."""
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
        self._callees.add(id(node.func))
        return None

    def _unbound_format_call(self, func: ast.Attribute, args: list[ast.expr]) -> str | None:
        """``str.format(template, ...)``: the template is the first argument and must be a literal."""
        template = args[0] if args else None
        if isinstance(template, ast.Constant) and type(template.value) is str:
            self._callees.add(id(func))
            return _format_fields_problem(template.value)
        return None  # the attribute node then refuses the computed template

    def _attribute_node(self, node: ast.Attribute) -> str | None:
        attr = node.attr
        if attr in ATTRIBUTE_FUNCTIONS and id(node) not in self._callees:
            return f"{attr!r} may only be called directly with constant attribute names"
        module = self._module_of(node.value)
        if module is not None:
            return self._module_name(module, attr)
        if attr in FORMAT_METHODS:
            return self._format_call(node)
        return self._attribute(attr)

    def _format_call(self, node: ast.Attribute) -> str | None:
        """``str.format``/``format_map`` only with a literal template whose fields name no attribute or item.

        A template computed at run time could name any attribute chain (``'{0.__init__.__globals__}'``).
        """
        template = node.value
        if isinstance(template, ast.Constant) and type(template.value) is str:
            return _format_fields_problem(template.value)
        if id(node) in self._callees:
            return None  # ``str.format('...', ...)``: its constant template is checked as a string below
        return f"{node.attr!r} is allowed only on a literal format string (this template is computed)"

    def _attribute(self, attr: str) -> str | None:
        if _is_dunder(attr) and attr not in self.policy.safe_dunders:
            return f"access to the dunder attribute {attr!r} is not allowed"
        if attr in self.policy.frame_attributes or attr in self.policy.interpreter_modules:
            return f"access to the attribute {attr!r} is not allowed"
        if attr.startswith("_") and not _is_dunder(attr) and attr not in self.own_names:
            return f"access to the private attribute {attr!r} is not allowed (the program does not define it)"
        return None

    def _string(self, text: str) -> str | None:
        # Only dunders and frame/code words: module words such as "os" are ordinary English in strings.
        for match in _DUNDER.finditer(text):
            if match.group() not in self.policy.safe_dunders:
                return f"string constant names the dunder attribute {match.group()!r}"
        word = next((w for w in _WORD.findall(text) if w in self.policy.frame_attributes), None)
        if word is not None:
            return f"string constant names the attribute {word!r}"
        if "{" in text:  # a template handed to ``str.format``; its fields must not look anything up
            return _format_fields_problem(text, strict=False)
        return None


def _format_fields_problem(template: str, *, strict: bool = True) -> str | None:
    """Why ``template`` would look up an attribute or item when formatted, else ``None``.

    ``strict`` refuses a malformed template (it is being formatted); otherwise the text may be no template.
    """
    try:
        fields = list(_string_module.Formatter().parse(template))
    except ValueError:
        return "malformed format string" if strict else None
    for _, field_name, spec, _ in fields:
        if field_name and _looks_up(field_name, strict=strict):
            return f"format field {{{field_name}}} looks up an attribute or item; pass the value itself"
        if spec and "{" in spec and (problem := _format_fields_problem(spec, strict=strict)) is not None:
            return problem
    return None


def _looks_up(field_name: str, *, strict: bool) -> bool:
    if strict:
        return "." in field_name or "[" in field_name
    return _LOOKUP_FIELD.match(field_name) is not None


def _module_bindings(nodes: list[ast.AST], policy: GatePolicy) -> dict[str, str]:
    """Names that imports bind to modules: ``import a.b`` binds ``a``; ``as`` and ``from`` bind others."""
    modules: dict[str, str] = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname is not None:
                    modules[alias.asname] = alias.name
                else:
                    root = alias.name.split(".")[0]
                    modules[root] = root
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                dotted = f"{node.module}.{alias.name}"
                if dotted in policy.module_attributes:
                    modules[alias.asname or alias.name] = dotted
    return modules


def _stores(node: ast.Attribute) -> bool:
    return isinstance(node.ctx, ast.Store | ast.Del)


def _is_name(node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


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
