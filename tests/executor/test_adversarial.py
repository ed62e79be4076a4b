"""Attacks on the sandbox, run straight through a backend (no static gate: the isolation is under test).

Each row attacks one property and states the exact error class, or the exact safe output, it must end in.
After every attack the sandbox must hold nothing but its supervisor, and the next job must still work.
"""

from __future__ import annotations

import os
import socket
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from azr.executor.backends.base import HashSeedSlot, RunOutcome
from azr.executor.errors import ErrorCode
from azr.executor.limits import SandboxLimits
from azr.executor.values import parse_value

from .conftest import CANARY_SECRET, Harness, stray_processes

FAST = SandboxLimits(timeout_s=1.5, cpu_time_s=1)
FORKING = SandboxLimits(timeout_s=1.5, cpu_time_s=1, processes=4)
ROOMY = SandboxLimits(timeout_s=10, cpu_time_s=10)
"""For attacks that must hit another limit first, even on a loaded machine."""
REPO_FILE = Path(__file__).resolve().parents[2] / "pyproject.toml"


@dataclass(frozen=True)
class Attack:
    name: str
    program: str
    expect: ErrorCode | str | Callable[[str], bool]
    """An error class, the exact output text, or a predicate on the output text."""
    args: tuple[str, ...] = ("1",)
    limits: SandboxLimits = field(default=FAST)
    only: str | None = None
    """The backend whose layout the expectation describes (a container image has its own /etc, say)."""


def verdict(outcome: RunOutcome) -> ErrorCode | str:
    """The request's error class, or the single call's error class, or its output text."""
    if outcome.error is not None:
        return outcome.error.code
    (call,) = outcome.calls
    if call.error is not None:
        return call.error.code
    assert call.output is not None
    return call.output


def _program(body: str, imports: str = "") -> str:
    return (
        (imports + "\n" if imports else "") + "def f(x):\n" + textwrap.indent(textwrap.dedent(body), "    ")
    )


