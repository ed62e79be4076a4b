"""The contract between the executor's trusted judge and the places that run untrusted programs.

A backend receives a program and argument lists, runs ``f`` on each in isolation inside a sandbox process
started with a given hash seed, and returns, per call, either the canonical literal text of what ``f``
returned or a typed error. It never judges anything: parsing answers, comparing outputs and deciding
verdicts stay in the trusted parent (``azr.executor.ops``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from azr.executor.sandbox.records import CallOutcome, HashSeedSlot, RunOutcome, RunRequest

__all__ = ["Backend", "CallOutcome", "HashSeedSlot", "IsolationReport", "RunOutcome", "RunRequest"]


@dataclass(frozen=True, slots=True)
class IsolationReport:
    """What a backend actually achieved, reported to operators and tests (never assumed)."""

    backend: str
    network: bool  # no network reachable, loopback included
    filesystem: bool  # host home, /tmp and other jobs' files unreadable; writes only to scratch
    pid: bool  # cannot see or signal processes outside the sandbox
    user: bool  # unprivileged inside the sandbox
    rlimits: bool
    details: tuple[str, ...] = ()

    @property
    def full(self) -> bool:
        return self.network and self.filesystem and self.pid and self.user and self.rlimits


class Backend(Protocol):
    @property
    def isolation(self) -> IsolationReport: ...

    async def run(self, request: RunRequest) -> RunOutcome:
        """Run ``request``; never raises for anything the program does (that is an outcome)."""
        ...

    async def aclose(self) -> None:
        """Stop every process or container the backend started, and wait until they are gone."""
        ...
