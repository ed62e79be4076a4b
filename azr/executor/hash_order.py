"""How many hash seeds a task runs under, and which: the determinism check against hash order.

CPython randomises string hashing per interpreter (``PYTHONHASHSEED``), so iterating a set of strings can
give a different order in another process. A task whose gold output depends on that order would be
"right" or "wrong" by chance later, so validation runs it under several seeds and compares.

Two runs are not enough: for a set of two strings, two seeds give the same order about half the time.
A two-element set of strings lands in an eight-slot table; unless both hash to one slot (probability
1/8, where insertion order wins) the lower slot comes first, so the written order comes out with
probability 9/16. ``n`` independent seeds all agree with probability ``(9/16)**n + (7/16)**n``: 1.1% for
eight runs, 0.36% for ten, less for larger sets (``bench/hash_order.py`` measures the rate). Ten runs
cost five times two, so only tasks that could iterate a hash-ordered collection pay for them: programs
that build or name sets (set literals and comprehensions, ``set``/``frozenset``, set operators on dict
views) and inputs that hold sets. They run under every seed of the pool, in an order derived from the task id.
Every other task runs under the two primary seeds: with the gate on it has no way to reach hash order
(``hash`` and ``id`` are refused), and a string ``hash()`` with the gate off still differs under two
seeds almost surely.

Why a pool and not a seed computed from each task id: CPython reads ``PYTHONHASHSEED`` once, at
interpreter start, so a seed of its own would cost every task a fresh interpreter (about 0.7 s of CPU
with the allowed modules imported, against a few milliseconds for a fork of a warm one). The pool's
seeds belong to warm sandbox interpreters (``protocol.SLOT_HASH_SEEDS``); the non-primary ones start on
the first task that needs them and stay warm.

Not covered: order that depends on something other than the hash seed (``id()``, refused by the gate;
memory addresses in reprs, which fail the literal parser), and sets reached in ways the syntactic scan
cannot see when the gate is off (those tasks still get two seeds).
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Sequence

from azr.executor.sandbox.records import PRIMARY_SLOTS, HashSeedSlot
from azr.executor.values import ValueRejectedError, parse_args

BASE_RUNS = 2
"""Runs of a task that cannot iterate a hash-ordered collection (in the primary slots)."""
SET_RUNS = len(HashSeedSlot)
"""Runs of a task that may: every slot (ten seeds, a miss rate under 0.4% on two-element sets)."""

_SET_NAMES = frozenset({"set", "frozenset", "Set", "FrozenSet", "AbstractSet", "MutableSet"})
_SET_OPERATORS = (ast.BitOr, ast.BitAnd, ast.BitXor, ast.Sub)
_VIEW_METHODS = frozenset({"keys", "items"})


def task_slots(task_id: str, program: str, inputs: Sequence[str]) -> tuple[HashSeedSlot, ...]:
    """The slots a task runs in: the primary pair, or every slot when it may iterate a set."""
    if runs_needed(program, inputs) == BASE_RUNS:
        return PRIMARY_SLOTS
    return seed_slots(task_id, SET_RUNS)


def seed_slots(task_id: str, runs: int) -> tuple[HashSeedSlot, ...]:
    """The first ``runs`` slots of a permutation of all slots derived from ``task_id``."""
    if not 1 <= runs <= len(HashSeedSlot):
        raise ValueError(f"runs must be between 1 and {len(HashSeedSlot)}, got {runs}")
    digest = hashlib.sha256(task_id.encode("utf-8", "surrogatepass")).digest()
    slots = list(HashSeedSlot)
    # Fisher-Yates driven by the digest's bytes: deterministic, and every ordering reachable.
    for i in range(len(slots) - 1, 0, -1):
        j = digest[i] % (i + 1)
        slots[i], slots[j] = slots[j], slots[i]
    return tuple(slots[:runs])


def runs_needed(program: str, inputs: Sequence[str]) -> int:
    """``SET_RUNS`` when the program or its inputs may iterate a set, else ``BASE_RUNS``."""
    return SET_RUNS if _program_uses_sets(program) or any(_holds_set(text) for text in inputs) else BASE_RUNS


def _program_uses_sets(program: str) -> bool:
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return True  # it will fail to run anyway; no reason to guess
    for node in ast.walk(tree):
        if isinstance(node, ast.Set | ast.SetComp):
            return True
        if isinstance(node, ast.Name) and node.id in _SET_NAMES:
            return True
        if isinstance(node, ast.Attribute) and node.attr in _SET_NAMES:
            return True
        if isinstance(node, ast.BinOp | ast.AugAssign) and isinstance(node.op, _SET_OPERATORS):
            operands = (node.left, node.right) if isinstance(node, ast.BinOp) else (node.target, node.value)
            if any(_is_view_call(operand) for operand in operands):
                return True  # ``d.keys() - other`` is a set
    return False


def _is_view_call(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _VIEW_METHODS
    )


def _holds_set(text: str) -> bool:
    if "{" not in text and "set" not in text:
        return False
    try:
        values = parse_args(text)
    except ValueRejectedError:
        return False  # refused later with its own error
    stack: list[object] = list(values)
    while stack:
        value = stack.pop()
        if isinstance(value, set | frozenset):
            return True
        if isinstance(value, list | tuple):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
    return False
