"""The static gate: attack programs refused with the exact error class, ordinary programs accepted."""

from __future__ import annotations

import importlib
import textwrap
import types

import pytest

from azr.executor.errors import ErrorCode
from azr.executor.gate import ALLOWED_IMPORTS, DEFAULT_POLICY, GatePolicy, check_program

F = ErrorCode.FORBIDDEN
S = ErrorCode.SYNTAX_ERROR
N = ErrorCode.NO_ENTRY_FUNCTION


def _program(body: str) -> str:
    return textwrap.dedent(body).strip() + "\n"


# (id, program, expected code, a fragment the message must name)
ATTACKS = [
    # imports: whole, dotted, from-imports, relative, aliased (defect 1: dotted names never matched)
    ("import-os", "import os\ndef f(x):\n    return x", F, "'os'"),
    ("import-sys", "import sys\ndef f(x):\n    return x", F, "'sys'"),
    ("import-os-path", "import os.path\ndef f(x):\n    return x", F, "'os.path'"),
    ("import-in-function", "def f(x):\n    import subprocess\n    return x", F, "'subprocess'"),
    ("from-os-import-path", "from os import path\ndef f(x):\n    return x", F, "'os'"),
    ("from-os-path-import", "from os.path import join\ndef f(x):\n    return x", F, "'os.path'"),
    ("import-importlib", "import importlib\ndef f(x):\n    return x", F, "'importlib'"),
    ("from-importlib", "from importlib import import_module\ndef f(x):\n    return x", F, "'importlib'"),
    ("relative-import", "from . import helpers\ndef f(x):\n    return x", F, "relative"),
    ("relative-import-module", "from ..pkg import mod\ndef f(x):\n    return x", F, "relative"),
    ("allowed-root-private-sub", "import re._parser\ndef f(x):\n    return x", F, "'_parser'"),
    ("allowed-alias-list-mixed", "import math, os\ndef f(x):\n    return x", F, "'os'"),
    ("import-builtins", "import builtins\ndef f(x):\n    return x", F, "'builtins'"),
    ("import-ctypes", "import ctypes\ndef f(x):\n    return x", F, "'ctypes'"),
    ("import-io", "import io\ndef f(x):\n    return x", F, "'io'"),
    ("import-pathlib", "from pathlib import Path\ndef f(x):\n    return x", F, "'pathlib'"),
    ("import-types", "import types\ndef f(x):\n    return x", F, "'types'"),
    # randomness and time
    ("import-random", "import random\ndef f(x):\n    return random.random()", F, "'random'"),
    ("from-random", "from random import randint\ndef f(x):\n    return randint(0, x)", F, "'random'"),
    ("import-time", "import time\ndef f(x):\n    return time.time()", F, "'time'"),
    (
        "import-datetime",
        "from datetime import datetime\ndef f(x):\n    return str(datetime.now())",
        F,
        "'datetime'",
    ),
    ("import-secrets", "import secrets\ndef f(x):\n    return secrets.token_hex()", F, "'secrets'"),
    ("import-uuid", "import uuid\ndef f(x):\n    return str(uuid.uuid4())", F, "'uuid'"),
    ("id-builtin", "def f(x):\n    return id(x)", F, "'id'"),
    ("dir-builtin", "def f(x):\n    return dir(x)", F, "'dir'"),
    (
        "eval-is-never-shadowable",
        "def g(eval):\n    return eval\ndef f(x):\n    return eval('x')",
        F,
        "'eval'",
    ),
    ("hash-builtin", "def f(x):\n    return hash(x)", F, "'hash'"),
    # run-time strings cannot hide from the name rules
    ("dunder-import-concat", "def f(x):\n    return __import__('subpro' + 'cess')", F, "'__import__'"),
    ("dunder-import-alias", "g = __import__\ndef f(x):\n    return g('os')", F, "'__import__'"),
    ("eval", "def f(x):\n    return eval('x + 1')", F, "'eval'"),
    ("exec", "def f(x):\n    exec('y = 1')\n    return x", F, "'exec'"),
    ("compile", "def f(x):\n    return compile('1', 'a', 'eval')", F, "'compile'"),
    ("open", "def f(x):\n    return open('/etc/passwd').read()", F, "'open'"),
    ("input", "def f(x):\n    return input()", F, "'input'"),
    ("breakpoint", "def f(x):\n    breakpoint()\n    return x", F, "'breakpoint'"),
    ("globals", "def f(x):\n    return globals()['f']", F, "'globals'"),
    ("locals", "def f(x):\n    return locals()", F, "'locals'"),
    ("vars", "def f(x):\n    return vars()", F, "'vars'"),
    ("memoryview", "def f(x):\n    return memoryview(b'a')", F, "'memoryview'"),
    ("exit", "def f(x):\n    exit(0)", F, "'exit'"),
    ("quit", "def f(x):\n    quit()", F, "'quit'"),
    ("help", "def f(x):\n    return help", F, "'help'"),
    ("builtins-name", "def f(x):\n    return __builtins__['eval']('1')", F, "'__builtins__'"),
    # getattr tricks
    ("getattr-concat", "def f(x):\n    return getattr(__builtins__, 'ev' + 'al')", F, "non-constant"),
    ("getattr-variable", "def f(x):\n    name = 'upper'\n    return getattr(x, name)()", F, "non-constant"),
    ("getattr-dunder-constant", "def f(x):\n    return getattr(x, '__class__')", F, "'__class__'"),
    (
        "getattr-frame-constant",
        "def f(x):\n    g = (i for i in x)\n    return getattr(g, 'gi_frame')",
        F,
        "'gi_frame'",
    ),
    ("getattr-as-value", "def f(x):\n    g = getattr\n    return g(x, 'real')", F, "'getattr'"),
    ("getattr-star-args", "def f(x):\n    return getattr(*x)", F, "'getattr'"),
    ("setattr-dunder", "def f(x):\n    setattr(x, '__class__', int)\n    return x", F, "'__class__'"),
    ("delattr-variable", "def f(x, n):\n    delattr(x, n)\n    return x", F, "non-constant"),
    (
        "attrgetter-dunder",
        "from operator import attrgetter\ndef f(x):\n    return attrgetter('__class__')(x)",
        F,
        "'__class__'",
    ),
    (
        "attrgetter-computed",
        "import operator\ndef f(x):\n    return operator.attrgetter('__cla' + 'ss__')(x)",
        F,
        "non-constant",
    ),
    (
        "attrgetter-dotted-dunder",
        "from operator import attrgetter\ndef f(x):\n    return attrgetter('real.__class__')(x)",
        F,
        "'__class__'",
    ),
    (
        "attrgetter-as-value",
        "import operator\ndef f(x):\n    g = operator.attrgetter\n    return g('real')(x)",
        F,
        "'attrgetter'",
    ),
    (
        "methodcaller-computed",
        "from operator import methodcaller\ndef f(x, n):\n    return methodcaller(n)(x)",
        F,
        "non-constant",
    ),
    # subclass walking, frames, introspection
    ("subclass-walk", "def f(x):\n    return ().__class__.__bases__[0].__subclasses__()", F, "dunder"),
    ("object-subclasses", "def f(x):\n    return object.__subclasses__()", F, "'__subclasses__'"),
    ("function-globals", "def f(x):\n    return f.__globals__['__builtins__']", F, "dunder"),
    (
        "init-globals",
        "class A:\n    def __init__(self):\n        pass\ndef f(x):\n    return A.__init__.__globals__",
        F,
        "'__globals__'",
    ),
    (
        "frame-back",
        "def f(x):\n    g = (i for i in [1])\n    return g.gi_frame.f_back.f_globals",
        F,
        "attribute",
    ),
    (
        "traceback-frame",
        "def f(x):\n    try:\n        1 / 0\n    except ZeroDivisionError as e:\n"
        "        return e.__traceback__.tb_frame",
        F,
        "attribute",
    ),
    ("code-object", "def f(x):\n    return f.__code__.co_consts", F, "attribute"),
    ("format-string-attribute", "def f(x):\n    return '{0.__class__.__mro__}'.format(x)", F, "{0.__class__"),
    ("fstring-dunder", "def f(x):\n    return f'{x.__class__}'", F, "'__class__'"),
    (
        "match-class-dunder",
        "def f(x):\n    match x:\n        case object(__class__=c):\n            return c\n    return x",
        F,
        "'__class__'",
    ),
    ("module-attribute-sys", "import typing\ndef f(x):\n    return typing.sys.modules['os']", F, "'sys'"),
    ("from-module-sys", "from dataclasses import sys\ndef f(x):\n    return x", F, "'sys'"),
    ("dunder-name-loader", "def f(x):\n    return __loader__", F, "'__loader__'"),
    ("dunder-dict", "def f(x):\n    return x.__dict__", F, "'__dict__'"),
    ("alias-to-forbidden", "import math as eval\ndef f(x):\n    return x", F, "'eval'"),
    # caps
    ("too-long", "def f(x):\n    return x\n" + "#" * 20_001, F, "characters"),
    ("too-many-nodes", "def f(x):\n    return [" + "1, " * 5_000 + "]", F, "AST nodes"),
    # syntax and entry
    ("syntax-error", "def f(x) return x", S, "SyntaxError"),
    ("indentation-error", "def f(x):\nreturn x", S, "line"),
    ("nul-byte", "def f(x):\n    return x\x00", S, ""),
    ("no-f", "def g(x):\n    return x", N, "'def f"),
    ("f-is-lambda", "f = lambda x: x", N, "'def f"),
    ("f-is-class", "class f:\n    pass", N, "'def f"),
    ("f-nested-only", "def g():\n    def f(x):\n        return x\n    return f", N, "'def f"),
    ("async-f", "async def f(x):\n    return x", N, "'def f"),
    ("empty", "", N, "'def f"),
]


