"""``/``: the dashboard's page and scripts. The charting library is plotly.js as shipped inside the
``plotly`` wheel from PyPI, served from the installed package: the page works offline, with no CDN."""

from __future__ import annotations

import gzip
from functools import cache
from importlib import resources
from typing import Annotated, Literal

from fastapi import APIRouter, Header, Response

from azr.services.api.problems import ProblemError

router = APIRouter(include_in_schema=False)

_OWN = {"app.js": "text/javascript", "app.css": "text/css", "index.html": "text/html"}
_CACHE = {"Cache-Control": "public, max-age=3600"}


@cache
def _own_file(name: str) -> bytes:
    return resources.files("azr.services.api").joinpath("static", name).read_bytes()


@cache
def _plotly_js_gzip() -> bytes:
    """The library compressed once (about 4.7 MB raw, 1.4 MB compressed)."""
    try:
        raw = resources.files("plotly").joinpath("package_data", "plotly.min.js").read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise ProblemError(503, f"the charting library is missing (pip install plotly): {exc}") from None
    return gzip.compress(raw, compresslevel=6)


@router.get("/")
async def index() -> Response:
    return Response(_own_file("index.html"), media_type="text/html", headers={"Cache-Control": "no-cache"})


@router.get("/static/{name}")
async def static(name: Literal["app.js", "app.css"]) -> Response:
    return Response(_own_file(name), media_type=_OWN[name], headers={"Cache-Control": "no-cache"})


@router.get("/vendor/plotly.min.js")
async def plotly_js(accept_encoding: Annotated[str | None, Header()] = None) -> Response:
    packed = _plotly_js_gzip()
    if "gzip" in (accept_encoding or ""):
        headers = {**_CACHE, "Content-Encoding": "gzip", "Vary": "Accept-Encoding"}
        return Response(packed, media_type="text/javascript", headers=headers)
    return Response(gzip.decompress(packed), media_type="text/javascript", headers=_CACHE)


@router.get("/favicon.ico")
async def favicon() -> Response:
    return Response(status_code=204)
