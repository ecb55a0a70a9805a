"""The demo page and the box's files, over HTTP (the browser tests are in test_widget_browser.py)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin

import pytest

from mentor.api.routes_pages import WEB, asset
from mentor.corpus import parse_module
from mentor.errors import NotFound
from mentor.pages import render_module, render_page

from .conftest import MODULE_ID

JS = "text/javascript; charset=utf-8"
VENDORED = {
    "marked/marked.esm.js": ("marked v18.3.0", ["marked/LICENSE"]),
    "dompurify/purify.es.mjs": ("DOMPurify 3.5.0", ["dompurify/LICENSE", "dompurify/LICENSE-MPL"]),
}


class Elements(HTMLParser):
    """Every start tag of a page, with its attributes."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def ids(self) -> list[str]:
        return [a["id"] for _, a in self.tags if a.get("id")]

    def all(self, tag: str) -> list[dict[str, str | None]]:
        return [a for t, a in self.tags if t == tag]


def module_from(text: str, module_id: str = "T.pages.01", title: str = "A test module"):
    front = f"---\nmodule_id: {module_id}\ntitle: {title}\nprerequisites: []\n---\n\n"
    return parse_module(front + text, Path(f"{module_id}.md"))


def test_the_demo_page_renders_the_module_with_an_anchor_for_every_section(client, runtime) -> None:
    response = client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    page = Elements(response.text)
    module = runtime.modules[MODULE_ID]
    ids = page.ids()
    for section in module.sections:
        assert ids.count(section.id) == 1, section.id
        assert f'id="{section.id}">{section.title}</h' in response.text.replace("&amp;", "&")
    assert "{#" not in response.text  # the ids moved into attributes; the titles read as written
    (box,) = page.all("mentor-chat")
    assert box == {"module": MODULE_ID, "mode": "auto"}  # a launcher on a phone, inline beside the module otherwise
    assert not page.all("select")  # one module: no picker


def test_the_demo_page_has_no_inline_script_or_handler(client) -> None:
    """Its CSP is script-src 'self': anything inline would not run, so nothing may rely on it."""
    page = Elements(client.get("/").text)
    scripts = page.all("script")
    assert scripts == [{"type": "module", "src": "widget.js"}]
    assert not [(t, a) for t, a in page.tags if any(name.startswith("on") for name in a)]
    assert not [a for _, a in page.tags if "style" in a] and not page.all("style")
    assert {"rel": "stylesheet", "href": "static/demo.css"} in page.all("link")


def test_raw_html_in_a_module_is_shown_as_text() -> None:
    module = module_from(
        '# Intro {#intro}\n\nSafe <img src=x onerror="window.x=1"> text.\n\n<script>window.x=2</script>\n\n'
        '[click](javascript:window.x=3) and [fine](#intro) and <b onmouseover="x()">bold</b>\n\n'
        '## Code `<i>` {#code-id}\n\n```html\n<iframe src="https://evil.example"></iframe>\n```\n'
    )
    html = render_module(module)
    page = Elements(html)
    assert not page.all("img") and not page.all("script") and not page.all("iframe") and not page.all("b")
    assert "&lt;img src=x onerror=&quot;window.x=1&quot;&gt;" in html
    assert "&lt;script&gt;window.x=2&lt;/script&gt;" in html
    assert [a["href"] for a in page.all("a")] == ["#intro"]  # markdown-it refuses the javascript: link
    assert page.ids() == ["intro", "code-id"]
    assert '<h2 id="code-id">Code <code>&lt;i&gt;</code></h2>' in html


def test_the_module_picker_lists_every_module_and_marks_the_shown_one() -> None:
    first = module_from("# One {#one}\n\nText.\n", "T.first.01", "First <module>")
    second = module_from("# Two {#two}\n\nText.\n", "T.second.01", "Second")
    page = Elements(render_page(second, [first, second]))
    (form,) = page.all("form")
    assert form["method"] == "get"
    (select,) = page.all("select")
    assert select["name"] == "module"
    assert [label["for"] for label in page.all("label")] == [select["id"]]
    options = page.all("option")
    assert [o["value"] for o in options] == ["T.first.01", "T.second.01"]
    assert ["selected" in o for o in options] == [False, True]
    html = render_page(second, [first, second])
    assert "First &lt;module&gt; (T.first.01)" in html
    assert page.all("mentor-chat") == [{"module": "T.second.01", "mode": "auto"}]
    assert "picker" not in render_page(first, [first])


def test_a_module_is_chosen_by_query_and_an_unknown_one_is_not_found(client) -> None:
    assert Elements(client.get("/", params={"module": MODULE_ID}).text).all("mentor-chat")[0]["module"] == MODULE_ID
    response = client.get("/", params={"module": "no.such.module"})
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


def test_widget_js_is_served_as_javascript_and_cached_for_an_hour(client) -> None:
    response = client.get("/widget.js")
    assert response.status_code == 200
    assert response.headers["content-type"] == JS
    assert response.headers["cache-control"] == "public, max-age=3600"
    # Another site loads it as a module script, a CORS request: the file itself is public.
    assert response.headers["access-control-allow-origin"] == "*"
    assert "customElements.define('mentor-chat'" in response.text


def test_every_module_the_widget_imports_is_served(client) -> None:
    """Follow the import graph from /widget.js: a moved or misspelt file would leave the box dead in the page."""
    seen: set[str] = set()
    pending = ["http://testserver/widget.js"]
    while pending:
        url = pending.pop()
        if url in seen:
            continue
        seen.add(url)
        response = client.get(url)
        assert response.status_code == 200, url
        assert response.headers["content-type"] == JS, url
        for specifier in re.findall(
            r"""^\s*(?:import|export)\b[^'"]*?\bfrom\s+['"]([^'"]+)['"]""", response.text, re.M
        ):
            pending.append(urljoin(url, specifier))
    assert {u.rsplit("/", 1)[1] for u in seen} >= {"widget.js", "marked.esm.js", "purify.es.mjs", "client.js"}
    css = client.get("/static/box/widget.css")
    assert css.headers["content-type"] == "text/css; charset=utf-8"
    assert client.get("/static/demo.css").headers["cache-control"] == "public, max-age=3600"


@pytest.mark.parametrize("path", sorted(VENDORED))
def test_vendored_libraries_keep_their_licences_and_versions(client, path: str) -> None:
    banner, licences = VENDORED[path]
    assert banner in (WEB / "vendor" / path).read_text(encoding="utf-8")[:600]
    for licence in licences:
        text = (WEB / "vendor" / licence).read_text(encoding="utf-8")
        assert "Permission is hereby granted" in text or "License" in text
        response = client.get(f"/static/vendor/{licence}")
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/plain; charset=utf-8"
    assert path.split("/")[0] in (WEB / "vendor" / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("path", ["../pages.py", "../api/app.py", "box/missing.js", "", "box", "/etc/passwd"])
def test_only_files_inside_mentor_web_are_served(path: str) -> None:
    with pytest.raises(NotFound):
        asset(path)


def test_a_missing_static_file_is_a_plain_404(client) -> None:
    response = client.get("/static/box/missing.js")
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


def test_a_code_block_takes_the_keyboard_focus_as_it_may_scroll_sideways() -> None:
    html = render_module(module_from("# Code {#code}\n\n```text\na wide line\n```\n\n    indented code\n"))
    assert html.count('<pre tabindex="0">') == 2  # a phone scrolls a wide block: the keyboard must reach it
