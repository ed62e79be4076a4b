"""POST /v1/seeds against real Redis and the real executor: valid, invalid (one case per error class the
executor can give a seed), duplicate, malformed, oversized, unauthenticated, wrongly typed, rate limited."""

from __future__ import annotations

import pytest
import redis
from fastapi.testclient import TestClient

from azr.core.task import Origin, TaskType
from azr.services.api.app import create_app
from azr.services.store.buffers import TaskBuffers
from azr.services.store.keys import Keys
from tests.services.api.conftest import AUTH, settings_for
from tests.services.executor_service.conftest import ServiceProcess, free_port

PROBLEM = "application/problem+json"
EXECUTOR_TOKEN = "executor-test-token-81ab"
DOUBLE = {"type": "deduction", "program": "def f(x):\n    return x * 2", "inputs": ["3", "[1]"]}


def test_a_valid_seed_is_stored_with_its_gold_outputs(
    api: TestClient, store: redis.Redis, keys: Keys
) -> None:
    reply = api.post("/v1/seeds", json=DOUBLE, headers=AUTH)
    assert reply.status_code == 201, reply.text
    (result,) = reply.json()["results"]
    assert result["status"] == "created"
    assert result["outputs"] == ["6", "[1, 1]"]
    stored = api.get(f"/v1/tasks/{result['task_id']}").json()
    assert stored["origin"] == Origin.USER.value
    assert stored["outputs"] == ["6", "[1, 1]"]
    assert TaskBuffers(store, keys)[TaskType.DEDUCTION].counts().by_origin[Origin.USER] == 1


def test_the_same_seed_twice_is_200_and_stored_once(api: TestClient, store: redis.Redis, keys: Keys) -> None:
    first = api.post("/v1/seeds", json=DOUBLE, headers=AUTH)
    again = api.post("/v1/seeds", json={**DOUBLE, "program": DOUBLE["program"] + "\n"}, headers=AUTH)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["results"][0]["status"] == "exists"
    assert again.json()["results"][0]["task_id"] == first.json()["results"][0]["task_id"]
    assert TaskBuffers(store, keys)[TaskType.DEDUCTION].size() == 1


def test_an_induction_seed_needs_a_message_and_gets_outputs(api: TestClient) -> None:
    body = {"type": "induction", "program": "def f(x):\n    return x + 1", "inputs": ["1", "2", "5"]}
    refused = api.post("/v1/seeds", json=body, headers=AUTH)
    assert refused.status_code == 422
    accepted = api.post("/v1/seeds", json={**body, "message": "add one"}, headers=AUTH)
    assert accepted.status_code == 201
    assert accepted.json()["results"][0]["outputs"] == ["2", "3", "6"]


INVALID = [
    ("syntax_error", "def f(x) return x"),
    ("no_entry_function", "def g(x):\n    return x"),
    ("forbidden", "import os\ndef f(x):\n    return os.getcwd()"),
    ("runtime_error", "def f(x):\n    return x / 0"),
    ("nondeterministic", "def f(x):\n    return list({'apple', 'banana', 'cherry', 'damson', 'elder'})"),
    ("unsupported_value", "def f(x):\n    return float('nan')"),
    ("output_limit", "def f(x):\n    return 'a' * (2 * 1024 ** 2)"),
    ("memory_limit", "def f(x):\n    return len(bytearray(2 * 1024 ** 3))"),
    ("timeout", "def f(x):\n    while True:\n        x += 1"),
]


@pytest.mark.parametrize(("error_class", "program"), INVALID, ids=[case[0] for case in INVALID])
def test_an_invalid_seed_is_422_with_the_executors_error_class(
    api: TestClient, store: redis.Redis, keys: Keys, error_class: str, program: str
) -> None:
    reply = api.post(
        "/v1/seeds", json={"type": "deduction", "program": program, "inputs": ["3"]}, headers=AUTH
    )
    assert reply.status_code == 422, reply.text
    assert reply.headers["content-type"] == PROBLEM
    body = reply.json()
    assert body["status"] == 422
    assert body["error_class"] == error_class
    assert body["errors"][0]["status"] == "invalid"
    assert TaskBuffers(store, keys)[TaskType.DEDUCTION].size() == 0


