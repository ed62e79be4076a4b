"""Jobs never see each other, and what ``f`` returns matches a fresh ``python3 -c`` run.

Each attack runs on every backend of ``conftest.BACKEND_FACTORIES``; the job after it must be judged normally.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from azr.executor.errors import ErrorCode

from .conftest import Harness

IDENTITY = "def f(x):\n    return x"

SECRET = "'earlier-job-secret-71c3'"


def _output(harness: Harness, program: str, args: str) -> str | ErrorCode:
    outcome = harness.run(program, (args,))
    assert outcome.error is None, outcome
    call = outcome.calls[0]
    if call.error is not None:
        return call.error.code
    assert call.output is not None
    return call.output


def test_a_job_finds_no_earlier_job_in_memory(backend: Harness) -> None:
    assert _output(backend, IDENTITY, SECRET) == SECRET
    # No container the next job's process can reach (all the collector tracks) holds the earlier input.
    probe = (
        "import gc\n"
        "def f(x):\n"
        "    m = ''.join(['earlier-job-', 'secret-71c3'])\n"
        "    def holds(o):\n"
        "        items = o.values() if isinstance(o, dict) else o\n"
        "        return any(type(v) is str and v is not m and m in v for v in items)\n"
        "    return any(holds(o) for o in gc.get_objects() if isinstance(o, (dict, list, tuple)))"
    )
    assert _output(backend, probe, "0") == "False"
    assert _output(backend, IDENTITY, "7") == "7"


SYSV_WRITE = """
import ctypes
def f(x):
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.msgget(0x5A5A, 0o1666) >= 0 and libc.shmget(0x5A5B, 64 * 1024**2, 0o1666) >= 0
"""
SYSV_READ = """
import ctypes
def f(x):
    libc = ctypes.CDLL(None, use_errno=True)
    return [libc.msgget(0x5A5A, 0o666) >= 0, libc.shmget(0x5A5B, 0, 0o666) >= 0]
"""


def test_system_v_ipc_does_not_outlive_its_job(backend: Harness) -> None:
    assert _output(backend, SYSV_WRITE, "0") == "True"
    assert _output(backend, SYSV_READ, "0") == "[False, False]"
    assert _output(backend, IDENTITY, "7") == "7"


# Programs and calls whose result depends on how CPython builds and runs them.
PARITY = [
    ("def f(d):\n    return list(d)", "{'b': 1, 'a': 2, 'c': 3}"),
    ("def f(s):\n    return [x for x in s]", "{3, 1, 2}"),
    ("def f(x):\n    return x is 'a b c'", "'a b c'"),
    ("def f(x):\n    return __name__", "0"),
    ("class A:\n    pass\ndef f(x):\n    return repr(A)", "0"),
    ("def f(x, y):\n    return [x / y, 0.1 + 0.2, -0.0]", "1, 3"),
    ("import math\ndef f(x):\n    return sorted({math.floor(v) for v in x})", "[2.5, -1.5, 2.0]"),
    # the deepest recursion CPython allows f and a helper: one frame more or less is a different verdict
    (
        "def f(x):\n    c = [0]\n    def p():\n        c[0] += 1\n        p()\n"
        "    try:\n        p()\n    except RecursionError:\n        pass\n    return c[0]",
        "0",
    ),
    ("def f(n):\n    return 0 if n == 0 else 1 + f(n - 1)", "998"),
    (
        "def f(n):\n    try:\n        return 0 if n == 0 else 1 + f(n - 1)\n"
        "    except RecursionError:\n        return -n",
        "999",
    ),
]


@pytest.mark.parametrize(("program", "args"), PARITY)
def test_verdicts_match_a_fresh_cpython(backend: Harness, program: str, args: str) -> None:
    fresh = subprocess.run(
        [sys.executable, "-c", f"{program}\nprint(repr(f({args})))"],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "0"},
    ).stdout.strip()
    assert _output(backend, program, args) == fresh
