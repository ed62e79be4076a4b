"""How the ``local`` backend starts a supervisor: inside bubblewrap namespaces, or (only when the operator
explicitly allows it) as a plain child process.

Threat model of the bubblewrap launch, per supervisor (all created once, at start, never per job):
- new user namespace with an unprivileged uid and every capability dropped;
- new network namespace (no interface but a loopback that is down: no network at all);
- new PID namespace with the supervisor as PID 1 (see ``supervisor``), IPC, UTS and cgroup namespaces;
- a read-only root built from scratch: ``/usr`` (and the ``/bin``, ``/lib*`` links), the Python
  installation and the ``azr.executor`` sources only; no ``/etc``, ``/home``, ``/root`` (except the Python
  installation if it lives there), ``/proc``, ``/work`` or host ``/tmp``; ``/dev/null`` only;
- a private, size-capped tmpfs at ``/tmp`` as the only writable place (job scratch);
- an environment of exactly PYTHONHASHSEED and PYTHONPATH; ``--die-with-parent`` so nothing outlives us.

Not covered: kernel bugs (no seccomp filter), CPU and memory shares between sandboxes (rlimits per job
only, no cgroup), timing side channels.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import azr

SANDBOX_UID = 65534
"""uid and gid inside the sandbox (``nobody``): unprivileged, owns nothing on the host."""
SANDBOX_LIB = "/opt/azr"
"""Where the ``azr`` sources appear inside the sandbox (on its PYTHONPATH)."""
SANDBOX_SCRATCH = "/tmp"
PYTHON_FLAGS = ("-S", "-s", "-P", "-B")
"""No site packages, no user site, no script dir on sys.path, no bytecode writes (not -I: see supervisor)."""
_SYSTEM_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")


@dataclass(frozen=True, slots=True)
class LaunchPlan:
    """One supervisor's command line and environment."""

    argv: tuple[str, ...]
    env: dict[str, str]
    isolated: bool
    """Whether the command wraps the supervisor in bubblewrap namespaces."""
    details: tuple[str, ...] = field(default=())


def source_root() -> Path:
    """The directory holding the ``azr`` package (the repository root for an editable install)."""
    return Path(azr.__file__).resolve().parent.parent


def python_executable() -> Path:
    """The real interpreter behind a virtual environment: the sandbox needs only the standard library."""
    return Path(getattr(sys, "_base_executable", sys.executable)).resolve()


def _python_root() -> Path:
    """The installation directory the interpreter needs (``sys.base_prefix``), checked to hold it."""
    prefix = Path(sys.base_prefix).resolve()
    if not python_executable().is_relative_to(prefix):
        raise RuntimeError(f"interpreter {python_executable()} lies outside its prefix {prefix}")
    return prefix


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for name in _SYSTEM_DIRS:
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", str(host.readlink()), str(host)]
        elif host.is_dir():
            args += ["--ro-bind", str(host), str(host)]
    return args


def _staged(stage: Path, python_root: Path, package: Path) -> list[str]:
    """As root: bind the sources into ``stage`` in a private mount namespace, then become ``nobody``.

    Root's files (a Python under /root, say) are not reachable by ``nobody``; bind mounts made while still
    root make them reachable there without changing any permission on the host. Running bubblewrap as
    ``nobody`` maps the sandbox user to an unprivileged host user, so RLIMIT_NPROC is enforced (the kernel
    never enforces it for real root) and an escape would land with no privileges.
    """
    tools = [shutil.which(name) for name in ("unshare", "sh", "mount", "setpriv")]
    if None in tools:
        raise FileNotFoundError("running as root needs unshare, sh, mount and setpriv (util-linux)")
    script = (
        'mount --bind "$1" "$3/python" && mount --bind "$2" "$3/azr" && shift 3 && '
        f'exec setpriv --reuid={SANDBOX_UID} --regid={SANDBOX_UID} --clear-groups --inh-caps=-all -- "$@"'
    )
    for name in ("python", "azr"):
        (stage / name).mkdir(mode=0o755, parents=True, exist_ok=True)
    stage.chmod(0o755)
    return [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "--",
        "sh",
        "-euc",
        script,
        "sh",
        *map(str, (python_root, package, stage)),
    ]


def bwrap_plan(hash_seed: int, scratch_bytes: int, stage: Path | None, info_fd: int) -> LaunchPlan | None:
    """The bubblewrap launch, or ``None`` when ``bwrap`` is not installed.

    ``stage`` (an empty directory) is required when running as root; see ``_staged``. bubblewrap writes
    ``{"child-pid": N}`` to ``info_fd``: the host PID of the sandbox's PID 1, whose death ends every
    process of the sandbox.
    """
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None
    python_root, package = _python_root(), source_root() / "azr"
    prefix: list[str] = []
    python_source, package_source = python_root, package
    if os.geteuid() == 0:
        if stage is None:
            raise ValueError("running as root: pass an empty stage directory")
        prefix = _staged(stage, python_root, package)
        python_source, package_source = stage / "python", stage / "azr"
    python_bind = (
        [] if python_root.is_relative_to("/usr") else ["--ro-bind", str(python_source), str(python_root)]
    )
    argv = [
        *prefix,
        bwrap,
        "--info-fd",
        str(info_fd),
        "--unshare-user",
        "--unshare-net",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_UID),
        "--cap-drop",
        "ALL",
        "--as-pid-1",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--setenv",
        "PYTHONHASHSEED",
        str(hash_seed),
        "--setenv",
        "PYTHONPATH",
        SANDBOX_LIB,
        *_system_binds(),
        *python_bind,
        "--ro-bind",
        str(package_source / "__init__.py"),
        f"{SANDBOX_LIB}/azr/__init__.py",
        "--ro-bind",
        str(package_source / "executor"),
        f"{SANDBOX_LIB}/azr/executor",
        "--dev-bind",
        "/dev/null",
        "/dev/null",
        "--size",
        str(scratch_bytes),
        "--perms",
        "0700",
        "--tmpfs",
        SANDBOX_SCRATCH,
        "--chdir",
        SANDBOX_SCRATCH,
        "--remount-ro",
        "/",
        str(python_executable()),
        *PYTHON_FLAGS,
        "-m",
        "azr.executor.sandbox.supervisor",
        "--scratch",
        SANDBOX_SCRATCH,
    ]
    details = (f"bubblewrap ({bwrap})", f"sandbox uid {SANDBOX_UID}" + (" (host nobody)" if prefix else ""))
    return LaunchPlan(tuple(argv), env={}, isolated=True, details=details)


def plain_plan(hash_seed: int, scratch_dir: Path) -> LaunchPlan:
    """No namespaces: rlimits and fork only. For development machines that forbid user namespaces."""
    argv = [
        str(python_executable()),
        *PYTHON_FLAGS,
        "-m",
        "azr.executor.sandbox.supervisor",
        "--scratch",
        str(scratch_dir),
    ]
    env = {"PYTHONHASHSEED": str(hash_seed), "PYTHONPATH": str(source_root())}
    return LaunchPlan(tuple(argv), env=env, isolated=False, details=("no namespaces (unisolated)",))
