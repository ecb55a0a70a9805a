"""The FastAPI application: lifespan builds the runtime once; errors become plain 4xx/5xx JSON."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from mentor import __version__
from mentor.api import (
    routes_analyst,
    routes_chat,
    routes_dashboard,
    routes_learner,
    routes_openai,
    routes_ops,
    routes_pages,
    routes_tools,
)
from mentor.api.docs import install_docs
from mentor.api.middleware import (
    HTTPMetrics,
    RequestContext,
    RequestLimits,
    SecurityHeaders,
    ServerErrors,
    error_response,
)
from mentor.errors import MentorError, NotReady, RateLimited, Unauthorized
from mentor.logs import configure_logging
from mentor.lti.router import router as lti_router
from mentor.runtime import Runtime, build_runtime
from mentor.settings import Settings
from mentor.tools.registry import explain_json_error

log = logging.getLogger(__name__)


# How long a thread waiting for the GIL lets the holder run before asking for it (Python's default: 5 ms). A
# question's reading and its forward pass coming back (worker threads), the signal writer and the event loop each
# waited up to that for one another: at 1 ms a new question at concurrency 1 took 19.6 ms instead of 20.6 (p50),
# and concurrency 32 served 1-3% more (side-by-side servers, 2 cores).
GIL_SWITCH_INTERVAL_S = 0.001


def tune_serving_process() -> None:
    """Set what a process that serves requests needs of the interpreter (`mentor serve`, each worker)."""
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)


def ready_message(host: str, port: int) -> str:
    """The line `mentor serve` logs once it listens: where to point a browser."""
    shown = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "[::1]"}.get(host, f"[{host}]" if ":" in host else host)
    base = f"http://{shown}:{port}"
    return f"mentor ready at {base} — the box at /, the dashboard at /dashboard, the API at /docs"


def run_server(app: FastAPI, **options: Any) -> None:
    """Serve `app` as `uvicorn.run` would (`options` are uvicorn's), and log `ready_message` once the port is open.

    The lifespan's own line comes before uvicorn binds the port, and a port already taken fails after it: the
    address is announced only when a browser can reach it. Exits 3 (uvicorn's start-up failure) if it never was.
    """
    import uvicorn

    class Announcing(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started and not self.should_exit:
                log.info(ready_message(self.config.host, self.config.port))

    server = Announcing(uvicorn.Config(app, **options))
    with contextlib.suppress(KeyboardInterrupt):
        server.run()
    if not server.started:
        sys.exit(3)


def create_app_from_environment() -> FastAPI:
    """The app as a worker process builds it (`mentor serve --workers N`): settings from the environment."""
    tune_serving_process()
    settings = Settings()
    if not logging.getLogger().handlers:  # `mentor serve` configured it already (mentor.logs.uvicorn_log_config)
        configure_logging(settings)
    return create_app(settings)


async def watch_index(runtime: Runtime, interval_s: float) -> None:
    """Swap in the catalog the shared index publishes whenever it changes; one log line per failure streak."""
    failing = False
    while True:
        await asyncio.sleep(interval_s)
        try:
            await asyncio.to_thread(runtime.refresh)
        except Exception as exc:  # Chroma away, or an ingest under way: keep serving what is loaded
            if not failing:
                log.warning("cannot read the shared index (%s); serving the modules already loaded", exc)
            failing = True
        else:
            if failing:
                log.info("the shared index can be read again")
            failing = False


def create_app(settings: Settings, *, runtime: Runtime | None = None) -> FastAPI:
    """Build the app; pass a prebuilt `runtime` to share one across apps (tests, benchmarks)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.settings = settings
        app.state.runtime = built = runtime or await asyncio.to_thread(build_runtime, settings)
        # The writer first: its schema check then runs while the stages warm, not inside a learner's request.
        writer = built.writer.start()
        # Load the embedding model and run every stage once now, not on the first learner's question.
        log.info("warming up: running every answer stage once…")
        started = time.perf_counter()
        await asyncio.to_thread(built.embedder.embed_query, "warm up")
        try:
            await asyncio.to_thread(built.chat.warm)
        except Exception:  # a slower first answer is better than no service
            log.exception("warming the answer stages failed; the first questions will be slower")
        log.info(
            "mentor ready: %s (%s), warmed up in %.1f s",
            built.catalog.describe(),
            built.ingest_report or "as published in the index",
            time.perf_counter() - started,
        )
        # A shared index is watched: a module another process ingested is served within one interval.
        watching = bool(settings.chroma_url) and settings.reload_interval_s > 0
        watcher = asyncio.create_task(watch_index(built, settings.reload_interval_s)) if watching else None
        yield
        if watcher is not None:
            watcher.cancel()
        if runtime is None:
            await asyncio.to_thread(writer.stop)

    app = FastAPI(
        title="mentor",
        version=__version__,
        summary="Answers learners' questions grounded in the study module they are reading.",
        lifespan=lifespan,
        docs_url=None,  # FastAPI's own pages load Swagger UI and ReDoc from a CDN; install_docs serves it locally
        redoc_url=None,
    )
    app.state.settings = settings  # for uvicorn_log_config (mentor.logs) before the lifespan runs, too
    app.include_router(routes_ops.router)
    app.include_router(routes_learner.router)
    app.include_router(routes_chat.router)
    app.include_router(routes_openai.router)  # errors in OpenAI's shape: see OpenAIRoute
    app.include_router(routes_tools.router)
    app.include_router(routes_analyst.router)
    app.include_router(routes_pages.router)
    app.include_router(routes_dashboard.router)
    app.include_router(lti_router)  # /lti/*: mentor as an LTI 1.3 tool (mentor/lti)
    install_docs(app)
    _install_error_handlers(app)
    # add_middleware wraps what is there: the last added runs first (see mentor/api/middleware.py). CORS sits
    # outside the limits and ServerErrors so that their 413, 431 and 500 reach an allowed page with
    # Access-Control-Allow-Origin, and the page can show the message instead of a bare network error.
    app.add_middleware(ServerErrors)
    app.add_middleware(RequestLimits)
    app.add_middleware(
        CORSMiddleware,
        allow_origins=settings.allowed_origins,
        allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
        # Not X-Mentor-Server-Key: it is for server-to-server calls, so no browser is let to send it.
        allow_headers=["Authorization", "Content-Type", "X-Request-ID"],
        # The box shows how long to wait after a 429; a page may quote the request id when reporting a problem.
        expose_headers=["Retry-After", "X-Request-ID"],
        allow_credentials=False,  # tokens travel in the Authorization header; no cookie is ever needed
    )
    app.add_middleware(SecurityHeaders)
    # Outermost: every response is counted and carries X-Request-ID, and every log line of a request names it.
    app.add_middleware(HTTPMetrics)
    app.add_middleware(RequestContext)
    return app


# Seconds a client should wait after a 503: a database restart or fail-over takes a few seconds, and the writer
# retries its spool on the same order of time.
RETRY_AFTER_S = 5


def _install_error_handlers(app: FastAPI) -> None:
    """Every error becomes {"error", "message"}; unexpected exceptions are ServerErrors' (middleware.py)."""

    @app.exception_handler(MentorError)
    async def mentor_error(_request: Request, exc: MentorError) -> JSONResponse:
        headers = None
        if isinstance(exc, RateLimited):
            headers = {"Retry-After": str(exc.retry_after_s)}
        elif isinstance(exc, NotReady):
            headers = {"Retry-After": str(RETRY_AFTER_S)}
        elif isinstance(exc, Unauthorized):
            headers = {"WWW-Authenticate": "Bearer"}
        return JSONResponse({"error": exc.code, "message": exc.message}, exc.status_code, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"error": "invalid_input", "message": describe_validation(exc.errors())}, 422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:
            # FastAPI answers 400 when a JSON body cannot be decoded at all (not UTF-8, nested 100,000 deep, a
            # 5,000-digit number) but 422 when its syntax is wrong; both are "your body is not usable JSON", so
            # both are 422 with the reason, as POST /v1/tools/{name} and the CLI say it.
            return error_response(422, f"the request body is {explain_json_error(exc.__cause__)}", code="invalid_input")
        response = error_response(exc.status_code, str(exc.detail))
        response.headers.update(exc.headers or {})  # e.g. Allow on a 405
        return response


def describe_validation(errors: list[dict]) -> str:
    """One plain sentence per problem: where it is and what is wrong, without pydantic's URLs."""
    parts = []
    for error in errors[:5]:
        where = ".".join(str(p) for p in error.get("loc", ()) if p not in ("body", "query", "path"))
        message = error.get("msg", "is invalid")
        if error.get("type") == "json_invalid":
            parts.append("the request body is not valid JSON")
        elif error.get("type") == "missing":
            parts.append(f"{where}: is required")
        else:
            parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)
