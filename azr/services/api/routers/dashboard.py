"""``/``: the dashboard's page and scripts. The charting library is plotly.js as shipped inside the
``plotly`` wheel from PyPI, served from the installed package: the page works offline, with no CDN."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Literal

from fastapi import APIRouter, Response

from azr.services.api.problems import ProblemError

router = APIRouter(include_in_schema=False)

_OWN = {"app.js": "text/javascript", "app.css": "text/css", "index.html": "text/html"}
_CACHE = {"Cache-Control": "public, max-age=3600"}


@cache
def _own_file(name: str) -> bytes:
    return resources.files("azr.services.api").joinpath("static", name).read_bytes()


@cache
def _plotly_js() -> bytes:
    try:
        return resources.files("plotly").joinpath("package_data", "plotly.min.js").read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise ProblemError(
            503, f"the charting library is not installed (pip install plotly): {exc}"
        ) from None


@router.get("/")
async def index() -> Response:
    return Response(_own_file("index.html"), media_type="text/html", headers={"Cache-Control": "no-cache"})


@router.get("/static/{name}")
async def static(name: Literal["app.js", "app.css"]) -> Response:
    return Response(_own_file(name), media_type=_OWN[name], headers={"Cache-Control": "no-cache"})


@router.get("/vendor/plotly.min.js")
async def plotly_js() -> Response:
    return Response(_plotly_js(), media_type="text/javascript", headers=_CACHE)