ATTACKS = [
    # --- resources ---------------------------------------------------------------------------------
    Attack("fork-bomb", _program("while True:\n    os.fork()", "import os"), ErrorCode.RUNTIME_ERROR),
    Attack(
        "fork-bomb-with-budget",
        _program("while True:\n    try:\n        os.fork()\n    except OSError:\n        pass", "import os"),
        ErrorCode.TIMEOUT,
        limits=FORKING,
    ),
    Attack("memory-bomb", _program("return [0] * 10**10"), ErrorCode.MEMORY_LIMIT),
    Attack(
        "memory-growth",
        _program("a = []\nwhile True:\n    a.append(' ' * 10**7)"),
        ErrorCode.MEMORY_LIMIT,
        limits=ROOMY,
    ),
    Attack("busy-loop", _program("while True:\n    pass"), ErrorCode.TIMEOUT),
    Attack(
        "cpu-limit-before-wall-clock",
        _program("while True:\n    pass"),
        ErrorCode.TIMEOUT,
        limits=SandboxLimits(timeout_s=4, cpu_time_s=1),
    ),
    Attack(
        "ignore-sigxcpu",
        _program("signal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass", "import signal"),
        ErrorCode.TIMEOUT,
        limits=SandboxLimits(timeout_s=4, cpu_time_s=1),
    ),
    Attack("sleep", _program("time.sleep(60)", "import time"), ErrorCode.TIMEOUT),
    Attack(
        "ignore-sigterm",
        _program("signal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)", "import signal, time"),
        ErrorCode.TIMEOUT,
    ),
    Attack("module-level-loop", "while True:\n    pass\ndef f(x):\n    return x", ErrorCode.TIMEOUT),
    Attack("huge-string-output", _program("return 'a' * 10**8"), ErrorCode.OUTPUT_LIMIT),
    Attack("huge-list-output", _program("return ['x' * 1000] * 2000"), ErrorCode.OUTPUT_LIMIT),
    Attack("giant-integer", _program("return 10 ** 100000"), ErrorCode.UNSUPPORTED_VALUE),
    Attack("giant-integer-compute", _program("return 1 << 2**33"), ErrorCode.MEMORY_LIMIT),
    Attack("deep-recursion", _program("return f(x)"), ErrorCode.RUNTIME_ERROR),
    Attack(
        "stack-overflow-crash",
        _program(
            "sys.setrecursionlimit(10**8)\na = []\nfor _ in range(10**6):\n    a = [a]\nreturn repr(a)",
            "import sys",
        ),
        ErrorCode.RUNTIME_ERROR,
        limits=ROOMY,
    ),
    Attack("big-file", _program("open('big', 'wb').write(b'x' * 10**7)"), ErrorCode.RUNTIME_ERROR),
    Attack(
        "fill-scratch",
        _program("for i in range(10**6):\n    open(f'f{i}', 'wb').write(b'x' * 10**6)"),
        ErrorCode.RUNTIME_ERROR,
    ),
    # --- secrets and host files --------------------------------------------------------------------
    Attack("environment", _program("return dict(os.environ)", "import os"), "{}"),
    Attack(
        "parent-environment-via-proc",
        _program("return open('/proc/1/environ').read()"),
        ErrorCode.RUNTIME_ERROR,
    ),
    Attack("etc-shadow", _program("return open('/etc/shadow').read()"), ErrorCode.RUNTIME_ERROR),
    Attack(
        "etc-passwd", _program("return open('/etc/passwd').read()"), ErrorCode.RUNTIME_ERROR, only="local"
    ),
    Attack("repository-file", _program(f"return open({str(REPO_FILE)!r}).read()"), ErrorCode.RUNTIME_ERROR),
    Attack("work-tree", _program("return os.listdir('/work')", "import os"), ErrorCode.RUNTIME_ERROR),
    Attack(
        "cwd-is-empty-scratch",
        _program("return [os.listdir('.'), os.getcwd() != '/']", "import os"),
        "[[], True]",
    ),
    Attack(
        "sandbox-root-is-minimal",
        _program("return sorted(os.listdir('/'))", "import os"),
        lambda out: (
            "'etc'" not in out and "'home'" not in out and "'work'" not in out and "'proc'" not in out
        ),
        only="local",
    ),
    # --- network -----------------------------------------------------------------------------------
    Attack(
        "dns",
        _program("return socket.getaddrinfo('example.com', 80)", "import socket"),
        ErrorCode.RUNTIME_ERROR,
    ),
    Attack(
        "network-interfaces",
        _program("return [n for _, n in socket.if_nameindex()]", "import socket"),
        "['lo']",
    ),
    # --- writes outside scratch --------------------------------------------------------------------
    Attack("write-root", _program("open('/evil', 'w').write('x')"), ErrorCode.RUNTIME_ERROR),
    Attack("write-usr", _program("open('/usr/lib/evil', 'w').write('x')"), ErrorCode.RUNTIME_ERROR),
    Attack(
        "tamper-with-executor-code",
        _program(
            "p = os.path.dirname(values.__file__) + '/values.py'\nopen(p, 'a').write('x')",
            "import os\nfrom azr.executor import values",
        ),
        ErrorCode.RUNTIME_ERROR,
    ),
    Attack("write-dev-null-dir", _program("open('/dev/evil', 'w').write('x')"), ErrorCode.RUNTIME_ERROR),
    # --- processes ---------------------------------------------------------------------------------
    Attack(
        "kill-parent", _program("os.kill(os.getppid(), signal.SIGKILL)\nreturn 1", "import os, signal"), "1"
    ),
    Attack(
        "interrupt-parent",
        _program("os.kill(1, signal.SIGINT)\nos.kill(1, signal.SIGTERM)\nreturn 1", "import os, signal"),
        "1",
    ),
    Attack(
        "kill-everything",
        _program(
            "try:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError:\n    pass\nreturn 1", "import os, signal"
        ),
        "1",
    ),
    Attack(
        "ptrace-parent",
        _program("libc = ctypes.CDLL(None)\nreturn libc.ptrace(16, 1, 0, 0)", "import ctypes"),
        "-1",
    ),
    Attack(
        "daemon-double-fork",
        _program(
            "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(600)\n"
            "    os._exit(0)\nreturn 1",
            "import os, time",
        ),
        "1",
        limits=FORKING,
    ),
    Attack(
        "orphan-outlives-timeout",
        _program(
            "if os.fork() == 0:\n    os.setsid()\n    time.sleep(600)\ntime.sleep(600)", "import os, time"
        ),
        ErrorCode.TIMEOUT,
        limits=FORKING,
    ),
    Attack(
        "see-other-processes", _program("return os.getpid() > 1 and os.getppid() == 1", "import os"), "True"
    ),
    # --- forging results ---------------------------------------------------------------------------
    Attack(
        "print-protocol-markers",
        _program("print('\\x00\\x00\\x00\\x10{\"calls\": []}', flush=True)\nreturn 1"),
        "1",
    ),
    Attack(
        "write-frame-to-stdout",
        _program(
            "os.write(1, b'\\x00\\x00\\x00\\x0f{\"output\":\"9\"}')\nos.write(2, b'x')\nreturn 1", "import os"
        ),
        "1",
    ),
    Attack(
        "write-other-descriptors",
        _program(
            "n = 0\nfor fd in range(4, 1024):\n    try:\n        os.write(fd, b'{}')\n        n += 1\n"
            "    except OSError:\n        pass\nreturn n",
            "import os",
        ),
        "0",
    ),
    Attack(
        "append-to-result-pipe",
        _program('os.write(3, b\'{"output": "9"}\')\nreturn 1', "import os"),
        ErrorCode.RUNTIME_ERROR,
    ),
    Attack(
        "forge-infra-error",
        _program(
            'os.write(3, b\'{"error": {"code": "infra_error", "message": ""}}\')\nos._exit(0)', "import os"
        ),
        ErrorCode.RUNTIME_ERROR,
    ),
    Attack(
        "forge-garbage-flood",
        _program("while True:\n    os.write(3, b'x' * 65536)", "import os"),
        ErrorCode.OUTPUT_LIMIT,
    ),
    Attack("close-result-pipe", _program("os.close(3)\nreturn 1", "import os"), ErrorCode.RUNTIME_ERROR),
    Attack("exit-early", _program("os._exit(0)", "import os"), ErrorCode.RUNTIME_ERROR),
    Attack("sys-exit", _program("sys.exit(0)", "import sys"), ErrorCode.RUNTIME_ERROR),
    Attack("keyboard-interrupt", _program("raise KeyboardInterrupt"), ErrorCode.RUNTIME_ERROR),
    Attack("abort", _program("os.abort()", "import os"), ErrorCode.RUNTIME_ERROR),
    Attack("realtime-signal", _program("os.kill(os.getpid(), 40)", "import os"), ErrorCode.RUNTIME_ERROR),
    Attack("segfault", _program("ctypes.string_at(0)", "import ctypes"), ErrorCode.RUNTIME_ERROR),
    # --- values that lie ---------------------------------------------------------------------------
    Attack(
        "lying-eq",
        "class A:\n    def __eq__(self, o):\n        return True\n"
        "    def __repr__(self):\n        return '1'\ndef f(x):\n    return A()",
        ErrorCode.UNSUPPORTED_VALUE,
    ),
    Attack(
        "int-subclass",
        "class I(int):\n    def __repr__(self):\n        return '2'\ndef f(x):\n    return I(1)",
        ErrorCode.UNSUPPORTED_VALUE,
    ),
    Attack(
        "str-subclass", "class S(str):\n    pass\ndef f(x):\n    return S('a')", ErrorCode.UNSUPPORTED_VALUE
    ),
    Attack(
        "list-subclass", "class L(list):\n    pass\ndef f(x):\n    return L([1])", ErrorCode.UNSUPPORTED_VALUE
    ),
    Attack("nan", _program("return float('nan')"), ErrorCode.UNSUPPORTED_VALUE),
    Attack("self-reference", _program("a = []\na.append(a)\nreturn a"), ErrorCode.UNSUPPORTED_VALUE),
    Attack("generator", _program("return (i for i in range(3))"), ErrorCode.UNSUPPORTED_VALUE),
    # --- programs that cannot run ------------------------------------------------------------------
    Attack("syntax-error", "def f(x:\n    return x", ErrorCode.SYNTAX_ERROR),
    Attack("null-byte", "def f(x):\n    return x\x00", ErrorCode.SYNTAX_ERROR),
    Attack("no-entry", "def g(x):\n    return x", ErrorCode.NO_ENTRY_FUNCTION),
    Attack("entry-not-callable", "f = 3", ErrorCode.NO_ENTRY_FUNCTION),
]


