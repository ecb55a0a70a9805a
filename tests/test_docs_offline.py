"""/docs works with no internet: Swagger UI from the installed package, under a CSP that allows only its own script.

The browser test loads /docs in Debian's Chromium with every request to another host aborted, and checks that the
operations list renders with no CSP violation.
"""

from __future__ import annotations

import base64
import hashlib
import re
import shutil
from collections.abc import Iterator

import pytest

from mentor.api import create_app
from mentor.api.middleware import CSP_DATA, CSP_PAGES

from .browser import LocalOnly, launch_chromium
from .chat_helpers import serve


def asset_urls(html: str) -> list[str]:
    """Every URL the page loads by itself: scripts, stylesheets, icons."""
    return re.findall(r"<script[^>]*\bsrc=\"([^\"]+)\"", html) + re.findall(r"<link[^>]*\bhref=\"([^\"]+)\"", html)


def test_docs_load_every_asset_from_this_server(client) -> None:
    page = client.get("/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    urls = asset_urls(page.text)
    assert len(urls) == 3, urls  # swagger-ui-bundle.js, swagger-ui.css, the favicon
    for url in urls:
        assert url.startswith("/") and not url.startswith("//"), f"{url} is not on this server"
        asset = client.get(url)
        assert asset.status_code == 200, url
        assert asset.headers["cache-control"] == "public, max-age=3600"
        assert len(asset.content) > 500
    assert client.get("/openapi.json").json()["openapi"].startswith("3.1")


def test_the_bundled_swagger_ui_can_read_openapi_3_1() -> None:
    """FastAPI writes OpenAPI 3.1; Swagger UI 4 (swagger-ui-bundle 1.x) shows "Unable to render this definition"."""
    from swagger_ui_bundle import swagger_ui_path

    version = re.search(r"swagger-ui-(\d+)\.", str(swagger_ui_path))
    assert version and int(version.group(1)) >= 5, swagger_ui_path


def test_only_the_files_docs_need_are_served(client) -> None:
    # The package's own index.html and initializer would fetch the Petstore example from the internet.
    for name in ("index.html", "swagger-initializer.js", "..%2F__init__.py", "swagger-ui.js.map"):
        assert client.get(f"/docs-assets/{name}").status_code == 404, name
    assert client.get("/redoc").status_code == 404  # not offered (see mentor/api/app.py)
    redirect = client.get("/docs-assets/oauth2-redirect.html")
    assert redirect.status_code == 200 and '<script src="oauth2-redirect.js">' in redirect.text
    assert client.get("/docs-assets/oauth2-redirect.js").status_code == 200


def test_the_docs_csp_allows_exactly_the_page_s_inline_script(client) -> None:
    page = client.get("/docs")
    inline = re.findall(r"<script>(.*?)</script>", page.text, re.DOTALL)
    assert len(inline) == 1
    digest = base64.b64encode(hashlib.sha256(inline[0].encode()).digest()).decode()
    csp = page.headers["content-security-policy"]
    assert f"script-src 'self' 'sha256-{digest}';" in csp
    assert "unsafe-inline" not in csp.split("script-src", 1)[1].split(";", 1)[0]
    assert "frame-ancestors 'none'" in csp and "connect-src 'self'" in csp


def test_html_pages_and_data_get_their_own_csp(client) -> None:
    assert client.get("/docs-assets/oauth2-redirect.html").headers["content-security-policy"] == CSP_PAGES
    for directive in ("default-src 'self'", "script-src 'self';", "base-uri 'none'", "form-action 'self'"):
        assert directive in CSP_PAGES
    for path in ("/v1/modules", "/openapi.json", "/docs-assets/swagger-ui-bundle.js", "/no-such-page"):
        response = client.get(path)
        assert response.headers["content-security-policy"] == CSP_DATA, path
    assert client.get("/v1/modules").headers["cache-control"] == "no-store"


@pytest.fixture(scope="module")
def docs_url(runtime) -> Iterator[str]:
    with serve(create_app(runtime.settings, runtime=runtime)) as url:
        yield url


@pytest.mark.slow
def test_swagger_ui_renders_offline_in_chromium(docs_url, client) -> None:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("Debian's chromium is needed (apt-get install chromium)")
    operations = sum(len(methods) for methods in client.get("/openapi.json").json()["paths"].values())
    only_this_server = LocalOnly()
    problems: list[str] = []

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            page = browser.new_page()
            page.route("**/*", only_this_server)
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.goto(f"{docs_url}/docs")
            page.wait_for_selector(".opblock", timeout=30_000)
            assert page.locator(".opblock").count() == operations
            assert page.locator(".title").first.inner_text().startswith("mentor")
            assert page.locator(".errors-wrapper").count() == 0  # Swagger UI's "Unable to render" box
            # Open an operation: its parameters and responses render from the same local document.
            page.locator(".opblock-summary", has_text="/v1/search").first.click()
            page.wait_for_selector(".opblock-body .responses-wrapper", timeout=10_000)
        finally:
            browser.close()
    assert only_this_server.leaked == [], f"the page tried to reach other hosts: {only_this_server.leaked}"
    assert problems == [], problems
