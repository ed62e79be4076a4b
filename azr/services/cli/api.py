"""``azr api``: serve the REST API and the dashboard over a run's Redis store.

Options override the settings read from the environment (``AZR_API_*``, see
``azr.services.api.settings.ApiSettings``); the bearer token is read from ``AZR_API_TOKEN`` only, never
from the command line, where other users of the machine could see it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer

app = typer.Typer(help="Serve the REST API and the live dashboard.")


class ExecutorChoice(StrEnum):
    POOL = "pool"  # sandboxes started by this process
    SERVICE = "service"  # the executor service, over HTTP


@app.callback(invoke_without_command=True)
def serve(
    *,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65_535, help="Port to listen on.")] = 8000,
    redis_url: Annotated[str | None, typer.Option("--redis-url", help="The run's Redis.")] = None,
    prefix: Annotated[str | None, typer.Option("--prefix", help="Key prefix of the run.")] = None,
    executor: Annotated[
        ExecutorChoice | None, typer.Option("--executor", help="Who validates seeds (default: pool).")
    ] = None,
    executor_url: Annotated[str | None, typer.Option("--executor-url", help="Executor service URL.")] = None,
    log_level: Annotated[
        str, typer.Option("--log-level", help="uvicorn's log level: debug, info, warning, error.")
    ] = "info",
    allow_unisolated: Annotated[
        bool, typer.Option("--allow-unisolated", help="Let the pool run with weaker isolation (development).")
    ] = False,
) -> None:
    """Serve until interrupted; the dashboard is at http://HOST:PORT/."""
    import uvicorn

    from azr.services.api.app import create_app
    from azr.services.api.settings import ApiSettings

    overrides: dict[str, Any] = {
        "redis_url": redis_url,
        "redis_prefix": prefix,
        "executor": executor.value if executor else None,
        "executor_url": executor_url,
    }
    if allow_unisolated:
        overrides["executor_allow_unisolated"] = True
    settings = ApiSettings(**{k: v for k, v in overrides.items() if v is not None})
    if settings.token is None and host not in ("127.0.0.1", "localhost", "::1"):
        typer.echo(f"warning: writes are open to anyone who reaches {host}; set AZR_API_TOKEN", err=True)
    uvicorn.run(create_app(settings), host=host, port=port, log_level=log_level)
