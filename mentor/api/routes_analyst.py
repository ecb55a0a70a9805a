"""Routes for analysts (bearer token): the question log, its summary, exports, and erasure of a learner."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from itertools import chain
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from mentor.api.deps import ClientKeyDep, RuntimeDep, require_token
from mentor.api.schemas import ErrorResponse
from mentor.api.schemas_analyst import QuestionPage, SignalSummary
from mentor.errors import InvalidInput, NotReady, Unauthorized
from mentor.lti.analytics import course_of
from mentor.runtime import Runtime
from mentor.settings import Settings
from mentor.signals.exports import MEDIA_TYPES, export_lines
from mentor.signals.queries import Filters, count_questions, erase_learner, iter_questions, list_questions
from mentor.signals.summary import SectionRef, summarize

# Only the Authorization header is read: a token in a query string would be written to access logs, proxy logs
# and browser history.
bearer = HTTPBearer(auto_error=False, description="The analyst token (MENTOR_ANALYST_TOKEN or data_dir/analyst.token).")


async def require_analyst(
    request: Request,
    runtime: RuntimeDep,
    client_key: ClientKeyDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> str | None:
    """Only the analyst token opens these routes, or a course token an LTI staff launch gave (mentor/lti/analytics.py):
    then the course (its pseudonym) is returned and every query is limited to it. Learner identifiers never do.
    Wrong tokens are counted per address: past MENTOR_RATE_LIMIT_BAD_TOKENS_PER_MINUTE, the address gets 429
    whatever it sends."""
    presented = credentials.credentials.strip() if credentials is not None else ""
    course = course_of(getattr(request.app.state, "lti", None), presented)
    if course is not None:
        return course
    await require_token(
        presented,
        runtime.analyst_token,
        runtime=runtime,
        client_key=client_key,
        refusal="analyst routes need 'Authorization: Bearer <analyst token>'",
    )
    return None


CourseDep = Annotated[str | None, Depends(require_analyst)]  # None: the analyst token, every course


router = APIRouter(
    prefix="/v1",
    tags=["analyst"],
    dependencies=[Depends(require_analyst)],
    responses={
        401: {"model": ErrorResponse, "description": "No analyst token, or a wrong one."},
        422: {"model": ErrorResponse, "description": "A filter or parameter is invalid."},
        429: {
            "model": ErrorResponse,
            "description": "Too many wrong tokens from this address: every request from it is refused for a while, "
            "whatever token it sends.",
            "headers": {"Retry-After": {"description": "Seconds to wait.", "schema": {"type": "integer"}}},
        },
        503: {
            "model": ErrorResponse,
            "description": "The signals database cannot be used right now.",
            "headers": {"Retry-After": {"description": "Seconds to wait.", "schema": {"type": "integer"}}},
        },
    },
)


@contextmanager
def database_errors() -> Iterator[None]:
    """A signals database that cannot be reached or used right now is a 503 with Retry-After, not a 500."""
    try:
        yield
    except (OperationalError, InterfaceError, PoolTimeout) as exc:  # connection refused or lost, locked, pool full
        raise NotReady("the signals database cannot be used right now; please try again shortly") from exc


MOMENT = "ISO 8601 date or date-time; without a time zone it is UTC."


def filters(
    module_id: Annotated[str | None, Query(max_length=200)] = None,
    since: Annotated[datetime | None, Query(description=f"{MOMENT} Inclusive.")] = None,
    until: Annotated[datetime | None, Query(description=f"{MOMENT} Exclusive; not before since.")] = None,
    section_id: Annotated[str | None, Query(max_length=200)] = None,
    out_of_scope: bool | None = None,
    grounded: bool | None = None,
    coverage: Annotated[
        Literal["full", "partial", "none"] | None,
        Query(description="How much of the question the module answered; partial marks where the module falls short."),
    ] = None,
    lti_context: Annotated[
        str | None,
        Query(max_length=200, description="One LTI course's questions (its pseudonym, as rows and exports show it)."),
    ] = None,
    course: CourseDep = None,
) -> Filters:
    """The analyst filters, checked here so that an export refuses them before its first byte."""
    since, until = as_utc("since", since), as_utc("until", until)
    if since and until and since > until:
        raise InvalidInput("since: must not be after until")
    # A course analyst token (an instructor's LTI launch) sees its own course, whatever the query asks.
    context = course if course is not None else lti_context
    return Filters(module_id, since, until, section_id, out_of_scope, grounded, coverage, lti_context=context)


def as_utc(name: str, moment: datetime | None) -> datetime | None:
    """The moment in UTC; a date alone or a naive time means UTC (the log stores aware UTC times)."""
    if moment is None:
        return None
    try:
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:00-05:00 is after the last representable UTC moment
        raise InvalidInput(f"{name}: out of range") from None


FiltersDep = Annotated[Filters, Depends(filters)]


@router.get("/signals/questions", response_model=QuestionPage)
async def questions(
    runtime: RuntimeDep,
    where: FiltersDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(max_length=500)] = None,
) -> dict[str, Any]:
    """Logged questions, newest first, with their passages, tool calls and feedback; cursor-paginated."""

    def page() -> dict[str, Any]:
        items, next_cursor = list_questions(runtime.database, where, limit=limit, cursor=cursor)
        return {"items": items, "next_cursor": next_cursor, "total": count_questions(runtime.database, where)}

    with database_errors():
        result = await asyncio.to_thread(page)
    with_passage_texts(runtime, result["items"])
    return result


def with_passage_texts(runtime: Runtime, items: list[dict[str, Any]]) -> None:
    """Add each logged passage's section title and text, from the modules served now (the log keeps ids only)."""
    chunks = {}
    for module_id in {item["module_id"] for item in items}:
        index = runtime.retriever.modules.get(module_id)
        chunks.update({chunk.id: chunk for chunk in index.chunks} if index is not None else {})
    for item in items:
        for passage in item["passages"]:
            chunk = chunks.get(passage["chunk_id"])
            passage["section_title"] = chunk.section_title if chunk else None
            passage["text"] = chunk.text if chunk else None