@pytest.mark.parametrize(
    ("program", "code", "fragment"), [a[1:] for a in ATTACKS], ids=[a[0] for a in ATTACKS]
)
def test_attack_is_refused(program: str, code: ErrorCode, fragment: str) -> None:
    error = check_program(program)
    assert error is not None, "the gate let the program through"
    assert error.code == code, error.message
    assert fragment in error.message


def test_design_message_for_forbidden_import() -> None:
    error = check_program("import os\ndef f(x):\n    return x")
    assert error is not None
    assert error.to_dict() == {"code": "forbidden", "message": "import of 'os' is not allowed"}


ALLOWED = {
    "identity": "def f(x):\n    return x",
    "helpers-and-recursion": """
        def fib(n):
            return n if n < 2 else fib(n - 1) + fib(n - 2)

        def f(n):
            return [fib(i) for i in range(n)]
    """,
    "class-with-dunders": """
        from dataclasses import dataclass

        @dataclass(frozen=True)
        class Point:
            x: int
            y: int

            def __post_init__(self):
                if self.x < 0:
                    raise ValueError("negative")

        class Stack:
            __slots__ = ("items",)

            def __init__(self):
                self.items = []

            def __len__(self):
                return len(self.items)

        class Counted(Stack):
            def __init__(self):
                super().__init__()

        def f(pairs):
            s = Counted()
            for a, b in pairs:
                s.items.append(Point(a, b))
            return len(s), type(s).__name__
    """,
    "allowed-imports": """
        import math
        import collections.abc
        from collections import Counter, defaultdict, deque
        from functools import lru_cache, reduce
        from itertools import accumulate, combinations, permutations
        import heapq, bisect, re, string, operator
        from typing import List, Optional
        from fractions import Fraction
        from math import floor, gcd

        def f(words: List[str], k: int) -> Optional[list]:
            counts = Counter(w.lower() for w in words)
            top = heapq.nlargest(k, counts.items(), key=operator.itemgetter(1))
            return [w for w, _ in top] or None
    """,
    "comprehensions-lambdas-walrus": """
        def f(xs):
            squares = {x: x * x for x in xs if (y := x % 3) != 1}
            return sorted(squares.items(), key=lambda kv: (-kv[1], kv[0]))
    """,
    "getattr-constant": """
        class Box:
            value = 3

        def f(x):
            setattr(Box, "value", x)
            return getattr(Box, "value", 0) + getattr(Box(), "missing", 1)
    """,
    "operator-getters-with-constants": """
        from __future__ import annotations
        from operator import attrgetter, itemgetter, methodcaller

        def f(words):
            lengths = sorted(words, key=methodcaller("lower"))
            return [attrgetter("real")(len(w)) for w in lengths], list(map(itemgetter(0), words))
    """,
    "own-variables-named-like-builtins": """
        def f(rows, dir=1):
            out = {}
            for id, name in rows:
                out[id * dir] = name
            hash = sum(out) % 7
            return out, hash
    """,
    "print-and-main-idiom": """
        def f(s):
            print("debug", s)
            return s[::-1]

        if __name__ == "__main__":
            print(f("abc"))
    """,
    "exceptions-and-generators": """
        def gen(n):
            for i in range(n):
                yield i * 2

        def f(n):
            try:
                return sum(gen(n)) // (n - 3)
            except ZeroDivisionError as e:
                return str(e)
    """,
    "strings-mentioning-os-sys-and-inspect": """
        def f(s):
            return "{} - {}".format(s.replace("os", "sys"), "inspect the builtins and importlib")
    """,
    "private-attributes-the-program-defines": """
        class Stack:
            def __init__(self):
                self._items = []
                self.__size = 0

            def _push(self, x):
                self._items.append(x)
                self.__size += 1

        def f(xs):
            s = Stack()
            for x in xs:
                s._push(x)
            return s._items
    """,
    "format-with-literal-templates": """
        def f(xs, d):
            show = "{}!".format
            head = str.format("{0}:{1:>{2}}", "n", len(xs), 4)
            tail = "{a}/{b}".format_map(d)
            return [show(x) for x in xs], head, tail, f"{xs!r:>10}", '{"json": [1, 2]}'
    """,
    "module-names-and-submodules": """
        import collections.abc
        import typing as t
        from collections import abc
        from collections.abc import Iterable
        import string

        def f(x: t.Optional[int]):
            return (
                isinstance(x, collections.abc.Sized),
                isinstance(x, abc.Hashable) and isinstance(x, Iterable),
                string.ascii_lowercase[:3],
            )
    """,
    "regex": """
        import re

        def f(text):
            return re.findall(r"[a-z]+", text.lower())
    """,
    "match-statement": """
        def f(cmd):
            match cmd:
                case ["go", direction]:
                    return direction
                case {"x": x}:
                    return x
                case _:
                    return None
    """,
}


