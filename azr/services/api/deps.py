"""Shared dependencies of the routers, as named ``Annotated`` aliases.

They are coroutines on purpose: FastAPI runs a plain function dependency in a worker thread, a hop that
costs more than the dependency itself on every request."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from azr.services.api.problems import ProblemError
from azr.services.api.state import ApiState
from azr.services.auth import bearer_allows


async def _state(request: Request) -> ApiState:
    state: ApiState = request.app.state.api
    return state


State = Annotated[ApiState, Depends(_state)]
_bearer = HTTPBearer(auto_error=False, description="Needed on writes when the API has a token.")


async def _authorize(
    state: State, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> None:
    if not bearer_allows(credentials, state.settings.token):
        raise ProblemError(401, "missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"})


Authorized = Annotated[None, Depends(_authorize)]


async def client_address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


ClientAddress = Annotated[str, Depends(client_address)]
