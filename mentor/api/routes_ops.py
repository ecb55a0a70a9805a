"""Operations routes: liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from mentor.api.deps import RuntimeDep
from mentor.api.schemas import Health

router = APIRouter(tags=["ops"])


@router.get("/livez", response_model=Health)
@router.get("/healthz", response_model=Health)
def healthz() -> Health:
    """The process is up (liveness: touches no dependency, so an outage never gets a replica restarted)."""
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
