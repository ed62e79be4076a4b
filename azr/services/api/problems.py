"""Every error the API answers is ``application/problem+json`` (RFC 9457), whoever raised it."""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from azr.services.api.schemas import Problem

PROBLEM_JSON = "application/problem+json"


class ProblemError(Exception):
    """Raise from a route to answer with a problem document."""

    def __init__(
        self, status: int, detail: str, *, headers: Mapping[str, str] | None = None, **extra: Any
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = dict(headers or {})
        self.extra = extra


def problem_response(
    status: int, detail: str, headers: Mapping[str, str] | None = None, **extra: Any
) -> JSONResponse:
    problem = Problem(title=HTTPStatus(status).phrase, status=status, detail=detail, **extra)
    body = jsonable_encoder(problem.model_dump(exclude_none=True))
    return JSONResponse(body, status_code=status, headers=dict(headers or {}), media_type=PROBLEM_JSON)


def install(app: FastAPI) -> None:
    """Turn routing errors, validation errors and ``ProblemError`` into problem documents."""

    async def on_problem(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ProblemError)
        return problem_response(exc.status, exc.detail, exc.headers, **exc.extra)

    async def on_http(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        return problem_response(exc.status_code, str(exc.detail), exc.headers)

    async def on_invalid(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = [
            {"loc": [str(part) for part in e.get("loc", ())], "msg": str(e.get("msg", "")), "type": e["type"]}
            for e in exc.errors()
        ]
        return problem_response(422, "the request does not match its schema", errors=errors)

    app.add_exception_handler(ProblemError, on_problem)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(RequestValidationError, on_invalid)


_PROBLEM_SCHEMA = {"schema": {"$ref": "#/components/schemas/Problem"}}
PROBLEM_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": Problem, "content": {PROBLEM_JSON: _PROBLEM_SCHEMA}}
    for code in (400, 401, 404, 413, 422, 429, 503)
}
"""Responses every route may give, for the OpenAPI document."""
