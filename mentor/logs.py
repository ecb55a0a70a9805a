"""Request logs without personal details: the access log names routes, never raw paths or query strings."""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable
from typing import Any

from fastapi import FastAPI
from starlette.routing import Route, compile_path
from uvicorn.config import LOGGING_CONFIG

UNROUTED = "…"  # a path no route matches may still hold an e-mail (a mistyped learner id), so it is not logged


class AccessLogPaths(logging.Filter):
    """Replace the request target in uvicorn.access records by its route template.

    `GET /v1/search?q=mail me at a@example.net` is logged as `GET /v1/search`, and
    `DELETE /v1/learners/erase.me@example.com` as `DELETE /v1/learners/{learner_id}`.
    """

    def __init__(self, templates: Iterable[str]) -> None:
        super().__init__()
        self.templates = [(compile_path(template)[0], template) for template in dict.fromkeys(templates)]

    def filter(self, record: logging.LogRecord) -> bool:
        # uvicorn logs '%s - "%s %s HTTP/%s" %d' % (client, method, raw path with query, HTTP version, status).
        if isinstance(record.args, tuple) and len(record.args) == 5:
            client, method, target, version, status = record.args
            record.args = (client, method, self.template(str(target)), version, status)
        return True

    def template(self, target: str) -> str:
        path = target.split("?", 1)[0]
        return next((template for regex, template in self.templates if regex.match(path)), UNROUTED)


def route_templates(app: FastAPI) -> list[str]:
    """Every path template the app serves: its API (from the OpenAPI document) and its own pages (/docs...)."""
    pages = [route.path for route in app.routes if isinstance(route, Route)]
    return [*app.openapi()["paths"], *pages]


def uvicorn_log_config(app: FastAPI) -> dict[str, Any]:
    """uvicorn's own logging configuration, its access log going through `AccessLogPaths`.

    Plain data only (the filter named by its import path): `--workers` sends it to each worker process.
    """
    config = copy.deepcopy(LOGGING_CONFIG)
    config["filters"] = {"route_templates": {"()": "mentor.logs.AccessLogPaths", "templates": route_templates(app)}}
    config["loggers"]["uvicorn.access"]["filters"] = ["route_templates"]
    return config
