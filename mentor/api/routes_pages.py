"""The browser's side: the demo page at /, the box at /widget.js, and the static files under mentor/web."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import FileResponse, HTMLResponse

from mentor.api.deps import RuntimeDep
from mentor.errors import NotFound
from mentor.pages import render_page

router = APIRouter(include_in_schema=False)

WEB = Path(__file__).resolve().parent.parent / "web"
# What may be served, by suffix; anything else under mentor/web stays private. Licence files have no suffix.
CONTENT_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".md": "text/plain; charset=utf-8",
    "": "text/plain; charset=utf-8",
}
# An hour: a new release reaches browsers the same day, and a page's dozen assets are not refetched per view.
# Access-Control-Allow-Origin: *, because a page on another origin loads /widget.js as a module script, which is a
# CORS request; the files are public and carry no credentials. Whether that page may *call* the API is
# MENTOR_CORS_ORIGINS's decision, and the box says so plainly when it may not.
ASSET_HEADERS = {"Cache-Control": "public, max-age=3600", "Access-Control-Allow-Origin": "*"}


ModuleQuery = Annotated[str | None, Query(max_length=200, description="Module to show; the first one if omitted.")]


@router.get("/", response_class=HTMLResponse)
def demo_page(runtime: RuntimeDep, module: ModuleQuery = None) -> HTMLResponse:
    """The module as a learning app shows it, with the "Ask the mentor" box beside it."""
    modules = list(runtime.modules.values())
    if not modules:
        raise NotFound("no module is loaded yet (run `mentor ingest`)")
    shown = runtime.module(module) if module else modules[0]
    # no-store (the middleware's default) is kept: the page follows the served modules, which a reload can change.
    return HTMLResponse(render_page(shown, modules))


@router.get("/widget.js")
def widget() -> FileResponse:
    """The "Ask the mentor" web component."""
    return asset("widget.js")


@router.get("/static/{path:path}")
def static(path: str) -> FileResponse:
    """A file under mentor/web: page styles, vendored libraries and their licences."""
    return asset(path)


def asset(path: str) -> FileResponse:
    """Serve `path` from mentor/web if it lies inside it and has a servable suffix; 404 otherwise."""
    target = (WEB / path).resolve()
    content_type = CONTENT_TYPES.get(target.suffix)
    if not target.is_relative_to(WEB) or not target.is_file() or content_type is None:
        raise NotFound(f"no static file {path!r}")
    return FileResponse(target, media_type=content_type, headers=ASSET_HEADERS)
