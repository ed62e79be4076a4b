"""Schemathesis over /openapi.json against ``azr api`` as a real server process, Redis and executor: for
every operation, generated requests (valid and invalid) never get a 5xx, and every answer matches the
status codes, content types and schemas the document declares. The event stream is left out (it never
ends); tests/services/api/test_stats.py covers it."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
import redis
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.generation import GenerationMode
from schemathesis.schemas import APIOperation

from azr.services.store.keys import Keys
from tests.services.api.conftest import REDIS_URL, ApiProcess
from tests.services.api.run_data import fill_run

pytestmark = pytest.mark.slow

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


@pytest.fixture(scope="module")
def fuzzed_server() -> Iterator[ApiProcess]:
    keys = Keys(f"azr-apifuzz-{secrets.token_hex(6)}")
    client = redis.Redis.from_url(REDIS_URL)
    fill_run(client, keys, steps=20, tasks_per_type=10)
    # Writes open and the seed rate high, so that generated seeds reach the executor instead of
    # stopping at 401 or 429.
    server = ApiProcess(keys, token=None, seed_rate_per_s=10_000, seed_burst=10_000).start()
    yield server
    server.stop()
    doomed = list(client.scan_iter(match=keys.pattern(), count=1000))
    if doomed:
        client.delete(*doomed)
    client.close()


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=str)
def test_no_server_error_and_every_answer_matches_its_schema(
    fuzzed_server: ApiProcess, mode: GenerationMode
) -> None:
    # Schemathesis's own pytest plugin does not load under this pytest, so each operation's strategy is
    # driven by Hypothesis here.
    schema = schemathesis.openapi.from_url(f"{fuzzed_server.url}/openapi.json").exclude(
        path="/v1/stats/stream"
    )
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 9, [op.label for op in operations]
    for operation in operations:
        if mode is GenerationMode.NEGATIVE and not _has_inputs(operation):
            continue  # nothing to get wrong: no parameter, no body

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        def call(case: schemathesis.Case) -> None:
            case.call_and_validate(checks=CHECKS)

        call()


def _has_inputs(operation: APIOperation) -> bool:
    return any(operation.iter_parameters()) or bool(operation.get_request_payload_content_types())
