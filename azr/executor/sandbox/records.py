"""The records a sandbox run is asked for and answers with, shared by the sandbox and every backend.

They live in the sandbox package because the supervisor speaks them on the wire (``protocol``); backends
import them from here, so nothing in ``azr.executor.sandbox`` depends on a backend.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from azr.executor.errors import ExecError
from azr.executor.limits import SandboxLimits


class HashSeedSlot(StrEnum):
    """Which sandbox interpreter runs a request; each slot has its own hash seed.

    Determinism is checked by running a task in several slots and comparing canonical texts, which
    catches output that depends on string hash order (set iteration order, for example). Which slots a
    task runs in is derived from its id (``azr.executor.hash_order``).
    """

    A = "a"
    B = "b"
    C = "c"
    D = "d"
    E = "e"
    F = "f"
    G = "g"
    H = "h"
    I = "i"  # noqa: E741 - the ninth slot
    J = "j"


PRIMARY_SLOTS: tuple[HashSeedSlot, ...] = (HashSeedSlot.A, HashSeedSlot.B)
"""Slots a backend starts with (probes, answers); the others start on the first request that needs them."""


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
