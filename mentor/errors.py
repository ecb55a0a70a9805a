"""One exception tree. Library code raises these; only the API and the CLI translate them."""

from __future__ import annotations


class MentorError(Exception):
    """Base of every error mentor raises on purpose; carries an HTTP status and a plain message."""

    status_code: int = 500
    code: str = "internal_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(MentorError):
    """The caller sent something mentor cannot use (bad argument, oversize text, ...)."""

    status_code = 422
    code = "invalid_input"


class NotFound(MentorError):
    """The named module, conversation, question or calculator does not exist (for this caller)."""

    status_code = 404
    code = "not_found"


class Unauthorized(MentorError):
    """Missing or wrong credentials for an analyst route."""

    status_code = 401
    code = "unauthorized"


class RateLimited(MentorError):
    """The learner asked too often; `retry_after_s` says when to try again."""

    status_code = 429
    code = "rate_limited"

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class CorpusError(MentorError):
    """A module file is malformed; the message names the file and the line."""

    status_code = 422
    code = "corpus_error"


class ConfigError(MentorError):
    """The service is configured in a way it cannot run with (a missing shared secret, a spool in use)."""

    status_code = 500
    code = "misconfigured"


class NotReady(MentorError):
    """A dependency (index, database, LLM) cannot be used right now."""

    status_code = 503
    code = "not_ready"


class UpstreamError(MentorError):
    """The LLM server failed (time-out, 5xx, malformed reply); `reason` is a short machine-readable cause.

    The chat never shows it to a learner: it falls back to the extractive engine with `fallback_reason`.
    """

    status_code = 502
    code = "upstream_error"

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
