"""``azr seed add``: send seed tasks from a file to a running API (``POST /v1/seeds``).

    AZR_API_TOKEN=... azr seed add seeds.jsonl --url http://127.0.0.1:8000

The file's lines are those ``azr eval --tasks`` and ``azr selfplay --seed-tasks`` read (executor jobs or
bare tasks); outputs in it are dropped, the API's executor computes them. Every seed is checked against
the API's seed rules here, before anything is sent; then the seeds go in requests of at most ``--batch``,
each all or none on the server. Sending a file again is safe: a seed already present answers "exists".
The token is read from ``AZR_API_TOKEN`` only, never from the command line.

Exit codes: 0 when every seed is stored, 1 when the API cannot be reached or fails, 2 when the file or a
seed is refused (each reason is printed; seeds that earlier requests stored stay stored).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from pydantic import ValidationError
from rich.console import Console
from tqdm import tqdm

from azr.core.task import Task
from azr.eval.suites import load_tasks_file
from azr.services.api.schemas import SeedIn

app = typer.Typer(help="Give self-play seed tasks to a running API.")

RETRYABLE = (429, 503)
"""Statuses that say "not now" (rate limit, executor failure) rather than "no": waited out and retried."""


class SeedsRefusedError(Exception):
    """The API (or the local check of its seed rules) refused seeds: one reason per refused seed."""

    def __init__(self, reasons: Sequence[str], stored: int = 0) -> None:
        super().__init__(f"{len(reasons)} seed(s) refused")
        self.reasons = list(reasons)
        self.stored = stored


class ApiError(Exception):
    """The API could not be reached, or failed in a way that says nothing about the seeds."""


def seeds_from(tasks: Sequence[Task]) -> list[SeedIn]:
    """``tasks`` as request bodies, checked against the API's seed rules; every refusal is reported."""
    seeds, reasons = [], []
    for number, task in enumerate(tasks, start=1):
        body: dict[str, Any] = {"type": task.type.value, "program": task.program, "inputs": list(task.inputs)}
        if task.message:
            body["message"] = task.message
        try:
            seeds.append(SeedIn.model_validate(body))
        except ValidationError as exc:
            reasons.append(f"task {number}: {'; '.join(_reason(error) for error in exc.errors())}")
    if reasons:
        raise SeedsRefusedError(reasons)
    return seeds


def send_seeds(
    client: httpx.Client,
    seeds: Sequence[SeedIn],
    *,
    batch: int,
    deadline: float,
    on_sent: Callable[[int], None] = lambda _: None,
) -> Counter[str]:
    """POST ``seeds`` in requests of at most ``batch``, waiting out rate limits until ``deadline``
    (``time.monotonic()``); returns how many seeds got each status (``created``, ``exists``). Stops at the
    first refused request: ``SeedsRefusedError`` names the seeds by their position in ``seeds`` and counts
    what earlier requests stored."""
    statuses: Counter[str] = Counter()
    for start in range(0, len(seeds), batch):
        chunk = seeds[start : start + batch]
        body = [seed.model_dump(mode="json", exclude_defaults=True) for seed in chunk]
        reply = _post(client, body, deadline)
        if reply.status_code == 422:
            raise SeedsRefusedError(_refusals(reply, offset=start), stored=statuses.total())
        if reply.status_code not in (200, 201):
            raise ApiError(_failure(reply))
        for result in reply.json()["results"]:
            statuses[result["status"]] += 1
        on_sent(len(chunk))
    return statuses


def _post(client: httpx.Client, body: list[dict[str, Any]], deadline: float) -> httpx.Response:
    while True:
        try:
            reply = client.post("/v1/seeds", json=body)
        except httpx.TransportError as exc:
            raise ApiError(f"cannot reach the API at {client.base_url}: {exc}") from exc
        if reply.status_code not in RETRYABLE:
            return reply
        wait_s = _retry_after(reply)
        if time.monotonic() + wait_s > deadline:
            raise ApiError(f"gave up waiting: {_failure(reply)}")
        time.sleep(wait_s)


def _retry_after(reply: httpx.Response) -> float:
    try:
        return max(0.1, float(reply.headers.get("Retry-After", "1")))
    except ValueError:
        return 1.0


def _refusals(reply: httpx.Response, *, offset: int) -> list[str]:
    """One line per refused seed of a 422, numbered from 1 in the file."""
    problem = _problem(reply)
    errors = problem.get("errors") or []
    reasons = [
        f"task {offset + int(error['index']) + 1}: {error.get('message', '')}"
        for error in errors
        if isinstance(error, dict) and error.get("status") == "invalid" and "index" in error
    ]
    return reasons or [str(problem.get("detail", reply.text))]


def _failure(reply: httpx.Response) -> str:
    detail = _problem(reply).get("detail") or reply.text or reply.reason_phrase
    hint = {
        401: " (set AZR_API_TOKEN to the API's token)",
        413: " (lower --batch)",
    }.get(reply.status_code, "")
    return f"HTTP {reply.status_code}: {detail}{hint}"


def _problem(reply: httpx.Response) -> dict[str, Any]:
    try:
        body = reply.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _reason(error: Any) -> str:
    where = ".".join(str(part) for part in error.get("loc", ()))
    message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


@app.command("add")
def add(
    file: Annotated[Path, typer.Argument(help="JSONL of tasks or executor jobs.")],
    *,
    url: Annotated[str, typer.Option("--url", help="The API's base URL.")] = "http://127.0.0.1:8000",
    batch: Annotated[
        int, typer.Option("--batch", min=1, max=1_000, help="Seeds per request (the API's limit: 32).")
    ] = 32,
    timeout_s: Annotated[
        float, typer.Option("--timeout", min=1.0, help="Seconds to keep waiting out rate limits, in all.")
    ] = 600.0,
) -> None:
    """Validate the file's seeds against the API's rules, then store them through the API."""
    console = Console(stderr=True, soft_wrap=True)
    try:
        seeds = seeds_from(load_tasks_file(file))
    except (OSError, ValueError) as exc:
        console.print(f"[red]cannot read the seeds: {exc}[/red]")
        raise typer.Exit(2) from exc
    except SeedsRefusedError as exc:
        console.print(f"[red]{file}: {len(exc.reasons)} seed(s) break the seed rules, none sent:[/red]")
        for reason in exc.reasons:
            console.print(f"  {reason}")
        raise typer.Exit(2) from exc
    token = os.environ.get("AZR_API_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    deadline = time.monotonic() + timeout_s
    with (
        httpx.Client(base_url=url, headers=headers, timeout=60.0) as client,
        tqdm(total=len(seeds), unit="seed", desc="seeds", disable=None) as bar,
    ):
        try:
            statuses = send_seeds(client, seeds, batch=batch, deadline=deadline, on_sent=bar.update)
        except SeedsRefusedError as exc:
            console.print(f"[red]{file}: refused ({exc.stored} stored by earlier requests):[/red]")
            for reason in exc.reasons:
                console.print(f"  {reason}")
            raise typer.Exit(2) from exc
        except ApiError as exc:
            console.print(f"[red]{exc}[/red]")
            raise typer.Exit(1) from exc
    counts = ", ".join(f"{n} {status}" for status, n in sorted(statuses.items()))
    typer.echo(f"{file}: {len(seeds)} seed(s) stored ({counts})")
