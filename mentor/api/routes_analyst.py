"""Routes for analysts (bearer token): the question log, its summary, exports, and erasure of a learner."""

from __future__ import annotations

import asyncio
import hmac
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Query, Response
from fastapi.responses import StreamingResponse

from mentor.api.deps import RuntimeDep
from mentor.api.schemas import ErrorResponse
from mentor.errors import InvalidInput, Unauthorized
from mentor.signals.exports import MEDIA_TYPES, export_lines
from mentor.signals.queries import Filters, erase_learner, iter_questions, list_questions
from mentor.signals.summary import summarize


def require_analyst(
    runtime: RuntimeDep, authorization: Annotated[str | None, Header(description="Bearer <analyst token>")] = None
) -> None:
    """Only the analyst token opens these routes; learner identifiers never do."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), runtime.analyst_token.encode()):
        raise Unauthorized("analyst routes need 'Authorization: Bearer <analyst token>'")


router = APIRouter(
    prefix="/v1",
    tags=["analyst"],
    dependencies=[Depends(require_analyst)],
    responses={401: {"model": ErrorResponse}, 422: {"model": ErrorResponse}},
)


def filters(
    module_id: Annotated[str | None, Query(max_length=200)] = None,
    since: Annotated[datetime | None, Query(description="ISO 8601; inclusive")] = None,
    until: Annotated[datetime | None, Query(description="ISO 8601; exclusive")] = None,
    section_id: Annotated[str | None, Query(max_length=200)] = None,
    out_of_scope: bool | None = None,
    grounded: bool | None = None,
) -> Filters:
    return Filters(module_id, since, until, section_id, out_of_scope, grounded)


FiltersDep = Annotated[Filters, Depends(filters)]


@router.get("/signals/questions")
async def questions(
    runtime: RuntimeDep,
    where: FiltersDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(max_length=500)] = None,
) -> dict[str, Any]:
    """Logged questions, newest first, with their passages, tool calls and feedback; cursor-paginated."""
    items, next_cursor = await asyncio.to_thread(list_questions, runtime.engine, where, limit=limit, cursor=cursor)
    return {"items": items, "next_cursor": next_cursor}


@router.get("/signals/summary")
async def summary(runtime: RuntimeDep, where: FiltersDep, bucket: Literal["day", "week"] = "day") -> dict[str, Any]:
    """Questions per section over time, content gaps, feedback, tools, grounding, engines, most asked."""
    return await asyncio.to_thread(
        summarize,
        runtime.engine,
        where,
        bucket=bucket,
        min_cohort=runtime.settings.min_cohort,
        embed=runtime.embedder.embed_query,
    )


@router.get("/signals/export")
def export(
    runtime: RuntimeDep,
    where: FiltersDep,
    format: Literal["csv", "jsonl", "xapi"] = "jsonl",  # noqa: A002
) -> StreamingResponse:
    """The filtered questions as CSV, JSON lines or xAPI 1.0.3 statements, streamed."""
    lines = export_lines(iter_questions(runtime.engine, where), format, home_page=runtime.settings.public_url)
    extension = {"csv": "csv", "jsonl": "jsonl", "xapi": "xapi.jsonl"}[format]
    return StreamingResponse(
        lines,
        media_type=MEDIA_TYPES[format],
        headers={"Content-Disposition": f'attachment; filename="mentor-signals.{extension}"'},
    )


@router.delete("/learners/{learner_id}", status_code=204, response_class=Response)
async def erase(learner_id: str, runtime: RuntimeDep) -> Response:
    """Erase everything of one learner, given by the host app's id."""
    if not learner_id.strip() or len(learner_id) > 200:
        raise InvalidInput("learner_id: 1-200 characters")
    await asyncio.to_thread(runtime.writer.flush, 5.0)  # what is in flight is erased too
    key = runtime.chat.learner_key(learner_id)
    runtime.chat.conversations.forget_learner(key)
    await asyncio.to_thread(erase_learner, runtime.engine, key)
    return Response(status_code=204)