@pytest.fixture(autouse=True)
def sandbox_stays_clean(backend: Harness) -> Iterator[None]:
    yield
    assert not stray_processes(backend), "a process outlived its job"
    assert verdict(backend.run("def f(x):\n    return x + 1", ["41"])) == "42", "the sandbox stopped working"


def _check(outcome: RunOutcome, expect: ErrorCode | str | Callable[[str], bool]) -> None:
    got = verdict(outcome)
    if isinstance(expect, str):  # an ErrorCode is a str too: both compare exactly
        assert got == expect, outcome
    else:
        assert isinstance(got, str) and not isinstance(got, ErrorCode) and expect(got), outcome


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_attack(backend: Harness, attack: Attack) -> None:
    if attack.only is not None and attack.only != backend.name:
        pytest.skip(f"describes the {attack.only} backend's sandbox layout")
    outcome = backend.run(attack.program, attack.args, limits=attack.limits)
    _check(outcome, attack.expect)
    assert CANARY_SECRET not in repr(outcome)


def test_attack_table_is_large_enough() -> None:
    assert len({a.name for a in ATTACKS}) == len(ATTACKS) >= 40


# --- attacks that need something from the test process ----------------------------------------------


def test_host_tmp_canary_is_unreadable(backend: Harness, tmp_path: Path) -> None:
    canary = tmp_path / "canary.txt"
    canary.write_text(CANARY_SECRET)
    canary.chmod(0o644)
    tmp_path.chmod(0o755)
    outcome = backend.run(_program(f"return open({str(canary)!r}).read()"))
    assert verdict(outcome) == ErrorCode.RUNTIME_ERROR


