"""GET/DELETE /v1/tasks over real buffers: filters, cursor paging that holds while tasks are added,
a task's use, removal with auth."""

from __future__ import annotations

import redis
from fastapi.testclient import TestClient

from azr.core.task import Origin, TaskType, TaskUse
from azr.services.store.buffers import TaskBuffers
from azr.services.store.keys import Keys
from azr.services.store.metrics import Counters, task_use
from tests.services.api.conftest import AUTH
from tests.services.api.run_data import proposed_task


def _all_pages(api: TestClient, **params: object) -> list[dict[str, object]]:
    items: list[dict[str, object]] = []
    cursor = None
    while True:
        query = {**params, **({"cursor": cursor} if cursor else {})}
        page = api.get("/v1/tasks", params=query).json()
        items += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            return items


def test_filters_by_type_origin_and_step(api: TestClient, store: redis.Redis, keys: Keys) -> None:
    buffers = TaskBuffers(store, keys)
    for task_type in TaskType:
        buffers[task_type].add_many(proposed_task(task_type, i, step=i) for i in range(10))
    buffers.add(proposed_task(TaskType.ABDUCTION, 99, step=4, origin=Origin.USER))
    abduction = _all_pages(api, type="abduction", limit=3)
    assert len(abduction) == 11
    assert {t["type"] for t in abduction} == {"abduction"}
    user = _all_pages(api, origin="user")
    assert [(t["type"], t["step"]) for t in user] == [("abduction", 4)]
    window = _all_pages(api, step_min=3, step_max=5, type="deduction")
    assert sorted(t["step"] for t in window) == [3, 4, 5]
    everything = _all_pages(api, limit=7)
    assert len(everything) == 31
    assert len({t["id"] for t in everything}) == 31


def test_paging_is_stable_while_tasks_are_added(api: TestClient, store: redis.Redis, keys: Keys) -> None:
    buffer = TaskBuffers(store, keys)[TaskType.DEDUCTION]
    buffer.add_many(proposed_task(TaskType.DEDUCTION, i, step=i) for i in range(25))
    first = api.get("/v1/tasks", params={"type": "deduction", "limit": 10}).json()
    assert [t["step"] for t in first["items"]] == list(range(24, 14, -1))
    buffer.add_many(proposed_task(TaskType.DEDUCTION, i, step=i) for i in range(100, 120))
    seen = [t["id"] for t in first["items"]]
    cursor = first["next_cursor"]
    while cursor:
        page = api.get("/v1/tasks", params={"type": "deduction", "limit": 10, "cursor": cursor}).json()
        seen += [t["id"] for t in page["items"]]
        cursor = page["next_cursor"]
    assert seen == [proposed_task(TaskType.DEDUCTION, i, step=i).id for i in range(24, -1, -1)]


def test_a_cursor_from_elsewhere_is_422(api: TestClient) -> None:
    for cursor in ("garbage", "deduction.x", "cuda.3"):
        reply = api.get("/v1/tasks", params={"cursor": cursor})
        assert reply.status_code == 422
        assert reply.headers["content-type"] == "application/problem+json"
    wrong_type = api.get("/v1/tasks", params={"cursor": "induction.5", "type": "deduction"})
    assert wrong_type.status_code == 422


def test_a_task_comes_with_its_use_so_far(api: TestClient, store: redis.Redis, keys: Keys) -> None:
    task = proposed_task(TaskType.INDUCTION, 3)
    TaskBuffers(store, keys).add(task)
    fresh = api.get(f"/v1/tasks/{task.id}").json()
    assert fresh["use"] == {
        "drawn_as_reference": 0, "drawn_for_solving": 0, "solve_attempts": 0, "solved": 0, "solve_rate": None
    }  # fmt: skip
    Counters(store, keys).incr_many(
        {
            task_use(task.id, TaskUse.REFERENCE): 2,
            task_use(task.id, TaskUse.SOLVE): 5,
            task_use(task.id, TaskUse.SOLVE_ATTEMPTS): 4,
            task_use(task.id, TaskUse.SOLVED): 1,
        }
    )
    used = api.get(f"/v1/tasks/{task.id}").json()
    assert used["message"] == "scale and shift"
    assert used["use"] == {
        "drawn_as_reference": 2, "drawn_for_solving": 5, "solve_attempts": 4, "solved": 1, "solve_rate": 0.25
    }  # fmt: skip
    assert api.get("/v1/tasks/" + "0" * 24).status_code == 404
    assert api.get("/v1/tasks/not-an-id").status_code == 422


def test_delete_needs_auth_and_keeps_the_counts_right(
    api: TestClient, store: redis.Redis, keys: Keys
) -> None:
    buffers = TaskBuffers(store, keys)
    task = proposed_task(TaskType.ABDUCTION, 1, origin=Origin.USER)
    buffers.add(task)
    assert api.delete(f"/v1/tasks/{task.id}").status_code == 401
    assert api.delete(f"/v1/tasks/{task.id}", headers=AUTH).status_code == 204
    assert api.delete(f"/v1/tasks/{task.id}", headers=AUTH).status_code == 404
    assert api.get(f"/v1/tasks/{task.id}").status_code == 404
    counts = buffers[TaskType.ABDUCTION].counts()
    assert (counts.size, counts.by_origin[Origin.USER]) == (0, 0)
    assert buffers.add(task), "a removed task may be submitted again"
