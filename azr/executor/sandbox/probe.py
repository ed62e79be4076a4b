"""What a supervisor observes about its own isolation, measured from inside (never assumed).

The parent sends ``{"op": "probe", "tcp_port", "read_paths", "write_dirs"}``: a TCP port it listens on
(on 127.0.0.1), host paths that must be unreadable and directories that must be unwritable. The reply
lists what was actually reachable; the backend turns it into an ``IsolationReport``.

Covered: network reachability of the host's loopback, visible network interfaces, readability and
writability of the named paths, own PID (1 means a PID namespace of its own), user id, effective
capabilities, the seccomp mode and the no_new_privs flag. Not covered: anything not named by the parent
(the probe cannot enumerate the host).
"""

from __future__ import annotations

import ctypes
import os
import socket
from pathlib import Path

from azr.executor.sandbox.protocol import JsonObject

_CAPABILITY_VERSION_3 = 0x20080522
_CONNECT_TIMEOUT_S = 0.5
_PR_GET_SECCOMP = 21
_PR_GET_NO_NEW_PRIVS = 39


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def effective_capabilities() -> int | None:
    """The effective capability mask of this process (``capget``), or ``None`` if it cannot be read."""
    header = _CapHeader(_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if ctypes.CDLL(None, use_errno=True).capget(ctypes.byref(header), data) != 0:
        return None
    return int(data[0].effective) | (int(data[1].effective) << 32)


def _connects(port: object) -> bool:
    if not isinstance(port, int):
        return False
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=_CONNECT_TIMEOUT_S):
            return True
    except OSError:
        return False


def _readable(path: str) -> bool:
    try:
        if Path(path).is_dir():
            list(Path(path).iterdir())
        else:
            os.close(os.open(path, os.O_RDONLY))
    except OSError:
        return False
    return True


def _writable(directory: str) -> bool:
    target = Path(directory) / f".azr-probe-{os.getpid()}"
    try:
        os.close(os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except OSError:
        return False
    target.unlink()
    return True


def _prctl_get(option: int) -> int | None:
    result = int(ctypes.CDLL(None, use_errno=True).prctl(option, 0, 0, 0, 0))
    return None if result < 0 else result


def kernel_guards() -> dict[str, int | None]:
    """This process's seccomp mode (0 none, 2 filter) and no_new_privs flag, from ``prctl`` (no /proc)."""
    return {"seccomp": _prctl_get(_PR_GET_SECCOMP), "no_new_privs": _prctl_get(_PR_GET_NO_NEW_PRIVS)}


def describe_kernel_guards(seen: JsonObject) -> str:
    """The seccomp mode and no_new_privs flag of a probe reply, for an isolation report's details."""
    modes: dict[object, str] = {0: "no seccomp filter", 1: "seccomp strict mode", 2: "seccomp filter active"}
    privs: dict[object, str] = {0: "off", 1: "on"}
    mode = modes.get(seen.get("seccomp"), "seccomp mode unknown")
    return f"{mode}, no_new_privs {privs.get(seen.get('no_new_privs'), 'unknown')}"


def _strings(value: object) -> list[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def probe(message: JsonObject, scratch_root: Path) -> JsonObject:
    try:
        interfaces = [name for _, name in socket.if_nameindex()]
    except OSError:
        interfaces = []
    return {
        "op": "probe",
        "pid": os.getpid(),
        "uid": os.getuid(),
        "cap_eff": effective_capabilities(),
        **kernel_guards(),
        "interfaces": interfaces,
        "tcp_connected": _connects(message.get("tcp_port")),
        "readable": [p for p in _strings(message.get("read_paths")) if _readable(p)],
        "writable": [d for d in _strings(message.get("write_dirs")) if _writable(d)],
        "scratch_writable": _writable(str(scratch_root)),
    }