def test_host_home_is_not_visible(backend: Harness) -> None:
    home = Path.home()
    # Only the directories leading to a Python installed under the home (pyenv) may appear there.
    secrets = {e.name for e in home.iterdir()} - set(Path(sys.base_prefix).resolve().parts)
    if not secrets:
        pytest.skip("the host home holds nothing that could leak")
    program = _program("try:\n    return sorted(os.listdir(x))\nexcept OSError:\n    return []", "import os")
    shown = parse_value(str(verdict(backend.run(program, [repr(str(home))]))))
    assert isinstance(shown, list)
    assert not set(shown) & secrets


def test_tcp_listener_on_host_loopback_is_unreachable(backend: Harness) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.settimeout(0.2)
        port = listener.getsockname()[1]
        program = _program(
            "socket.create_connection(('127.0.0.1', x), timeout=1)\nreturn 'connected'", "import socket"
        )
        assert verdict(backend.run(program, [str(port)])) == ErrorCode.RUNTIME_ERROR
        with pytest.raises(TimeoutError):
            listener.accept()


def test_udp_to_host_loopback_never_arrives(backend: Harness) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.settimeout(0.3)
        program = _program(
            "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "try:\n    s.sendto(b'x', ('127.0.0.1', x))\nexcept OSError:\n    pass\nreturn 0",
            "import socket",
        )
        assert verdict(backend.run(program, [str(listener.getsockname()[1])])) == "0"
        with pytest.raises(TimeoutError):
            listener.recv(16)


