"""The private redis-server: starts on a free port with AOF and noeviction, survives a kill -9 with what it
had acknowledged (AOF reload), stops gracefully, and refuses clearly when redis-server is missing."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from azr.services.store.embedded import EmbeddedRedis, EmbeddedRedisError

pytestmark = pytest.mark.redis


def test_serves_with_aof_and_noeviction_and_stops_gracefully(tmp_path: Path) -> None:
    with EmbeddedRedis(tmp_path / "redis") as server:
        client = redis.Redis.from_url(server.url)
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        assert client.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
        assert client.config_get("save") == {"save": ""}
        client.set("k", "v")
        pid = server.pid
        client.close()
    assert not server.running() and pid is not None
    assert (tmp_path / "redis" / "redis.log").read_text().count("ready to exit") == 1


def test_a_killed_server_restarts_on_its_port_with_its_data(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path)
    try:
        url = server.start()
        client = redis.Redis.from_url(url)
        # Redis writes the AOF before it replies, so a reply received survives a kill of the process.
        client.set("kept", "yes")
        client.close()
        server.kill()
        assert not server.running()
        assert server.restart() == url
        client = redis.Redis.from_url(url)
        assert client.get("kept") == b"yes"
        client.close()
    finally:
        server.stop()


def test_without_aof_a_restart_starts_empty(tmp_path: Path) -> None:
    with EmbeddedRedis(tmp_path, appendonly=False) as server:
        client = redis.Redis.from_url(server.url)
        client.set("gone", "soon")
        server.restart()
        assert client.get("gone") is None
        client.close()


def test_refuses_clearly_without_redis_server(tmp_path: Path) -> None:
    with pytest.raises(EmbeddedRedisError, match="is not installed"):
        EmbeddedRedis(tmp_path, executable="no-such-redis-server").start()


def test_a_taken_port_fails_with_the_servers_log(tmp_path: Path) -> None:
    taken = r"(?s)exited with status.*Address already in use"
    with EmbeddedRedis(tmp_path / "a") as first, pytest.raises(EmbeddedRedisError, match=taken):
        EmbeddedRedis(tmp_path / "b", port=first.port).start()
