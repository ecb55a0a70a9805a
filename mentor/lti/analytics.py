"""The analyst view for course staff: an Instructor, TeachingAssistant or Administrator launch gets a course token
that opens the analyst API (and the dashboard) limited to that launch's course.

The token is one mentor signs (mentor.lti.state's key), naming the course by its pseudonym (`ctx`) and living two
hours. The analyst routes accept it beside the analyst token (mentor/api/routes_analyst.py): every summary, list
and export is then filtered to that course, the minimum cohort still hides small groups, and erasure stays with the
analyst token. Learners never get one: their launch page has no link to it.

The dashboard reads its token from sessionStorage ("mentor.analystToken"); the hand-off page puts the course token
there in a new first-party tab (the LTI page itself lives in the LMS's iframe, whose storage is the LMS's
partition) and opens /dashboard.
"""

from __future__ import annotations

from html import escape
from typing import Any

from mentor.lti.errors import LtiRefused
from mentor.lti.pages import csp, page_html, script_hash
from mentor.lti.state import TokenSigner

COURSE_AUDIENCE = "mentor-course-analyst"
# A working session with the dashboard; a new launch from the course gives a new one.
COURSE_TOKEN_TTL_S = 2 * 3600
DASHBOARD_TOKEN_KEY = "mentor.analystToken"  # mentor/web/dashboard.js's TOKEN_KEY


def course_token(signer: TokenSigner, context_key: str) -> str:
    """A token opening the analyst view of one course."""
    return signer.sign(COURSE_AUDIENCE, {"ctx": context_key}, ttl_s=COURSE_TOKEN_TTL_S)


def course_of(lti: Any, token: str) -> str | None:
    """The course a valid course token opens; None for anything else (the analyst token, a wrong token, LTI off)."""
    if lti is None or not token or token.count(".") != 2:
        return None
    try:
        claims = lti.signer.verify(COURSE_AUDIENCE, token, what="course_token")
    except LtiRefused:
        return None
    context = claims.get("ctx")
    return context if isinstance(context, str) and context else None


def analytics_form(token: str) -> str:
    """The staff launch page's button: a form post (the token never in a URL) opening the dashboard in a new tab."""
    return (
        '<form method="post" action="/lti/analytics" target="_blank">'
        f'<input type="hidden" name="course_token" value="{escape(token)}">'
        '<button type="submit">Course analytics</button></form>\n'
    )


HANDOFF = (
    f"sessionStorage.setItem('{DASHBOARD_TOKEN_KEY}', document.getElementById('course').dataset.token);"
    "location.replace('/dashboard');"
)


def handoff_page(token: str) -> tuple[str, str]:
    """The page that gives the dashboard the course token and opens it; and its CSP (not framed: a tab of its own)."""
    html = page_html(
        "Course analytics",
        f'<p id="course" data-token="{escape(token)}">Opening the course analytics…</p>\n<script>{HANDOFF}</script>',
    )
    return html, csp(script_hashes=[script_hash(HANDOFF)], framed=False)
