"""Pure ASGI middleware every request passes: its id and route for the logs, HTTP metrics, security headers, request
limits, and a 500 that keeps the connection.

Order, outermost first (see `create_app`): RequestContext -> HTTPMetrics -> SecurityHeaders -> CORS ->
RequestLimits -> ServerErrors -> the routes, so every log line of a request (a refusal's included) names it, every
answer is counted, the headers (CORS ones for an allowed origin too) are on every answer, limits and 500s included,
and a limit's answer can close the connection.

Where each limit lives (a reverse proxy in front should carry the same or tighter ones):
- header bytes, body bytes, time to receive a body: here, `RequestLimits`;
- request target: uvicorn with httptools refuses one over 64 KiB itself (400); the longest legitimate one, a
  search for 4,000 characters percent-encoded at up to 12 bytes each, is 48,000 bytes;
- idle keep-alive connections: uvicorn's `timeout_keep_alive`, set by `mentor serve` (mentor/cli.py);
- bytes and time before the request headers are complete (slow-loris): uvicorn has no bound (an idle or half-sent
  request is held indefinitely), so only a reverse proxy imposes one (nginx: client_header_timeout,
  large_client_header_buffers).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
import weakref
from http import HTTPStatus
from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mentor.logs import REQUEST_ID, ROUTE, UNROUTED, AccessLogPaths, route_templates

log = logging.getLogger(__name__)

# gunicorn refuses a header field over 8,190 bytes and nginx a header line over 8 KB by default; 16 KiB in total
# leaves room for a few such headers and is 60x smaller than the 1 MB Authorization header we used to accept.
MAX_HEADER_BYTES = 16 * 1024
# The largest legitimate body is a chat request: a 4,000-character message (at most 48,000 bytes, when every
# character lies outside the BMP and is sent as a \u escape pair of 12 bytes) and ids of a few hundred bytes.
MAX_BODY_BYTES = 64 * 1024
# A 64 KiB body arrives in under a second on any link that can use the service; 10 s frees a connection held open
# by a body shorter than its Content-Length (it used to wait forever).
BODY_TIMEOUT_S = 10.0
# CSP for JSON, event streams, scripts and styles: load nothing, be framed by nothing.
CSP_DATA = "default-src 'none'; frame-ancestors 'none'"


def page_csp(*script_sources: str) -> str:
    """The CSP of an HTML page of ours; `script_sources` are exceptions a page needs (a hash of its inline script).

    Pages load their scripts and styles as files from this origin and call only this origin's API; no inline
    script or event handler runs. Inline styles are allowed: the box's shadow DOM and Swagger UI set style
    attributes, and a style cannot run code. `data:` images are Swagger UI's icons.
    """
    return "; ".join(
        [
            "default-src 'self'",
            " ".join(["script-src 'self'", *script_sources]),
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data:",
            "connect-src 'self'",
            "frame-ancestors 'none'",
            "base-uri 'none'",
            "form-action 'self'",
        ]
    )


CSP_PAGES = page_csp()


# A caller's X-Request-ID (nginx's $request_id is 32 hex digits; UUIDs have dashes) is kept when it is this short and
# plain; anything else (spaces, quotes, newlines that would forge log lines, a kilobyte of text) is replaced.
REQUEST_ID_FORMAT = re.compile(r"[A-Za-z0-9._:-]{1,64}")
# Methods counted by name; any other token a client sends is "other", so no client can add label values at will.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def request_id_of(scope: Scope) -> str:
    """The caller's X-Request-ID if it is short and plain, else a new one."""
    for name, value in scope["headers"]:
        if name == b"x-request-id":
            candidate = value.decode("latin-1")
            return candidate if REQUEST_ID_FORMAT.fullmatch(candidate) else uuid.uuid4().hex
    return uuid.uuid4().hex


_fallback_routes: weakref.WeakKeyDictionary[Any, AccessLogPaths] = weakref.WeakKeyDictionary()


def route_of(scope: Scope) -> str | None:
    """The template of the route that served the request; for one refused before routing (413, 431), the template
    its path matches; None when no route serves it (its raw path is never used: it may hold a learner id)."""
    path = getattr(scope.get("route"), "path", None)
    if path:
        return path
    app = scope.get("app")
    if app is None:
        return None
    if app not in _fallback_routes:
        _fallback_routes[app] = AccessLogPaths(route_templates(app))
    template = _fallback_routes[app].template(scope["path"])
    return None if template == UNROUTED else template


class RequestContext:
    """Name the request: its id (X-Request-ID, accepted or made up) in every log line and in the response's
    X-Request-ID header, its route template in the access log line."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_id_of(scope)
        # Set and never reset: uvicorn runs each request in a task of its own, whose context nothing else shares,
        # and its own lines about the request (the access line, an "Exception in ASGI application") keep the id.
        REQUEST_ID.set(request_id)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)["X-Request-ID"] = request_id
                ROUTE.set(route_of(scope))  # uvicorn writes the access line inside this send
            await send(message)

        await self.app(scope, receive, send_with_id)


class HTTPMetrics:
    """Count every response and time it to its last byte, by method, route template and status."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # if nothing was sent: the exception ends the connection

        async def tracking_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        finally:
            # The runtime's metrics, once the lifespan built it (a request cannot arrive before).
            metrics = getattr(getattr(scope["app"].state, "runtime", None), "metrics", None)
            if metrics is not None:
                method = scope["method"] if scope["method"] in METHODS else "other"
                metrics.request(method, route_of(scope), status, time.perf_counter() - started)


