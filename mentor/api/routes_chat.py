"""The "Ask the mentor" box: one answer, or the same answer as a server-sent event stream."""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import re
import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field
from sse_starlette import EventSourceResponse

from mentor.answer import ChatInput, ToolCall
from mentor.api.deps import Learner, LearnerDep, RuntimeDep, SettingsDep, client_address
from mentor.api.schemas import ChatRequest, ChatResponse, ErrorResponse, FeedbackRequest, ToolCallOut
from mentor.errors import InvalidInput, MentorError, NotFound, NotReady
from mentor.record import AnsweredQuestion
from mentor.signals.queries import question_owner
from mentor.signals.records import Feedback

log = logging.getLogger(__name__)
router = APIRouter(prefix="/v1", tags=["learner"])
ERRORS: dict[int | str, dict[str, Any]] = {
    401: {
        "model": ErrorResponse,
        "description": "Learner tokens are required here and the token is bad, or a learner_id is sent without "
        "the server key, or it differs from the token's learner.",
    },
    404: {"model": ErrorResponse, "description": "Unknown module, or a conversation or question not this learner's."},
    422: {"model": ErrorResponse, "description": "The body is not usable JSON or breaks a rule (message length...)."},
    429: {
        "model": ErrorResponse,
        "description": "Too many questions from this learner, or from this address while learner ids are not proven "
        "by a token; see Retry-After.",
    },
    503: {"model": ErrorResponse, "description": "The index or the database cannot be used now; see Retry-After."},
}

# Appended to the security FastAPI lists for LearnerDep (a learner token or the server key). The empty requirement
# says neither is needed: anonymous learners, and every learner while MENTOR_LEARNER_TOKEN_SECRET is unset, send none.
ANONYMOUS_ALLOWED: dict[str, Any] = {"security": [{}]}

# Documented in the schema, checked in the route (with a plainer message than pydantic's).
QUESTION_ID = {"pattern": "^[0-9a-f]{32}$"}

# One server-sent event of /v1/chat/stream, as the stream's parsers (and schemathesis) read it.
SSE_EVENT = {
    "type": "object",
    "required": ["event", "data"],
    "properties": {
        "id": {
            "type": "string",
            "description": "The event's place in its stream: 1 (meta), 2, 3... A stream cannot be resumed (it answers "
            "a POST), so Last-Event-ID is not read.",
        },
        "event": {"type": "string", "enum": ["meta", "delta", "tool_call", "done", "error"]},
        "data": {
            "type": "string",
            "description": "JSON: {question_id, conversation_id, module_id} (meta), {text} (delta), a tool call "
            "(tool_call), the ChatResponse (done) or {message} (error).",
        },
    },
}
STREAM_DESCRIPTION = (
    "Server-sent events: meta, delta..., tool_call..., then done (or error), each with an id; comment lines "
    "(`: ping`) keep a quiet stream open every MENTOR_SSE_PING_S seconds. A client that disconnects stops the "
    'answer, and the question is still logged (fallback_reason "abandoned").'
)


class SessionInfo(BaseModel):
    """How this server identifies learners, so a page knows what to send."""

    learner_tokens: bool = Field(
        description="True: send `Authorization: Bearer <learner token>` (or nothing, to ask anonymously); a raw "
        "learner_id is refused. False: send learner_id as is (e.g. a per-browser anonymous id)."
    )


@router.get("/session", response_model=SessionInfo)
def session(settings: SettingsDep) -> SessionInfo:
    """Whether learner routes require learner tokens."""
    return SessionInfo(learner_tokens=settings.learner_token_secret is not None)


def to_input(body: ChatRequest, request: Request, learner: Learner, *, channel: str = "chat") -> ChatInput:
    return ChatInput(
        message=body.message,
        module_id=body.module_id,
        conversation_id=body.conversation_id,
        learner_id=learner.resolve(body.learner_id),
        style=body.style,
        client=client_address(request),
        authenticated=learner.authenticated,
        channel=channel,
        lti_context=learner.token_context,
    )


