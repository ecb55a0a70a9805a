"""Operations routes: liveness, readiness and Prometheus metrics."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from mentor.api.deps import ClientKeyDep, RuntimeDep, SettingsDep, require_token
from mentor.api.schemas import Health
from mentor.errors import NotFound

router = APIRouter(tags=["ops"])


@router.get("/livez", response_model=Health)
@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """The process is up (liveness: touches no dependency, so an outage never gets a replica restarted).

    On the event loop: a probe that waited for a worker thread waited behind the questions holding the GIL.
    """
    return Health(status="ok")


@router.get(
    "/readyz",
    response_model=Health,
    responses={503: {"model": Health, "description": "No question can be answered (no module loaded)."}},
)
def readyz(runtime: RuntimeDep) -> Health | JSONResponse:
    """200 while questions can be answered ("ready", or "degraded" naming the part that is down); 503 otherwise."""
    readiness = runtime.readiness()
    health = Health(status=readiness.status, detail=readiness.detail)
    if readiness.answerable:
        return health
    return JSONResponse(health.model_dump(), status_code=503)


# Not in the OpenAPI document: its body is Prometheus's text format, for Prometheus, not an API for clients.
@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request, settings: SettingsDep, runtime: RuntimeDep, client_key: ClientKeyDep) -> Response:
    """Prometheus metrics of this process, or of every worker of `mentor serve --workers N`.

    Open unless MENTOR_METRICS_TOKEN is set: they hold counts by route, module, engine and calculator, never a
    learner's id or words, and Prometheus scrapes an internal port. Not the analyst token: a scrape configuration
    would then hold the key to learners' questions.
    """
    if not settings.metrics or runtime.metrics is None:
        raise NotFound("metrics are turned off on this server (MENTOR_METRICS=false)")
    if settings.metrics_token is not None:  # wrong tokens count as the analyst routes' do
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        await require_token(
            token.strip() if scheme.lower() == "bearer" else "",
            settings.metrics_token.get_secret_value(),
            runtime=runtime,
            client_key=client_key,
            refusal="/metrics needs 'Authorization: Bearer <MENTOR_METRICS_TOKEN>'",
        )
    body, content_type = await asyncio.to_thread(runtime.metrics.exposition, request.headers.get("accept", ""))
    return Response(body, media_type=content_type)
