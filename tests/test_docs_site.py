"""The README is a front page, and the documentation site builds: `mkdocs build --strict` (a broken link or anchor,
or a page left out of the nav, fails it), with the reference pages written from the code (docs/hooks.py)."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mentor.settings import Settings

from .conftest import ROOT

README = ROOT / "README.md"
README_MAX_LINES = 200
FIRST_SCREEN_LINES = 40
LINK = re.compile(r"\]\((?P<target>[^)\s#]*)(?:#(?P<anchor>[^)\s]*))?\)")
# A page may link anywhere; it may load nothing from another host (no fonts, scripts, styles or images).
REMOTE_RESOURCE = re.compile(r"<(?:script|img|iframe)\b[^>]*\bsrc=\"https?://|<link\b[^>]*\bhref=\"https?://")


def test_readme_is_a_front_page_with_both_commands_on_its_first_screen() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; the rest belongs in docs/"
    first_screen = "\n".join(lines[:FIRST_SCREEN_LINES])
    for command in ("make serve", "make test"):
        assert command in first_screen, f"`{command}` is not in the README's first {FIRST_SCREEN_LINES} lines"


def test_every_file_the_readme_links_to_exists() -> None:
    targets = [match["target"] for match in LINK.finditer(README.read_text(encoding="utf-8"))]
    local = [target for target in targets if target and not re.match(r"[a-z]+:", target)]
    assert local, "the README links to no page of the docs"
    missing = [target for target in local if not (ROOT / target).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


# ---- the built site -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    mkdocs = Path(sys.executable).with_name("mkdocs")
    if not mkdocs.exists():
        pytest.fail("mkdocs is not installed; it comes with the dev extra: pip install -e '.[dev]'")
    out = tmp_path_factory.mktemp("site")
    # NO_MKDOCS_2_WARNING: Material's banner about MkDocs 2 (printed, not a warning --strict counts).
    environment = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    command = [str(mkdocs), "build", "--strict", "--site-dir", str(out)]
    result = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        problems = [line for line in result.stderr.splitlines() if re.match(r"\s*(WARNING|ERROR)", line)]
        pytest.fail(
            "`mkdocs build --strict` failed; fix these (paths are under docs/):\n"
            + "\n".join(problems or result.stderr.splitlines()[-30:])
        )
    return out


def page_text(site: Path, page: str) -> str:
    """A built page's article, as text (tags dropped, entities decoded)."""
    document = (site / page / "index.html").read_text(encoding="utf-8")
    article = document[document.index("<article") : document.index("</article>")]
    return html.unescape(re.sub(r"<[^>]+>", "", article))


def page_ids(site: Path, page: str) -> set[str]:
    return set(re.findall(r'\bid="([^"]+)"', (site / page / "index.html").read_text(encoding="utf-8")))


@pytest.mark.slow
def test_configuration_page_lists_every_setting_with_its_variable_and_description(site: Path) -> None:
    text = page_text(site, "configuration")
    missing = [f"MENTOR_{name.upper()}" for name in Settings.model_fields if f"MENTOR_{name.upper()}" not in text]
    assert not missing, f"settings missing from the configuration page: {missing}"
    flat = " ".join(text.split())
    undescribed = [  # the description's opening, as the page shows it (code spans' backticks are markup)
        name
        for name, field in Settings.model_fields.items()
        if " ".join((field.description or "").replace("`", "").split())[:60] not in flat
    ]
    assert not undescribed, f"descriptions missing from the configuration page: {undescribed}"
    assert "OPENAI_API_KEY" in text  # a second name a setting answers to


def commands() -> Iterator[tuple[str, list[str]]]:
    """Every command of `mentor` as `--help` names it ("mentor db upgrade"), with its options' names."""
    import typer.main

    from mentor.cli import app

    def walk(command, context, path: list[str]) -> Iterator[tuple[str, list[str]]]:  # noqa: ANN001 - click's types
        options = [param.opts[0] for param in command.get_params(context) if param.opts[0].startswith("-")]
        yield " ".join(path), [option for option in options if option != "--help"]
        for name in getattr(command, "list_commands", lambda _: [])(context):
            sub = command.get_command(context, name)
            if not sub.hidden:
                yield from walk(sub, sub.context_class(sub, info_name=name, parent=context), [*path, name])

    root = typer.main.get_command(app)
    yield from walk(root, root.context_class(root, info_name="mentor"), ["mentor"])


@pytest.mark.slow
def test_cli_page_lists_every_command_and_option(site: Path) -> None:
    text = page_text(site, "cli")
    found = list(commands())
    assert len(found) > 10
    missing = [name for name, _ in found if not re.search(rf"^\s*{re.escape(name)}¶?\s*$", text, re.MULTILINE)]
    assert not missing, f"commands without a section on the command-line page: {missing}"
    options = {f"{name} {option}" for name, opts in found for option in opts if option not in text}
    assert not options, f"options missing from the command-line page: {sorted(options)}"


@pytest.mark.slow
def test_http_api_page_lists_every_operation_of_the_openapi_document(site: Path) -> None:
    from mentor.api.app import create_app

    document = create_app(Settings.model_construct()).openapi()
    text = page_text(site, "http-api")
    operations = [f"{method.upper()} {path}" for path, methods in document["paths"].items() for method in methods]
    missing = [operation for operation in operations if operation not in text]
    assert not missing, f"routes missing from the HTTP API page: {missing}"
    for schema in document["components"]["schemas"]:
        assert schema.lower() in page_ids(site, "http-api"), f"schema {schema} has no section to link to"


@pytest.mark.slow
def test_readme_links_into_the_docs_land_on_a_page_and_an_anchor(site: Path) -> None:
    for match in LINK.finditer(README.read_text(encoding="utf-8")):
        target, anchor = match["target"], match["anchor"]
        if not (target.startswith("docs/") and target.endswith(".md")):
            continue
        page = target.removeprefix("docs/").removesuffix(".md")
        page = "" if page == "index" else page
        assert (site / page / "index.html").exists(), f"README links to {target}, which the site does not build"
        if anchor:
            assert anchor in page_ids(site, page), f"README links to {target}#{anchor}: no such heading there"


@pytest.mark.slow
def test_the_site_loads_nothing_from_another_host(site: Path) -> None:
    pages = list(site.rglob("*.html"))
    assert (site / "eval-suite" / "index.html").exists()  # eval/README.md, published by the hook
    assert (site / "search" / "search_index.json").exists()
    remote = [str(page.relative_to(site)) for page in pages if REMOTE_RESOURCE.search(page.read_text("utf-8"))]
    assert not remote, f"pages that load a resource from another host (fonts? a plugin?): {remote}"
