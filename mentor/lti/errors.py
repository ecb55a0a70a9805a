"""The one refusal LTI routes give, in mentor's error tree: a 4xx status, a short reason for the log line and the
tests, and a plain sentence for the page (never the token, which is a credential)."""

from __future__ import annotations

from mentor.errors import MentorError


class LtiRefused(MentorError):
    """An LTI request mentor will not act on: a launch that fails a check, an unknown platform, a bad picker post."""

    code = "lti_refused"

    def __init__(self, reason: str, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.reason = reason  # e.g. "wrong_issuer", "nonce_replayed": named in the log line
        self.status_code = status
