"""/docs without the internet: Swagger UI served from the installed swagger-ui-bundle package."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse
from swagger_ui_bundle import swagger_ui_path

from mentor.api.middleware import page_csp
from mentor.errors import NotFound

DOCS_ASSETS = "/docs-assets"
# The files of the swagger-ui-bundle package /docs uses, with their types. Only these are served: the package's
# index.html and swagger-initializer.js would fetch the Petstore example from the internet.
SWAGGER_FILES = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "favicon-32x32.png": "image/png",
    "oauth2-redirect.html": "text/html; charset=utf-8",
    "oauth2-redirect.js": "text/javascript; charset=utf-8",
}
# An hour, as for the box's own static files; the files change only when the package is upgraded.
ASSET_CACHE = "public, max-age=3600"


def install_docs(app: FastAPI) -> None:
    """Serve Swagger UI at /docs from the installed swagger-ui-bundle package: the docs work with no internet.

    FastAPI's page has one inline script (the SwaggerUIBundle call). Its CSP allows exactly that script by its
    SHA-256 hash, computed from the page as rendered, rather than 'unsafe-inline': an injected script would not
    run. ReDoc is not offered: it would show the same document again, and its script ships on PyPI only inside
    another FastAPI wrapper (fastapi-offline), without the licence text its banner points to.
    """
    assets = Path(str(swagger_ui_path))

    @app.get("/docs", include_in_schema=False)
    def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")
        page = get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - API",
            swagger_js_url=f"{root}{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{root}{DOCS_ASSETS}/favicon-32x32.png",
            # The package's redirect page loads its script from a file, so it needs no CSP exception.
            oauth2_redirect_url=f"{root}{DOCS_ASSETS}/oauth2-redirect.html",
        )
        page.headers["Content-Security-Policy"] = page_csp(*inline_script_hashes(page.body))
        return page

    @app.get(DOCS_ASSETS + "/{name}", include_in_schema=False)
    def swagger_asset(name: str) -> FileResponse:
        media_type = SWAGGER_FILES.get(name)
        if media_type is None:
            raise NotFound(f"no such docs asset: {name}")
        return FileResponse(assets / name, media_type=media_type, headers={"Cache-Control": ASSET_CACHE})


def inline_script_hashes(html: bytes) -> list[str]:
    """CSP sources ('sha256-...') allowing each inline <script> of `html`, exactly as written."""
    scripts = re.findall(rb"<script>(.*?)</script>", html, re.DOTALL)
    return [f"'sha256-{base64.b64encode(hashlib.sha256(script).digest()).decode()}'" for script in scripts]
