"""Log lines without personal details, in one format for mentor's lines and uvicorn's, each naming its request.

- Plain (the default) or JSON lines (MENTOR_LOG_FORMAT=json: one object a line with timestamp, level, logger,
  message and request_id, and method, route and status on access lines), for every logger: mentor's, uvicorn's
  error log and its access log.
- Every line logged while a request is handled carries its id (`REQUEST_ID`, set by the RequestContext
  middleware from X-Request-ID or generated); lines of the signal writer's thread and of start-up carry none.
- The access log names routes, never raw paths or query strings.

Only the standard library is imported at the top: the CLI configures logging before any command runs.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fastapi import FastAPI

    from mentor.settings import Settings

UNROUTED = "…"  # a path no route matches may still hold an e-mail (a mistyped learner id), so it is not logged
# The request being handled, as the middleware set it; each request runs in its own task, so its own context.
REQUEST_ID: ContextVar[str | None] = ContextVar("mentor_request_id", default=None)
ROUTE: ContextVar[str | None] = ContextVar("mentor_route", default=None)  # its route template, once routed
PLAIN = "%(asctime)s %(levelname)s %(name)s%(request_tag)s: %(message)s"


class RequestIdFilter(logging.Filter):
    """Put the id of the request being handled (or None) on every record a handler emits."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = REQUEST_ID.get()
        return True


class AccessLogPaths(logging.Filter):
    """Replace the request target in uvicorn.access records by its route template.

    `GET /v1/search?q=mail me at a@example.net` is logged as `GET /v1/search`, and
    `DELETE /v1/learners/erase.me@example.com` as `DELETE /v1/learners/{learner_id}`. The route the request was
    served by is known from the middleware (`ROUTE`); a request refused before routing (413, 431) is matched
    against `templates` here.
    """

    def __init__(self, templates: Iterable[str]) -> None:
        from starlette.routing import compile_path

        super().__init__()
        self.templates = [(compile_path(template)[0], template) for template in dict.fromkeys(templates)]

    def filter(self, record: logging.LogRecord) -> bool:
        # uvicorn logs '%s - "%s %s HTTP/%s" %d' % (client, method, raw path with query, HTTP version, status).
        if isinstance(record.args, tuple) and len(record.args) == 5:
            client, method, target, version, status = record.args
            record.args = (client, method, ROUTE.get() or self.template(str(target)), version, status)
        return True

    def template(self, target: str) -> str:
        path = target.split("?", 1)[0]
        return next((template for regex, template in self.templates if regex.match(path)), UNROUTED)


class PlainFormatter(logging.Formatter):
    """`time LEVEL logger [request id]: message`, the same for mentor's lines and uvicorn's."""

    def __init__(self, use_colors: bool | None = None) -> None:  # use_colors: what uvicorn may pass its formatters
        super().__init__(PLAIN)

    def format(self, record: logging.LogRecord) -> str:
        request_id = getattr(record, "request_id", None)
        record.request_tag = f" [{request_id}]" if request_id else ""
        return super().format(record)


def json_formatter(use_colors: bool | None = None) -> logging.Formatter:
    """One JSON object a line (python-json-logger, imported only when asked for)."""
    from pythonjsonlogger.json import JsonFormatter

    class JsonLines(JsonFormatter):
        """timestamp, level, logger, message, request_id; method, route, status on access lines; exc_info."""

        def add_fields(self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict) -> None:
            log_data["timestamp"] = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
            log_data["level"] = record.levelname
            log_data["logger"] = record.name
            log_data["message"] = record.message
            log_data["request_id"] = getattr(record, "request_id", None)
            if record.name == "uvicorn.access" and isinstance(record.args, tuple) and len(record.args) == 5:
                _client, method, route, _version, status = record.args
                log_data.update(method=method, route=route, status=status)
            # Only exc_info and stack_info: a record's other attributes (uvicorn's color_message...) stay out.
            log_data.update(message_dict)

    return JsonLines()


def formatter_config(log_format: str) -> dict[str, Any]:
    """The dictConfig entry of the formatter for `log_format` (plain or json)."""
    factory = "mentor.logs.json_formatter" if log_format == "json" else "mentor.logs.PlainFormatter"
    return {"()": factory}


class CurrentStderr(logging.StreamHandler):
    """A handler writing to whatever `sys.stderr` is when a line is logged, not the one it was made with.

    A harness that runs the CLI in-process (a test runner, CliRunner) swaps `sys.stderr` and closes its stand-in
    afterwards; a handler holding that stand-in failed every later line ("I/O operation on closed file").
    """

    @property
    def stream(self):  # noqa: ANN202 - a text stream
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:  # noqa: ANN001 - StreamHandler.__init__ assigns it; nothing to keep
        pass


def configure_logging(settings: Settings) -> None:
    """Send mentor's lines (the root logger) to stderr in the configured format; replaces an earlier set-up.

    `mentor serve` then hands uvicorn `uvicorn_log_config`, which sets the same format for uvicorn's lines.
    """
    handler = CurrentStderr()
    handler.setFormatter(json_formatter() if settings.log_format == "json" else PlainFormatter())
    handler.addFilter(RequestIdFilter())
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(settings.log_level.upper())


def route_templates(app: FastAPI) -> list[str]:
    """Every path template the app serves: its API (from the OpenAPI document) and its own pages (/docs...)."""
    from starlette.routing import Route

    pages = [route.path for route in app.routes if isinstance(route, Route)]
    return [*app.openapi()["paths"], *pages]


def uvicorn_log_config(app: FastAPI) -> dict[str, Any]:
    """The whole logging configuration of `mentor serve`: uvicorn's loggers and the root (mentor's lines), in the
    app's MENTOR_LOG_FORMAT, every handler adding the request id, the access log going through `AccessLogPaths`.

    Plain data only (filters and formatters named by import path): `--workers` sends it to each worker process.
    Like uvicorn's own configuration, access lines go to stdout and the rest to stderr.
    """
    settings = app.state.settings

    def handler(formatter: str, stream: str) -> dict[str, Any]:
        return {"class": "logging.StreamHandler", "formatter": formatter, "stream": stream, "filters": ["request_id"]}

    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {
            "request_id": {"()": "mentor.logs.RequestIdFilter"},
            "route_templates": {"()": "mentor.logs.AccessLogPaths", "templates": route_templates(app)},
        },
        # Named as in uvicorn's configuration, which sets `use_colors` on these two when asked to.
        "formatters": {
            "default": formatter_config(settings.log_format),
            "access": formatter_config(settings.log_format),
        },
        "handlers": {
            "default": handler("default", "ext://sys.stderr"),
            "access": handler("access", "ext://sys.stdout"),
        },
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": "INFO", "propagate": False},
            "uvicorn.error": {"level": "INFO"},
            "uvicorn.access": {
                "handlers": ["access"],
                "level": "INFO",
                "propagate": False,
                "filters": ["route_templates"],
            },
        },
        "root": {"handlers": ["default"], "level": settings.log_level.upper()},
    }
