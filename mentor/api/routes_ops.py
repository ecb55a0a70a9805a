"""Operations routes: liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from mentor.api.deps import RuntimeDep
from mentor.api.schemas import Health
from mentor.db import ping
from mentor.errors import NotReady

router = APIRouter(tags=["ops"])


@router.get("/healthz", response_model=Health)
def healthz() -> Health:
    """The process is up."""
    return Health(status="ok")


@router.get("/readyz", response_model=Health, responses={503: {"model": Health}})
def readyz(runtime: RuntimeDep) -> Health | JSONResponse:
    """200 only when the index and the database can both be used."""
    detail: dict[str, str] = {}
    try:
        count = runtime.collection.count()
        detail["index"] = f"ok ({count} chunks)" if count else "empty"
    except Exception as exc:  # any Chroma failure means not ready
        detail["index"] = f"unavailable: {type(exc).__name__}"
    try:
        ping(runtime.engine)
        detail["database"] = "ok"
    except NotReady as exc:
        detail["database"] = exc.message
    if all(value.startswith("ok") for value in detail.values()):
        return Health(status="ready", detail=detail)
    return JSONResponse(Health(status="not ready", detail=detail).model_dump(), status_code=503)