def test_host_abstract_unix_socket_is_unreachable(backend: Harness) -> None:
    name = f"\0azr-sandbox-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(name)
        listener.listen()
        program = _program(
            "s = socket.socket(socket.AF_UNIX)\ns.connect(x)\nreturn 'connected'", "import socket"
        )
        assert verdict(backend.run(program, [repr(name)])) == ErrorCode.RUNTIME_ERROR


# --- state between jobs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tamper", "observe", "expected"),
    [
        pytest.param(
            "import builtins\nbuiltins.len = lambda o: 99", "return len([1, 2])", "2", id="builtins"
        ),
        pytest.param(
            "import math\nmath.pi = 3",
            "import math\nreturn math.pi",
            "3.141592653589793",
            id="module-attribute",
        ),
        pytest.param(
            "import sys\nsys.modules['json'] = None",
            "import json\nreturn json.dumps(1)",
            "'1'",
            id="sys-modules",
        ),
        pytest.param(
            "open('/tmp/left', 'w').write('x')",
            "import os\nreturn os.path.exists('/tmp/left')",
            "False",
            id="tmp-file",
        ),
        pytest.param(
            "open('left', 'w').write('x')", "import os\nreturn os.listdir('.')", "[]", id="scratch-file"
        ),
    ],
)
def test_no_state_leaks_between_jobs(backend: Harness, tamper: str, observe: str, expected: str) -> None:
    tampering = backend.run(_program(tamper + "\nreturn 0"))
    assert verdict(tampering) == "0"
    assert verdict(backend.run(_program(observe))) == expected


# --- programs that need a real module -------------------------------------------------------------


@pytest.mark.parametrize(
    ("program", "expected"),
    [
        pytest.param(
            "from dataclasses import dataclass\n@dataclass\nclass Item:\n    name: str\n"
            "def f(x):\n    return Item(x).name",
            "1",
            id="dataclass",
        ),
        pytest.param(
            "import enum\nclass C(enum.Enum):\n    A = 1\ndef f(x):\n    return C(x).name", "'A'", id="enum"
        ),
        pytest.param(
            # as in a fresh `python3 -c` run, the guard's demo code runs too (and input() finds no stdin)
            "def f(x):\n    return x\nif __name__ == '__main__':\n    print(f(input()))",
            ErrorCode.RUNTIME_ERROR,
            id="main-guard",
        ),
        pytest.param("def f(x):\n    return __name__", "'__main__'", id="name-is-main"),
    ],
)
def test_programs_run_as_a_module(backend: Harness, program: str, expected: str) -> None:
    assert verdict(backend.run(program)) == expected


# --- nondeterminism ---------------------------------------------------------------------------------

HASH_ORDER = _program("return list({'apple', 'banana', 'cherry', 'date', 'elder', 'fig', 'grape', 'kiwi'})")


def test_hash_order_differs_between_slots_and_is_stable_within_one(backend: Harness) -> None:
    a1 = verdict(backend.run(HASH_ORDER, slot=HashSeedSlot.A))
    a2 = verdict(backend.run(HASH_ORDER, slot=HashSeedSlot.A))
    b1 = verdict(backend.run(HASH_ORDER, slot=HashSeedSlot.B))
    assert a1 == a2
    assert a1 != b1


@pytest.mark.parametrize(
    "program",
    [
        pytest.param(_program("return id(x)"), id="id"),
        pytest.param(_program("return time.time()", "import time"), id="time"),
        pytest.param(_program("return random.random()", "import random"), id="random"),
    ],
)
def test_nondeterministic_sources_still_produce_values(backend: Harness, program: str) -> None:
    """The sandbox runs them; the determinism check in the parent is what rejects such tasks."""
    got = verdict(backend.run(program))
    assert isinstance(got, str) and not isinstance(got, ErrorCode)
