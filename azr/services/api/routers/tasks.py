"""``/v1/tasks``: list the buffers' tasks (filters, cursor paging), read one with its use, remove one."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from azr.services.api.catalog import BadCursorError, TaskFilter
from azr.services.api.curriculum import task_use
from azr.services.api.deps import Authorized, State
from azr.services.api.problems import PROBLEM_RESPONSES, ProblemError
from azr.services.api.schemas import TaskDetail, TaskOut, TaskPage, TaskQuery
from azr.services.api.state import run_blocking

router = APIRouter(prefix="/v1/tasks", tags=["tasks"])

TaskId = Annotated[str, Path(pattern=r"^[0-9a-f]{24}$", description="The task's content hash.")]


@router.get("", response_model=TaskPage, responses=PROBLEM_RESPONSES, summary="List tasks")
async def list_tasks(state: State, query: Annotated[TaskQuery, Query()]) -> TaskPage:
    """Newest first within a type (types in the order deduction, abduction, induction). Pages stay put
    while tasks are added; a sparse filter may give a short page with a cursor to go on."""
    where = TaskFilter(type=query.type, origin=query.origin, step_min=query.step_min, step_max=query.step_max)
    scan_limit = state.settings.tasks_scan_limit
    try:
        page = await run_blocking(lambda: state.catalog.page(where, query.limit, query.cursor, scan_limit))
    except BadCursorError as exc:
        raise ProblemError(422, str(exc)) from None
    return TaskPage(items=[TaskOut.of(task) for task in page.tasks], next_cursor=page.next_cursor)


@router.get("/{task_id}", response_model=TaskDetail, responses=PROBLEM_RESPONSES, summary="Read a task")
async def read_task(task_id: TaskId, state: State) -> TaskDetail:
    """The task with how self-play has used it: draws as a reference or for solving, solve rate."""

    def read() -> TaskDetail | None:
        task = state.catalog.get(task_id)
        if task is None:
            return None
        (use,) = state.catalog.use([task_id])
        return TaskDetail(**TaskOut.of(task).model_dump(), use=task_use(use))

    detail = await run_blocking(read)
    if detail is None:
        raise ProblemError(404, f"no task {task_id} in the buffers")
    return detail


@router.delete(
    "/{task_id}",
    status_code=204,
    response_class=Response,
    responses=PROBLEM_RESPONSES,
    summary="Remove a task",
)
async def delete_task(task_id: TaskId, state: State, _: Authorized) -> Response:
    """Remove a task from its buffer (it may be proposed or submitted again later)."""
    if not await run_blocking(lambda: state.catalog.remove(task_id)):
        raise ProblemError(404, f"no task {task_id} in the buffers")
    return Response(status_code=204)