@router.get("/signals/summary", response_model=SignalSummary)
async def summary(runtime: RuntimeDep, where: FiltersDep, bucket: Literal["day", "week"] = "day") -> dict[str, Any]:
    """Questions per section over time, content gaps, feedback, tools, grounding, engines, most asked.

    Counted in the database on each call (no cache): a handful of GROUP BY queries, and the grouping by meaning
    of the 500 most recent questions of each kind.
    """
    with database_errors():
        report = await asyncio.to_thread(
            summarize,
            runtime.database,
            where,
            bucket=bucket,
            min_cohort=runtime.settings.min_cohort,
            sections=reading_order(runtime, where.module_id),
            embed=runtime.embedder.embed_query,
        )
    return report | {"min_cohort_setting": MIN_COHORT_SETTING}


# The setting behind the hidden groups, named as it is set, so the dashboard can say what would show them.
MIN_COHORT_SETTING = f"{Settings.model_config['env_prefix']}{'min_cohort'.upper()}"


def reading_order(runtime: Runtime, module_id: str | None) -> list[SectionRef]:
    """The sections of the filtered module (or of every served module) in reading order, each id once."""
    modules = [runtime.modules[module_id]] if module_id in runtime.modules else []
    if module_id is None:
        modules = list(runtime.modules.values())
    seen: dict[str, SectionRef] = {}
    for module in modules:
        for section in module.sections:
            seen.setdefault(section.id, SectionRef(module.id, section.id, section.title, section.level))
    return list(seen.values())


EXPORTS = {media: {"schema": {"type": "string"}} for media in sorted(set(MEDIA_TYPES.values()))}


@router.get(
    "/signals/export",
    response_class=Response,  # the 200 is CSV or JSON lines (below), never a JSON document
    responses={200: {"description": "CSV (format=csv) or JSON lines (jsonl, xapi), streamed.", "content": EXPORTS}},
)
def export(
    runtime: RuntimeDep,
    where: FiltersDep,
    format: Literal["csv", "jsonl", "xapi"] = "jsonl",  # noqa: A002
) -> StreamingResponse:
    """The filtered questions as CSV, JSON lines or xAPI 1.0.3 statements, streamed."""
    rows = iter_questions(runtime.database, where)
    with database_errors():
        # The first batch is read before the status is sent: an outage is a 503, not a 200 cut short.
        first = next(rows, None)
    everything = chain([first], rows) if first is not None else iter(())
    lines = export_lines(everything, format, home_page=runtime.settings.public_url)
    extension = {"csv": "csv", "jsonl": "jsonl", "xapi": "xapi.jsonl"}[format]
    return StreamingResponse(
        lines,
        media_type=MEDIA_TYPES[format],
        headers={"Content-Disposition": f'attachment; filename="mentor-signals.{extension}"'},
    )


@router.delete("/learners/{learner_id}", status_code=204, response_class=Response)
async def erase(learner_id: str, runtime: RuntimeDep, course: CourseDep = None) -> Response:
    """Erase everything of one learner, given by the host app's id (an LTI learner's: `mentor lti learner-id`)."""
    if course is not None:
        raise Unauthorized("erasing a learner needs the analyst token, not a course's")
    if not learner_id.strip() or len(learner_id) > 200:
        raise InvalidInput("learner_id: 1-200 characters")
    await asyncio.to_thread(runtime.writer.flush, 5.0)  # what is in flight is erased too
    key = runtime.chat.learner_key(learner_id)
    await runtime.chat.conversations.forget_learner(key)
    with database_errors():
        await asyncio.to_thread(erase_learner, runtime.database, key)
    return Response(status_code=204)
