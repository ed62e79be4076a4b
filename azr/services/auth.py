"""Bearer-token checks shared by the HTTP services."""

from __future__ import annotations

import secrets

from fastapi.security import HTTPAuthorizationCredentials
from pydantic import SecretStr


def bearer_allows(credentials: HTTPAuthorizationCredentials | None, token: SecretStr | None) -> bool:
    """Whether a request may write: no token is configured, or it presented that token (compared in
    constant time, so the comparison leaks nothing of the token)."""
    if token is None:
        return True
    given = credentials.credentials if credentials is not None else ""
    return secrets.compare_digest(given.encode(), token.get_secret_value().encode())