@router.post("/chat", response_model=ChatResponse, responses=ERRORS, openapi_extra=ANONYMOUS_ALLOWED)
async def chat(body: ChatRequest, request: Request, runtime: RuntimeDep, learner: LearnerDep) -> JSONResponse:
    """Answer a learner's question from the module, with citations, calculator results and a grounding verdict."""
    answered = await runtime.chat.ask(to_input(body, request, learner))
    # Built and validated once by ChatResponse.of; returning a response skips validating it a second time.
    return JSONResponse(ChatResponse.of(answered).public())


@router.post(
    "/chat/stream",
    response_class=Response,  # the 200 is an event stream (below), never a JSON document
    responses={
        200: {"description": STREAM_DESCRIPTION, "content": {"text/event-stream": {"schema": SSE_EVENT}}},
        **ERRORS,
    },
    openapi_extra=ANONYMOUS_ALLOWED,
)
async def chat_stream(
    body: ChatRequest, request: Request, runtime: RuntimeDep, learner: LearnerDep, settings: SettingsDep
) -> EventSourceResponse:
    """The same answer as server-sent events: meta, delta..., tool_call..., then done (or error)."""
    prepared = await runtime.chat.prepare(to_input(body, request, learner, channel="stream"))  # 4xx before it starts
    hint = prepared.input.style == "hint"

    async def stream() -> AsyncIterator[dict[str, str]]:
        # When the client disconnects, sse-starlette cancels this generator (or closes it, if it waits at a
        # yield); `aclosing` closes the chat's events at once too, so the answer stops and its signal is logged.
        number = 0
        async with aclosing(runtime.chat.events(prepared)) as events:
            try:
                async for kind, payload in events:
                    number += 1
                    yield sse(number, kind, payload, hint=hint)
            except MentorError as exc:
                yield sse(number + 1, "error", {"message": exc.message})
            except Exception:
                log.exception("chat stream failed")
                yield sse(number + 1, "error", {"message": "something went wrong on our side; please ask again"})

    # no-store: the stream carries the learner's question and answer (sse-starlette adds it, and X-Accel-Buffering:
    # no so that a proxy passes each event on at once). "\n" ends lines, as before (the widget reads either).
    return EventSourceResponse(stream(), ping=settings.sse_ping_s, sep="\n", headers={"Cache-Control": "no-store"})


def sse(number: int, kind: str, payload: Any, *, hint: bool = False) -> dict[str, str]:
    """One server-sent event; in hint style a tool call withholds its result, as the final answer does."""
    if isinstance(payload, AnsweredQuestion):
        data = ChatResponse.of(payload).public()
    elif isinstance(payload, ToolCall):
        data = ToolCallOut.of(payload, hint=hint).model_dump()
    elif isinstance(payload, str):
        data = {"text": payload}
    else:
        data = payload
    return {"id": str(number), "event": kind, "data": json.dumps(data, ensure_ascii=False)}


@router.post(
    "/questions/{question_id}/feedback",
    status_code=201,
    responses={code: ERRORS[code] for code in (401, 404, 422, 503)},  # feedback is not rate-limited
    openapi_extra=ANONYMOUS_ALLOWED,
)
async def feedback(
    question_id: Annotated[str, Path(description="The question_id an answer returned.", json_schema_extra=QUESTION_ID)],
    body: FeedbackRequest,
    runtime: RuntimeDep,
    learner: LearnerDep,
) -> dict[str, str]:
    """Record the asking learner's rating of an answer (someone else's question is not found)."""
    if not re.fullmatch(QUESTION_ID["pattern"], question_id):
        raise InvalidInput("question_id: must be the 32-character id an answer returned")
    learner_key = runtime.chat.learner_key(learner.resolve(body.learner_id))
    asker = await runtime.chat.asker(question_id)
    if asker is None:
        try:
            asker = await asyncio.to_thread(question_owner, runtime.database, question_id)
        except Exception as exc:
            raise NotReady("feedback cannot be checked right now; please try again") from exc
    if asker is None or not hmac.compare_digest(asker, learner_key):
        raise NotFound(f"question {question_id} not found for this learner")
    runtime.writer.submit(Feedback(question_id, learner_key, body.rating, body.comment, time.time()))
    return {"status": "recorded"}