def error_response(status: int, message: str, *, code: str | None = None, close: bool = False) -> JSONResponse:
    """An error body ({"error", "message"}), coded by the status phrase unless given; `close` ends the connection."""
    code = code or HTTPStatus(status).phrase.lower().replace(" ", "_").replace("-", "_")
    return JSONResponse({"error": code, "message": message}, status, headers={"Connection": "close"} if close else None)


class SecurityHeaders:
    """Add nosniff, a frame policy, no referrer, a CSP and no-store to every response, unless the route set its own
    CSP (/docs adds the hash of its inline script) or Cache-Control (static files)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers["X-Content-Type-Options"] = "nosniff"
                headers["Referrer-Policy"] = "no-referrer"
                html = headers.get("content-type", "").startswith("text/html")
                headers.setdefault("Content-Security-Policy", CSP_PAGES if html else CSP_DATA)
                # A page that lets itself be framed (the LTI pages, shown in the LMS's iframe) says so in its own
                # frame-ancestors; every other answer is framed by nothing.
                if "frame-ancestors 'none'" in headers["Content-Security-Policy"]:
                    headers["X-Frame-Options"] = "DENY"
                # Answers carry learners' questions or analyst data; nothing here is safe for a shared cache.
                headers.setdefault("Cache-Control", "no-store")
            await send(message)

        await self.app(scope, receive, send_with_headers)


class RequestLimits:
    """Refuse oversized headers (431) and bodies (413), and bodies that arrive too slowly (408).

    Each refusal closes the connection (`Connection: close`): the rest of the request may still be in flight. So
    does any response sent before the request body was fully received, unless the rest is already there.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.refuse(scope)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        body = BodyReader(receive, expected=self.expects_body(scope), expects_continue=self.expects_continue(scope))

        async def send_closing_if_unread(message: Message) -> None:
            if message["type"] == "http.response.start" and not await body.drain():
                MutableHeaders(scope=message)["Connection"] = "close"
            await send(message)

        await self.app(scope, body.receive, send_closing_if_unread)

    @staticmethod
    def refuse(scope: Scope) -> JSONResponse | None:
        header_bytes = sum(len(name) + len(value) for name, value in scope["headers"])
        if header_bytes > MAX_HEADER_BYTES:
            return error_response(431, f"request headers: at most {MAX_HEADER_BYTES} bytes in all", close=True)
        length = content_length(scope)
        if length is not None and length > MAX_BODY_BYTES:
            return error_response(413, f"request body: at most {MAX_BODY_BYTES} bytes", close=True)
        return None

    @staticmethod
    def expects_continue(scope: Scope) -> bool:
        return any(name == b"expect" and value.lower() == b"100-continue" for name, value in scope["headers"])

    @staticmethod
    def expects_body(scope: Scope) -> bool:
        length = content_length(scope)
        chunked = any(name == b"transfer-encoding" for name, _ in scope["headers"])
        return chunked or bool(length)


def content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class BodyReader:
    """The app's `receive`, bounded: the body must arrive within BODY_TIMEOUT_S of being asked for, and be small.

    The errors are HTTPExceptions because FastAPI re-raises those from its body parsing (anything else it turns
    into "400 There was an error parsing the body"), so the route's own error handler answers them.
    """

    def __init__(self, receive: Receive, *, expected: bool, expects_continue: bool) -> None:
        self._receive = receive
        self.complete = not expected
        self.expects_continue = expects_continue
        self.received = 0
        self.deadline: float | None = None

    async def receive(self) -> Message:
        if self.complete:
            return await self._receive()  # only http.disconnect is left to wait for, as long as it takes
        if self.deadline is None:
            self.deadline = time.monotonic() + BODY_TIMEOUT_S
        try:
            message = await asyncio.wait_for(self._receive(), max(self.deadline - time.monotonic(), 0.001))
        except TimeoutError:
            raise HTTPException(408, f"request body: not received within {BODY_TIMEOUT_S:.0f} s") from None
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > MAX_BODY_BYTES:  # a chunked body has no Content-Length to check up front
                raise HTTPException(413, f"request body: at most {MAX_BODY_BYTES} bytes")
            self.complete = not message.get("more_body", False)
        else:
            self.complete = True  # disconnected
        return message

    async def drain(self) -> bool:
        """Read what is left of an unread body if it is already here; False when the connection must close."""
        if self.complete:
            return True
        if self.received > MAX_BODY_BYTES or (self.expects_continue and self.deadline is None):
            # A client that sent "Expect: 100-continue" waits for leave to send its body: reading it now would
            # give that leave (uvicorn answers "100 Continue" on the first receive) only to throw the body away.
            return False
        try:
            while not self.complete:
                # What the client sent with its headers is already buffered: a short wait tells it from a body
                # still on its way, which is not worth waiting for once the answer is known.
                message = await asyncio.wait_for(self._receive(), 0.05)
                if message["type"] != "http.request":
                    return False
                self.received += len(message.get("body", b""))
                self.complete = not message.get("more_body", False)
                if self.received > MAX_BODY_BYTES:
                    return False
        except TimeoutError:
            return False
        return True


class ServerErrors:
    """Answer an unexpected exception with a plain 500 and keep the connection usable.

    Starlette's ServerErrorMiddleware answers and then re-raises, and uvicorn closes the transport after such an
    answer without a `Connection: close` header: a keep-alive client's next request on it was reset. Here the
    error is logged once and the exchange ends normally. An exception after the response started can only end
    with the connection (the client sees a truncated body), so it is re-raised.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception:
            if started:
                raise
            route = scope.get("route")
            # The route's template, never the raw path: a path can carry a learner id.
            log.exception("unexpected error in %s %s", scope["method"], getattr(route, "path", "(no route)"))
            await error_response(500, "something went wrong on our side", code="internal_error")(scope, receive, send)
