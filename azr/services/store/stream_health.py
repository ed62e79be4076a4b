"""Gauges of the experience stream for monitoring (the learner puts them into its metrics stream, and a
Prometheus exporter can read them): how much is pending where, how old the oldest pending entry is,
which consumers are alive, how big the backlog and the ledgers are, and how much memory Redis uses."""

from __future__ import annotations

from typing import Any

import redis

from azr.services.config import StreamConfig
from azr.services.store.keys import Keys
from azr.services.store.replies import as_text


def stream_health(client: redis.Redis, keys: Keys, config: StreamConfig) -> dict[str, float]:
    """Named gauges (floats): ``stream/pending``, ``stream/pending/<consumer>``,
    ``stream/oldest_pending_age_s``, ``stream/consumers``, ``stream/consumers_live``, ``stream/backlog``,
    ``stream/backlog_bytes``, ``stream/ledger_ids``, ``stream/ledger_bytes``, ``stream/quarantine``,
    ``redis/used_memory_bytes``, ``redis/maxmemory_bytes``."""
    stream, ledgers = keys.experiences(), [keys.admitted(), keys.trained()]
    pipe = client.pipeline(transaction=False)
    pipe.xpending_range(stream, config.group, min="-", max="+", count=1)
    pipe.xinfo_consumers(stream, config.group)
    pipe.xlen(stream)
    pipe.memory_usage(stream)
    for ledger in ledgers:
        pipe.zcard(ledger)
        pipe.memory_usage(ledger)
    pipe.xlen(keys.quarantine())
    pipe.info("memory")
    pipe.time()
    oldest, consumers, backlog, backlog_bytes, *rest = pipe.execute()
    ledger_ids = sum(int(n) for n in rest[0:4:2])
    ledger_bytes = sum(int(b or 0) for b in rest[1:4:2])
    quarantine, memory, (now_s, now_us) = rest[4], rest[5], rest[6]
    now_ms = int(now_s) * 1000 + int(now_us) // 1000
    gauges: dict[str, float] = {
        "stream/oldest_pending_age_s": _age_s(oldest, now_ms),
        "stream/consumers": float(len(consumers)),
        "stream/consumers_live": float(sum(1 for c in consumers if int(c["idle"]) < config.reclaim_idle_ms)),
        "stream/backlog": float(backlog),
        "stream/backlog_bytes": float(backlog_bytes or 0),
        "stream/ledger_ids": float(ledger_ids),
        "stream/ledger_bytes": float(ledger_bytes),
        "stream/quarantine": float(quarantine),
        "redis/used_memory_bytes": float(memory["used_memory"]),
        "redis/maxmemory_bytes": float(memory.get("maxmemory", 0)),
    }
    pending = 0
    for c in consumers:
        gauges[f"stream/pending/{as_text(c['name'])}"] = float(c["pending"])
        pending += int(c["pending"])
    gauges["stream/pending"] = float(pending)
    return gauges


def _age_s(oldest: list[dict[str, Any]], now_ms: int) -> float:
    """Age of the oldest pending entry, from the time in its id (when it was added)."""
    if not oldest:
        return 0.0
    added_ms = int(as_text(oldest[0]["message_id"]).split("-")[0])
    return max(0.0, (now_ms - added_ms) / 1000)
