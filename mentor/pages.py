"""The demo page: a module rendered to HTML on the server, with the "Ask the mentor" box beside it.

The page is what a learning app shows, so it is rendered from the same Markdown the mentor reads: headings keep
their `{#id}` as the element id (the box's footnotes link to `#section-id`), and raw HTML in a module is shown as
text, never run. The page carries no inline script or style: the box is /widget.js and the styles a file, so a
Content-Security-Policy of `script-src 'self'` holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from markdown_it import MarkdownIt
from markdown_it.token import Token

from mentor.corpus import SECTION_ID, Module

# CommonMark with GFM tables and strikethrough (the modules use tables); html off, so a module's raw HTML is
# escaped; linkify off, so only links the author wrote are links. markdown-it refuses javascript:, vbscript:,
# file: and data: link targets itself.
_MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
    ["table", "strikethrough"]
)


def _focusable(rule: str) -> None:
    """Render a code block as a `<pre>` that takes the keyboard focus: on a phone a wide block scrolls sideways, and a
    region that scrolls must be reachable without a mouse (axe: scrollable-region-focusable)."""
    default = _MARKDOWN.renderer.rules[rule]

    def render(renderer, tokens, index, options, env):  # noqa: ANN001, ANN202 - markdown-it's rule signature
        return default(tokens, index, options, env).replace("<pre>", '<pre tabindex="0">', 1)

    _MARKDOWN.add_render_rule(rule, render)


for _rule in ("fence", "code_block"):
    _focusable(_rule)


def render_module(module: Module) -> str:
    """The module's body as HTML; each heading gets its section id as `id`, without the `{#id}` text."""
    tokens = _MARKDOWN.parse(module.body)
    for index, token in enumerate(tokens):
        if token.type == "heading_open" and index + 1 < len(tokens):
            _anchor(token, tokens[index + 1])
    return _MARKDOWN.renderer.render(tokens, _MARKDOWN.options, {})


def _anchor(heading: Token, inline: Token) -> None:
    """Move a heading's trailing `{#id}` into its id attribute (module files validated that every heading has one)."""
    titled = SECTION_ID.match(inline.content.strip())
    if titled is None:
        return
    heading.attrSet("id", titled.group("id"))
    inline.content = titled.group("title")
    children = inline.children or []
    # The "{#id}" is the end of the last text child ("Mixed precision {#mixed-precision}" or " {#id}" after code).
    for child in reversed(children):
        if child.type == "text":
            trimmed = child.content.rstrip()
            suffix = "{#" + titled.group("id") + "}"
            if trimmed.endswith(suffix):
                child.content = trimmed[: -len(suffix)].rstrip()
            break


def render_page(module: Module, modules: Sequence[Module]) -> str:
    """The whole demo page: the module, the box beside it, and a module picker when there are several.

    The box is in "auto" mode: beside the module on a wide screen; on a phone (one column, demo.css) a launcher
    button, so the ask field is one tap away on the first screen instead of below the whole module."""
    picker = _picker(module, modules) if len(modules) > 1 else ""
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(module.title)} · mentor</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="static/demo.css">
<script type="module" src="widget.js"></script>
</head>
<body>
<a class="skip" href="#ask">Skip to Ask the mentor</a>
<header class="site">
<p class="brand">mentor <span>· the module with its mentor beside it</span></p>
{picker}</header>
<div class="layout">
<main class="module" id="module">
{render_module(module)}</main>
<aside class="ask" id="ask" tabindex="-1" aria-label="Ask the mentor">
<mentor-chat module="{escape(module.id)}" mode="auto"></mentor-chat>
</aside>
</div>
</body>
</html>
"""


def _picker(current: Module, modules: Sequence[Module]) -> str:
    """A plain GET form (no script): choosing a module reloads the page with ?module=<id>."""
    options = "".join(
        f'<option value="{escape(m.id)}"{" selected" if m.id == current.id else ""}>{escape(m.title)} ({escape(m.id)})'
        "</option>"
        for m in modules
    )
    return (
        '<form class="picker" method="get" action="">'
        f'<label for="module-picker">Module</label> <select id="module-picker" name="module">{options}</select> '
        '<button type="submit">Open</button></form>\n'
    )
