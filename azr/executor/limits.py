"""Resource limits of one sandboxed run. Every limit names its unit."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    timeout_s: float = 5.0
    """Wall-clock limit of one call of ``f``; the whole process group is killed when it fires."""
    cpu_time_s: int = 5
    """RLIMIT_CPU of the job process (a busy loop dies by SIGXCPU even if the wall clock lags)."""
    memory_bytes: int = 512 * 1024**2
    """RLIMIT_AS of the job process; exceeding it is reported as ``memory_limit``."""
    output_bytes: int = 1024**2
    """Largest canonical result text accepted from one call; longer is ``output_limit`` (never cut)."""
    stdio_bytes: int = 64 * 1024
    """stdout/stderr the program may write before it is cut off; it is never part of the result."""
    file_size_bytes: int = 1024**2
    """RLIMIT_FSIZE: the largest file the program may write in its scratch directory."""
    open_files: int = 64
    """RLIMIT_NOFILE of the job process."""
    processes: int = 1
    """Processes the job may run at once (RLIMIT_NPROC inside its own user namespace, or pids limit)."""

    def __post_init__(self) -> None:
        if self.timeout_s <= 0 or self.cpu_time_s <= 0:
            raise ValueError("timeout_s and cpu_time_s must be positive")
        if self.memory_bytes < 32 * 1024**2:
            raise ValueError("memory_bytes below 32 MiB cannot start an interpreter; raise it")
        if min(self.output_bytes, self.stdio_bytes, self.file_size_bytes, self.open_files) <= 0:
            raise ValueError("output_bytes, stdio_bytes, file_size_bytes and open_files must be positive")
        if self.processes < 1:
            raise ValueError("processes must be at least 1 (the job itself)")
