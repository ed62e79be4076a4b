"""Run the executor service with uvicorn (what ``azr executor serve`` calls)."""

from __future__ import annotations

import ipaddress
import logging

from azr.services.executor_service.app import create_app
from azr.services.executor_service.settings import ExecutorServiceSettings

log = logging.getLogger(__name__)

GRACEFUL_SHUTDOWN_S = 30
"""On SIGTERM, running batches get this long to finish before their connections are closed."""


class InsecureBindError(ValueError):
    """Serving beyond loopback without a token would let anyone on the network run programs."""


def serve_executor(settings: ExecutorServiceSettings, *, host: str, port: int) -> None:
    """Serve until interrupted. Settings not given here come from ``AZR_EXECUTOR_*`` variables."""
    if settings.token is None and not _is_loopback(host):
        raise InsecureBindError(
            f"refusing to serve on {host} without a token: set AZR_EXECUTOR_TOKEN, or bind to 127.0.0.1"
        )
    import uvicorn

    log.info("executor service on http://%s:%d (backend %s)", host, port, settings.backend)
    uvicorn.run(
        create_app(settings),
        host=host,
        port=port,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        log_config=None,  # keep the CLI's logging set-up
    )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
