"""The executor service's 413 body, in FastAPI's own error format (``{"detail": ...}``)."""

from __future__ import annotations

import json


def too_large_detail(max_bytes: int) -> tuple[bytes, bytes]:
    """The 413 response of ``azr.services.body_limit.BodySizeLimit`` for the executor service."""
    return b"application/json", json.dumps({"detail": f"request body larger than {max_bytes} bytes"}).encode()
