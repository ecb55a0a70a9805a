"""The "Ask the mentor" box: one answer, or the same answer as a server-sent event stream."""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import re
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from mentor.answer import ChatInput, ToolCall
from mentor.api.deps import RuntimeDep
from mentor.api.schemas import ChatRequest, ChatResponse, ErrorResponse, FeedbackRequest
from mentor.errors import InvalidInput, MentorError, NotFound, NotReady
from mentor.record import AnsweredQuestion
from mentor.signals.queries import question_owner
from mentor.signals.records import Feedback

log = logging.getLogger(__name__)
router = APIRouter(prefix="/v1", tags=["learner"])
ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "Unknown module, or a conversation or question not this learner's."},
    422: {"model": ErrorResponse, "description": "The body is not usable JSON or breaks a rule (message length...)."},
    429: {"model": ErrorResponse, "description": "Too many questions from this learner; see Retry-After."},
    503: {"model": ErrorResponse, "description": "The index or the database cannot be used now; see Retry-After."},
}


# Documented in the schema, checked in the route (with a plainer message than pydantic's).
QUESTION_ID = {"pattern": "^[0-9a-f]{32}$"}

# One server-sent event of /v1/chat/stream, as the stream's parsers (and schemathesis) read it.
SSE_EVENT = {
    "type": "object",
    "required": ["event", "data"],
    "properties": {
        "event": {"type": "string", "enum": ["meta", "delta", "tool_call", "done", "error"]},
        "data": {
            "type": "string",
            "description": "JSON: {question_id, conversation_id, module_id} (meta), {text} (delta), a tool call "
            "(tool_call), the ChatResponse (done) or {message} (error).",
        },
    },
}


def to_input(body: ChatRequest, request: Request) -> ChatInput:
    return ChatInput(
        message=body.message,
        module_id=body.module_id,
        conversation_id=body.conversation_id,
        learner_id=body.learner_id,
        style=body.style,
        client=request.client.host if request.client else "unknown",
    )


@router.post("/chat", response_model=ChatResponse, responses=ERRORS)
async def chat(body: ChatRequest, request: Request, runtime: RuntimeDep) -> JSONResponse:
    """Answer a learner's question from the module, with citations, calculator results and a grounding verdict."""
    answered = await runtime.chat.ask(to_input(body, request))
    # Built and validated once by ChatResponse.of; returning a response skips validating it a second time.
    return JSONResponse(ChatResponse.of(answered).public())


@router.post(
    "/chat/stream",
    response_class=Response,  # the 200 is an event stream (below), never a JSON document
    responses={
        200: {
            "description": "Server-sent events: meta, delta..., tool_call..., then done (or error).",
            "content": {"text/event-stream": {"schema": SSE_EVENT}},
        },
        **ERRORS,
    },
)
async def chat_stream(body: ChatRequest, request: Request, runtime: RuntimeDep) -> StreamingResponse:
    """The same answer as server-sent events: meta, delta..., tool_call..., then done (or error)."""
    prepared = await runtime.chat.prepare(to_input(body, request))  # 4xx before the stream starts

    async def stream() -> AsyncIterator[str]:
        try:
            async for kind, payload in runtime.chat.events(prepared):
                yield sse(kind, payload)
        except MentorError as exc:
            yield sse("error", {"message": exc.message})
        except Exception:
            log.exception("chat stream failed")
            yield sse("error", {"message": "something went wrong on our side; please ask again"})

    # no-store: the stream carries the learner's question and answer; no proxy buffering, no cache copy.
    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


def sse(kind: str, payload: Any) -> str:
    """One server-sent event."""
    if isinstance(payload, AnsweredQuestion):
        data = ChatResponse.of(payload).public()
    elif isinstance(payload, ToolCall):
        data = payload.public()
    elif isinstance(payload, str):
        data = {"text": payload}
    else:
        data = payload
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


@router.post(
    "/questions/{question_id}/feedback",
    status_code=201,
    responses={code: ERRORS[code] for code in (404, 422, 503)},  # feedback is not rate-limited
)
async def feedback(
    question_id: Annotated[str, Path(description="The question_id an answer returned.", json_schema_extra=QUESTION_ID)],
    body: FeedbackRequest,
    runtime: RuntimeDep,
) -> dict[str, str]:
    """Record the asking learner's rating of an answer (someone else's question is not found)."""
    if not re.fullmatch(QUESTION_ID["pattern"], question_id):
        raise InvalidInput("question_id: must be the 32-character id an answer returned")
    learner = runtime.chat.learner_key(body.learner_id)
    asker = await runtime.chat.asker(question_id)
    if asker is None:
        try:
            asker = await asyncio.to_thread(question_owner, runtime.database, question_id)
        except Exception as exc:
            raise NotReady("feedback cannot be checked right now; please try again") from exc
    if asker is None or not hmac.compare_digest(asker, learner):
        raise NotFound(f"question {question_id} not found for this learner")
    runtime.writer.submit(Feedback(question_id, learner, body.rating, body.comment, time.time()))
    return {"status": "recorded"}
