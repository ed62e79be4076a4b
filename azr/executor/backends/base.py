"""The contract between the executor's trusted judge and the places that run untrusted programs.

A backend receives a program and argument lists, runs ``f`` on each in isolation inside a sandbox process
started with a given hash seed, and returns, per call, either the canonical literal text of what ``f``
returned or a typed error. It never judges anything: parsing answers, comparing outputs and deciding
verdicts stay in the trusted parent (``azr.executor.ops``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from azr.executor.errors import ExecError
from azr.executor.limits import SandboxLimits


class HashSeedSlot(StrEnum):
    """Which of two sandbox interpreters runs a request; their hash seeds always differ.

    Determinism is checked by running the same program in both slots and comparing canonical texts, which
    catches output that depends on string hash order (set iteration order, for example).
    """

    A = "a"
    B = "b"


@dataclass(frozen=True, slots=True)
class RunRequest:
    program: str
    args: tuple[str, ...]  # argument-list texts already validated by the parent; one call of f each
    slot: HashSeedSlot = HashSeedSlot.A
    limits: SandboxLimits = field(default_factory=SandboxLimits)


@dataclass(frozen=True, slots=True)
class CallOutcome:
    """One call of ``f``: exactly one of ``output`` and ``error`` is set."""

    output: str | None
    error: ExecError | None


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """All calls of one request, in order; ``error`` is set instead when the program could not run at all
    (syntax error, missing ``f``, a failure of the backend itself)."""

    calls: tuple[CallOutcome, ...]
    error: ExecError | None
    elapsed_ms: float


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
