"""The HTML pages LTI routes answer with: the box for a module, the deep-linking picker, the form that carries the
response back to the platform, the end of dynamic registration, and a refusal.

They are shown inside the LMS's iframe, so their Content-Security-Policy allows framing by any page (`frame-ancestors
*`): the LMS's own address is not in the launch (Canvas's issuer is canvas.instructure.com whatever the school's
host), and a page is only reached through a launch the platform signed for that learner. Everything else is as
strict as mentor's other pages: scripts from this origin, plus the one inline script a page needs, by its hash.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from html import escape
from urllib.parse import urlsplit

from mentor.corpus import Module

STYLE = """
body{font:16px/1.5 system-ui,sans-serif;margin:0;padding:1rem;color:#1d1d1f;background:#fff}
h1{font-size:1.2rem;margin:0 0 .75rem}
p.note{color:#555;font-size:.9rem}
fieldset{border:1px solid #ccc;border-radius:6px;margin:0 0 1rem;padding:.5rem 1rem}
label{display:block;padding:.25rem 0}
button{font:inherit;padding:.4rem 1rem}
nav{margin:0 0 .75rem}
"""


def csp(*, script_hashes: Sequence[str] = (), form_action: str = "'self'", framed: bool = True) -> str:
    """The CSP of an LTI page: this origin's scripts (and the given inline ones), framed by any page (or none)."""
    scripts = " ".join(["'self'", *(f"'{h}'" for h in script_hashes)])
    return "; ".join(
        [
            "default-src 'self'",
            f"script-src {scripts}",
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data:",
            "connect-src 'self'",
            "frame-ancestors *" if framed else "frame-ancestors 'none'",
            "base-uri 'none'",
            f"form-action {form_action}",
        ]
    )


def script_hash(script: str) -> str:
    """The CSP source allowing exactly this inline script."""
    return "sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def page_html(title: str, body: str, *, head: str = "") -> str:
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)} · mentor</title>
<link rel="icon" href="data:,">
<style>{STYLE}</style>
{head}</head>
<body>
{body}
</body>
</html>
"""


def box_page(module: Module, *, token: str, staff_form: str = "") -> str:
    """The "Ask the mentor" box for one module, signed in with a learner token (the widget as any page embeds it);
    `staff_form` opens the course's analytics, for course staff only."""
    nav = f"<nav>{staff_form}</nav>\n" if staff_form else ""
    return page_html(
        module.title,
        f"<main>\n<h1>Ask the mentor · {escape(module.title)}</h1>\n{nav}"
        f'<mentor-chat module="{escape(module.id)}" token="{escape(token)}" mode="inline"></mentor-chat>\n</main>',
        head='<script type="module" src="/widget.js"></script>\n',
    )


def picker_page(modules: Sequence[Module], *, session: str, multiple: bool) -> str:
    """The deep-linking picker: a plain form (no script) posting the chosen modules and the signed session."""
    kind = "checkbox" if multiple else "radio"
    options = "\n".join(
        f'<label><input type="{kind}" name="module_id" value="{escape(m.id)}"{" checked" if i == 0 else ""}> '
        f"{escape(m.title)} <small>({escape(m.id)})</small></label>"
        for i, m in enumerate(modules)
    )
    return page_html(
        "Place Ask the mentor",
        '<main>\n<h1>Place "Ask the mentor" in this course</h1>\n'
        '<form method="post" action="/lti/deep-link">\n'
        f'<input type="hidden" name="session" value="{escape(session)}">\n'
        f"<fieldset><legend>Module{'s' if multiple else ''} learners will ask about</legend>\n{options}\n</fieldset>\n"
        '<button type="submit">Add to the course</button>\n</form>\n</main>',
    )


AUTOPOST = "document.forms[0].submit();"


def autopost_page(return_url: str, token: str) -> tuple[str, str]:
    """The page that posts the deep-linking response to the platform (at once, or with the button without script),
    and the CSP allowing that one script and that one form target."""
    html = page_html(
        "Returning to the course",
        f'<form method="post" action="{escape(return_url)}">\n'
        f'<input type="hidden" name="JWT" value="{escape(token)}">\n'
        '<p>Returning to the course…</p><noscript><button type="submit">Continue</button></noscript>\n</form>\n'
        f"<script>{AUTOPOST}</script>",
    )
    return html, csp(script_hashes=[script_hash(AUTOPOST)], form_action=origin_of(return_url))


# LTI Dynamic Registration §3.6: the tool tells the platform's window it is done.
CLOSE = "(window.opener || window.parent).postMessage({subject: 'org.imsglobal.lti.close'}, '*');"


def registered_page(issuer: str, client_id: str) -> tuple[str, str]:
    """The end of dynamic registration, and its CSP."""
    html = page_html(
        "Registered",
        f"<main>\n<h1>mentor is registered</h1>\n<p>Platform {escape(issuer)}, client id {escape(client_id)}.</p>\n"
        '<p class="note">You can close this window.</p>\n</main>\n'
        f"<script>{CLOSE}</script>",
    )
    return html, csp(script_hashes=[script_hash(CLOSE)])


def refusal_page(status: int, message: str) -> str:
    """A plain page saying why (the reason goes to the log line, the sentence to the person)."""
    return page_html(
        "Cannot open mentor",
        f"<main>\n<h1>mentor cannot open this link</h1>\n<p>{escape(message)}</p>\n"
        f'<p class="note">HTTP {status}. If it keeps happening, tell your course\'s administrator.</p>\n</main>',
    )
