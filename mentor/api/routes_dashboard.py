"""The analyst dashboard: one static page at /dashboard whose script reads the analyst API with the analyst token.

The page holds no data and needs no token to load: the script asks for the token, keeps it in sessionStorage
(this tab only) and sends it as `Authorization: Bearer` to the /v1 analyst routes, which do all the checking.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, HTMLResponse

from mentor.errors import NotFound

router = APIRouter(include_in_schema=False)

WEB = Path(__file__).resolve().parent.parent / "web"
ASSETS = {
    "dashboard.js": "text/javascript; charset=utf-8",
    "dashboard.css": "text/css; charset=utf-8",
}
# An hour, as for the box's files; the page names each asset with its content hash, so a release is seen at once.
ASSET_HEADERS = {"Cache-Control": "public, max-age=3600"}


@cache
def page() -> str:
    """dashboard.html with each asset's URL carrying a hash of its content."""
    html = (WEB / "dashboard.html").read_text(encoding="utf-8")
    for name in ASSETS:
        digest = hashlib.sha256((WEB / name).read_bytes()).hexdigest()[:12]
        html = html.replace(f"/dashboard/assets/{name}", f"/dashboard/assets/{name}?v={digest}")
    return html


@router.get("/dashboard", response_class=HTMLResponse)
def dashboard() -> HTMLResponse:
    """The analyst dashboard (the middleware's CSP allows only this origin's scripts; none is inline)."""
    return HTMLResponse(page())


@router.get("/dashboard/assets/{name}")
def dashboard_asset(name: str) -> FileResponse:
    """The dashboard's script and styles."""
    media_type = ASSETS.get(name)
    if media_type is None:
        raise NotFound(f"no dashboard asset {name!r}")
    return FileResponse(WEB / name, media_type=media_type, headers=ASSET_HEADERS)
