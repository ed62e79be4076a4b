"""Everything the services keep in Redis: task buffers, the experience stream, metrics, run state.

All state lives in Redis under one key prefix (``RedisConfig.prefix``; key names in ``keys.py``), so
every object here is cheap to construct and a restarted process sees the same buffers and stream. The
API is synchronous (redis-py): callers are Ray actors with their own threads and the REST API's thread
pool, and keeping one code path is worth more than an ``asyncio`` twin. Clients are made by ``connect``
(``connection.py``: bounded waits, retries, a check of Redis's persistence): they return raw bytes (the
stream carries binary arrays), and modules decode text themselves. ``embedded.py`` starts a private
``redis-server`` for a run or a test.
"""

from __future__ import annotations

from azr.services.store.connection import connect

__all__ = ["connect"]
