"""Run state in Redis: the run id and the current policy version (bumped by the trainer on each publish).

The policy version only moves forward: a late or repeated publish of an older version is ignored, so the
staleness cut (``current - max_staleness``) can never move backwards and re-admit dropped experiences.
"""

from __future__ import annotations

import uuid

import redis

from azr.services.store.keys import Keys
from azr.services.store.replies import as_text

# KEYS: run hash. ARGV: version. Sets policy_version to max(current, version); returns the result.
_ADVANCE = """
local current = tonumber(redis.call('HGET', KEYS[1], 'policy_version') or '0')
local version = tonumber(ARGV[1])
if version > current then
  redis.call('HSET', KEYS[1], 'policy_version', ARGV[1])
  return version
end
return current
"""


class RunState:
    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self._client = client
        self._key = keys.run()
        self._advance = client.register_script(_ADVANCE)

    def run_id(self) -> str:
        """The id of this prefix's run, created on first call (stable across restarts)."""
        self._client.hsetnx(self._key, "run_id", uuid.uuid4().hex[:16])
        return as_text(self._client.hget(self._key, "run_id"))

    def policy_version(self) -> int:
        value = self._client.hget(self._key, "policy_version")
        return 0 if value is None else int(value)

    def advance_policy_version(self, version: int) -> int:
        """Record that weights of ``version`` were published; returns the current version (never lower)."""
        if version < 0:
            raise ValueError(f"policy versions start at 0, got {version}")
        return int(self._advance(keys=[self._key], args=[version]))