@pytest.mark.parametrize("program", list(ALLOWED.values()), ids=list(ALLOWED))
def test_ordinary_program_passes(program: str) -> None:
    assert check_program(_program(program)) is None


def test_every_allowed_module_is_importable_and_passes() -> None:
    for module in sorted(ALLOWED_IMPORTS):
        __import__(module)
        assert check_program(f"import {module}\ndef f(x):\n    return x") is None, module


def test_caps_come_from_the_policy() -> None:
    program = "def f(x):\n    return x + 1\n"
    assert check_program(program, GatePolicy(max_program_chars=len(program))) is None
    small = check_program(program, GatePolicy(max_program_chars=len(program) - 1))
    assert small is not None and small.code == F
    few_nodes = check_program(program, GatePolicy(max_ast_nodes=3))
    assert few_nodes is not None and few_nodes.code == F
    with_os = GatePolicy(
        allowed_imports=DEFAULT_POLICY.allowed_imports | {"os"},
        module_attributes={
            **DEFAULT_POLICY.module_attributes,
            "os": frozenset(),
            "os.path": frozenset({"join"}),
        },
    )
    assert check_program("import os.path\ndef f(x):\n    return os.path.join(x)", with_os) is None
    getcwd = check_program("import os\ndef f(x):\n    return os.getcwd()", with_os)
    assert getcwd is not None and "'getcwd'" in getcwd.message


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_program_chars": 0},
        {"max_ast_nodes": 0},
        {"entry_name": "not a name"},
        {"allowed_imports": frozenset({"os"})},
    ],
)
def test_policy_rejects_nonsense(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=r"must|identifier|module_attributes"):
        GatePolicy(**kwargs)  # type: ignore[arg-type]