def test_a_list_is_all_or_nothing_with_an_outcome_per_item(
    api: TestClient, store: redis.Redis, keys: Keys
) -> None:
    bad = {"type": "abduction", "program": "def f(x):\n    return x[5]", "inputs": ["[1]"]}
    reply = api.post("/v1/seeds", json=[DOUBLE, bad], headers=AUTH)
    assert reply.status_code == 422
    items = reply.json()["errors"]
    assert [(i["index"], i["status"]) for i in items] == [(0, "not_stored"), (1, "invalid")]
    assert items[1]["error_class"] == "runtime_error"
    assert sum(TaskBuffers(store, keys).sizes().values()) == 0
    good = {**bad, "program": "def f(x):\n    return x[0]"}
    reply = api.post("/v1/seeds", json=[DOUBLE, good], headers=AUTH)
    assert reply.status_code == 201
    assert [r["outputs"] for r in reply.json()["results"]] == [["6", "[1, 1]"], ["1"]]


IDENTITY = '"type": "deduction", "program": "def f(x): return x"'
MALFORMED = {
    "truncated": b'{"type": "deduction", "program": ',
    "not-json": b"not json at all",
    "program-int": b'{"type": "deduction", "program": 42, "inputs": ["1"]}',
    "unknown-type": b'{"type": "cuda", "program": "def f(x): return x", "inputs": ["1"]}',
    "inputs-str": ("{" + IDENTITY + ', "inputs": "1"}').encode(),
    "no-inputs": ("{" + IDENTITY + ', "inputs": []}').encode(),
    "extra-field": ("{" + IDENTITY + ', "inputs": ["1"], "extra": 1}').encode(),
    "message-on-deduction": ("{" + IDENTITY + ', "inputs": ["1"], "message": "m"}').encode(),
    "empty-list": b"[]",
}


@pytest.mark.parametrize("body", list(MALFORMED.values()), ids=list(MALFORMED))
def test_malformed_or_wrongly_typed_bodies_are_422_problems(api: TestClient, body: bytes) -> None:
    reply = api.post("/v1/seeds", content=body, headers={**AUTH, "Content-Type": "application/json"})
    assert reply.status_code == 422, reply.text
    assert reply.headers["content-type"] == PROBLEM
    assert reply.json()["title"] == "Unprocessable Entity"


def test_an_oversized_body_is_413_before_it_is_parsed(api: TestClient) -> None:
    huge = {"type": "deduction", "program": "def f(x):\n    return x", "inputs": ["1" * 300_000]}
    reply = api.post("/v1/seeds", json=huge, headers=AUTH)
    assert reply.status_code == 413
    assert reply.headers["content-type"] == PROBLEM


def test_too_many_seeds_in_one_request_is_422(api: TestClient) -> None:
    reply = api.post("/v1/seeds", json=[DOUBLE] * 33, headers=AUTH)
    assert reply.status_code == 422


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic eDp5"}])
def test_writes_need_the_bearer_token(api: TestClient, headers: dict[str, str]) -> None:
    reply = api.post("/v1/seeds", json=DOUBLE, headers=headers)
    assert reply.status_code == 401
    assert reply.headers["content-type"] == PROBLEM
    assert reply.headers["www-authenticate"] == "Bearer"


def test_without_a_token_configured_writes_are_open(keys: Keys, store: redis.Redis) -> None:
    with TestClient(create_app(settings_for(keys, token=None))) as client:
        assert client.post("/v1/seeds", json=DOUBLE).status_code == 201


def test_seed_submission_is_rate_limited_per_client(keys: Keys, store: redis.Redis) -> None:
    settings = settings_for(keys, seed_rate_per_s=0.01, seed_burst=3, max_seeds_per_request=3)
    with TestClient(create_app(settings)) as client:
        seeds = [{**DOUBLE, "inputs": [str(i)]} for i in range(3)]
        assert client.post("/v1/seeds", json=seeds, headers=AUTH).status_code == 201
        refused = client.post("/v1/seeds", json={**DOUBLE, "inputs": ["9"]}, headers=AUTH)
        assert refused.status_code == 429
        assert refused.headers["content-type"] == PROBLEM
        assert int(refused.headers["retry-after"]) >= 1


def test_seeds_can_be_validated_by_the_executor_service(keys: Keys, store: redis.Redis) -> None:
    service = ServiceProcess(free_port(), token=EXECUTOR_TOKEN, allow_unisolated=True).start()
    try:
        settings = settings_for(
            keys, executor="service", executor_url=service.url, executor_token=EXECUTOR_TOKEN
        )
        with TestClient(create_app(settings)) as client:
            assert client.get("/readyz").json()["executor"] is True
            created = client.post("/v1/seeds", json=DOUBLE, headers=AUTH)
            refused = client.post(
                "/v1/seeds", json={**DOUBLE, "program": "def g(x):\n    return x"}, headers=AUTH
            )
    finally:
        service.stop()
    assert created.status_code == 201
    assert created.json()["results"][0]["outputs"] == ["6", "[1, 1]"]
    assert (refused.status_code, refused.json()["error_class"]) == (422, "no_entry_function")