# Ways around a module allowlist: allowed modules re-export forbidden ones, and names can be built at
# run time. (id, program, a fragment the message must name); every one must be FORBIDDEN.
BYPASSES = [
    ("star-import-re", "from re import *\ndef f(x):\n    return x", "star import"),
    ("star-import-typing", "from typing import *\ndef f(x):\n    return sys.modules", "star import"),
    ("typing-sys", "import typing\ndef f(x):\n    return typing.sys.modules['os']", "'sys'"),
    ("enum-sys", "import enum\ndef f(x):\n    return enum.sys.argv", "'sys'"),
    ("enum-builtins", "import enum\ndef f(x):\n    return enum.bltns.open('/etc/passwd')", "'bltns'"),
    ("from-enum-builtins", "from enum import bltns\ndef f(x):\n    return bltns", "'bltns'"),
    ("dataclasses-builtins", "import dataclasses\ndef f(x):\n    return dataclasses.builtins", "'builtins'"),
    ("dataclasses-inspect", "from dataclasses import inspect\ndef f(x):\n    return x", "'inspect'"),
    (
        "json-codecs-open",
        "import json\ndef f(x):\n    return json.codecs.open('/etc/passwd').read()",
        "'codecs'",
    ),
    ("json-alias-codecs", "import json as j\ndef f(x):\n    return j.codecs", "'codecs'"),
    ("dataclasses-thread", "import dataclasses\ndef f(x):\n    return dataclasses._thread", "'_thread'"),
    ("from-dataclasses-thread", "from dataclasses import _thread\ndef f(x):\n    return x", "'_thread'"),
    ("functools-rlock", "from functools import RLock\ndef f(x):\n    return x", "'RLock'"),
    ("statistics-random", "import statistics\ndef f(x):\n    return statistics.random.random()", "'random'"),
    (
        "statistics-urandom",
        "import statistics\ndef f(x):\n    return statistics.random._urandom(8)",
        "'_urandom'",
    ),
    ("fractions-sys", "from fractions import sys\ndef f(x):\n    return x", "'sys'"),
    ("textwrap-re-private", "import textwrap\ndef f(x):\n    return textwrap.re._compiler", "'_compiler'"),
    ("collections-private-sys", "import collections\ndef f(x):\n    return collections._sys", "'_sys'"),
    ("submodule-not-listed", "import json.decoder\ndef f(x):\n    return x", "'json.decoder'"),
    ("module-as-value", "import typing\ndef f(x):\n    m = typing\n    return m.sys", "'typing'"),
    ("module-in-list", "import typing\ndef f(x):\n    return [typing][0].sys", "'sys'"),
    ("getattr-module", "import typing\ndef f(x):\n    return getattr(typing, 'List')", "'typing'"),
    ("attribute-sys-of-object", "def f(x):\n    return x.sys", "'sys'"),
    ("private-attribute-of-object", "import re\ndef f(x):\n    return re.compile(x)._x", "'_x'"),
    (
        "get-type-hints-evaluates",
        "import typing\ndef g(x: 'ev' + 'al'):\n    pass\ndef f(x):\n    return typing.get_type_hints(g)",
        "'get_type_hints'",
    ),
    ("forward-ref", "from typing import ForwardRef\ndef f(x):\n    return ForwardRef(x)", "'ForwardRef'"),
    (
        "formatter-attribute-chain",
        "import string\ndef f(x):\n    return string.Formatter().get_field('0.real', [x], {})",
        "'Formatter'",
    ),
    (
        "formatter-vformat",
        "from string import Formatter\ndef f(x):\n    return Formatter().vformat('{0.real}', [x], {})",
        "'Formatter'",
    ),
    ("format-attribute-field", "def f(x):\n    return '{0.real}'.format(x)", "{0.real}"),
    ("format-index-field", "def f(x):\n    return '{0[0]}'.format(x)", "{0[0]}"),
    ("format-nested-spec-field", "def f(x):\n    return '{0:{1.real}}'.format(x, 3)", "{1.real}"),
    ("format-computed-template", "def f(x, t):\n    return t.format(x)", "'format'"),
    ("format-computed-via-str", "def f(x, t):\n    return str.format(t, x)", "'format'"),
    ("format-map-field", "def f(d):\n    return '{a.real}'.format_map(d)", "{a.real}"),
    ("format-map-computed", "def f(d, t):\n    return t.format_map(d)", "'format_map'"),
    ("format-method-as-value", "def f(x, t):\n    g = t.format\n    return g(x)", "'format'"),
    ("template-in-string-constant", "def f(x):\n    t = '{0.real}'\n    return t.upper()", "{0.real}"),
    ("json-load-file", "import json\ndef f(x):\n    return json.load(x)", "'load'"),
]


@pytest.mark.parametrize(("program", "fragment"), [b[1:] for b in BYPASSES], ids=[b[0] for b in BYPASSES])
def test_bypass_is_refused(program: str, fragment: str) -> None:
    error = check_program(program)
    assert error is not None, "the gate let the program through"
    assert error.code == F, error.message
    assert fragment in error.message


@pytest.mark.parametrize("text", ["inspect", "import os, sys", "importlib and builtins", "subprocess"])
def test_module_words_in_strings_are_text(text: str) -> None:
    assert check_program(f"def f(x):\n    return x + {text!r}") is None


def test_module_lists_hold_real_names_and_no_modules() -> None:
    """Every listed name exists, none is a module, and none is a function that reaches files or code."""
    dangerous = {open, eval, exec, compile, __import__, getattr, vars, globals}
    for module_name, names in DEFAULT_POLICY.module_attributes.items():
        module = importlib.import_module(module_name)
        for name in names:
            value = getattr(module, name)
            assert not isinstance(value, types.ModuleType), f"{module_name}.{name} is a module"
            assert not any(value is d for d in dangerous), f"{module_name}.{name} is {value!r}"
        assert not any(n.startswith("_") for n in names), module_name
