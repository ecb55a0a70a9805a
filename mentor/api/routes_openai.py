"""The OpenAI-compatible facade: GET /v1/models and POST /v1/chat/completions, so any tool that speaks OpenAI's
chat-completions API (the `openai` SDK, promptfoo, DeepEval's and lm-eval's wrappers, Open WebUI) can ask mentor.

Each module is a "model"; the last message is the question and earlier user/assistant messages are the
conversation, held by the client. The question goes through the same chat as /v1/chat (validation, learner trust,
rate limit, signals log, marked channel "openai"), and errors leave in OpenAI's shape, translated from mentor's.

Most clients show only `content` (simonw's llm, Open WebUI, a script printing `message.content`), so the answer's
`[n]` markers would name nothing: by default `content` ends with a "Sources:" list of the cited sections' titles
(`mentor.citations.sources_in_words`), taken off again when the client sends the answer back as history. A client
reading the `mentor` extension asks for the bare answer with `mentor_sources: "none"`. The API key is read only
when learner tokens are required (MENTOR_LEARNER_TOKEN_SECRET): otherwise any value is accepted, so clients that
insist on a key can be given a dummy one.

A client writes the `assistant` messages it sends, so they are what the learner was shown by the client's account,
not mentor's: they reach an LLM quoted inside the user message's `<history>` (`mentor.engines.llm`), with personal
details replaced and each earlier question read for orders like the current one, never as the model's own turn.
Quoting every answer was chosen over verifying mentor's own (an HMAC returned with each answer and sent back): the
clients this facade serves (the SDK, Open WebUI, eval harnesses) send back only `role` and `content`, so a signature
would be lost on the way, and a verified answer would still be only as trustworthy as the passages it quoted.
"""

from __future__ import annotations

import inspect
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from http import HTTPStatus
from typing import Any

from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from sse_starlette import EventSourceResponse

from mentor.answer import ChatInput, Turn
from mentor.api.deps import Learner, LearnerDep, RuntimeDep, client_address
from mentor.api.schemas_openai import (
    DEFAULT_MODEL,
    SSE_CHUNK,
    ChatCompletion,
    ChatCompletionRequest,
    ChatMessage,
    MentorExtension,
    ModelCard,
    ModelList,
    OpenAIErrorResponse,
    Usage,
    completion_id,
)
from mentor.citations import sources_in_words, without_sources
from mentor.corpus import Module
from mentor.errors import InvalidInput, MentorError, NotFound, NotReady
from mentor.intake import Prepared
from mentor.record import AnsweredQuestion
from mentor.runtime import Runtime
from mentor.text import MAX_MESSAGE_CHARS

log = logging.getLogger(__name__)

# OpenAI's error `type` by HTTP status; any other 4xx is an invalid request, any 5xx a server error.
ERROR_TYPES = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}


class FacadeInvalid(InvalidInput):
    """A chat-completions body mentor cannot use; `param` names the field, as OpenAI's error object does."""

    def __init__(self, message: str, *, param: str) -> None:
        super().__init__(message)
        self.param = param


class ModelNotFound(NotFound):
    """A `model` that is not a module here: OpenAI's own code for it, so clients recognise it."""

    code = "model_not_found"
    param = "model"


def error_body(status: int, message: str, *, code: str | None, param: str | None = None) -> dict[str, Any]:
    """OpenAI's error object: {"error": {message, type, param, code}}, its type told by the status."""
    kind = ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def openai_error(
    status: int, message: str, *, code: str | None, param: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    """An error response of the facade."""
    return JSONResponse(error_body(status, message, code=code, param=param), status, headers=headers)


def handler_for(request: Request, exc: Exception) -> Callable[..., Any] | None:
    """The app's exception handler for `exc` (the nearest class in its MRO), as Starlette would pick it."""
    handlers = request.app.exception_handlers
    return next((handlers[cls] for cls in type(exc).__mro__ if cls in handlers), None)


async def as_openai_error(request: Request, exc: Exception, *, route: str) -> Response:
    """mentor's answer to `exc` (status, plain message, Retry-After...) in OpenAI's shape.

    mentor's 422 becomes 400: OpenAI answers an unusable request with 400, and clients written against it expect
    that (the SDK's BadRequestError). Anything without a handler is logged and answered as a plain 500.
    """
    respond = handler_for(request, exc)
    if respond is None:
        log.exception("unexpected error in %s %s", request.method, route)  # the template: a path can name a learner
        return openai_error(500, "something went wrong on our side", code="internal_error")
    response = respond(request, exc)
    if inspect.isawaitable(response):
        response = await response
    body = json.loads(response.body)
    param = getattr(exc, "param", None)
    if isinstance(exc, RequestValidationError) and exc.errors():
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        param = where if where and first.get("type") != "json_invalid" else None
    headers = {k: v for k, v in response.headers.items() if k not in ("content-length", "content-type")}
    status = 400 if response.status_code == 422 else response.status_code
    message = body.get("message") or HTTPStatus(response.status_code).phrase  # every mentor handler gives one
    return openai_error(status, message, code=body.get("error"), param=param, headers=headers)


class OpenAIRoute(APIRoute):
    """A facade route: its errors (body validation, learner trust, rate limit...) leave in OpenAI's shape, with
    the status, message and headers mentor's own handlers give them; other routes keep mentor's shape."""

    def get_route_handler(self) -> Callable[[Request], Any]:
        handler = super().get_route_handler()

        async def translated(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as exc:
                return await as_openai_error(request, exc, route=self.path)

        return translated


router = APIRouter(prefix="/v1", tags=["openai"], route_class=OpenAIRoute)
ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": OpenAIErrorResponse, "description": "The body is not usable (no question last, n > 1, ...)."},
    401: {
        "model": OpenAIErrorResponse,
        "description": "Learner tokens are required and the API key is not a valid one, or `user` is sent without "
        "the server key, or it differs from the token's learner.",
    },
    404: {"model": OpenAIErrorResponse, "description": "`model` is not a module here (code model_not_found)."},
    429: {"model": OpenAIErrorResponse, "description": "Too many questions from this learner; see Retry-After."},
    503: {"model": OpenAIErrorResponse, "description": "No module is loaded yet, or the index cannot be used now."},
}
# As on /v1/chat: a learner token (sent as the API key) or the server key, or neither for an anonymous learner.
ANONYMOUS_ALLOWED: dict[str, Any] = {"security": [{}]}


def model_ids(runtime: Runtime) -> list[str]:
    """The models: every module id, and `mentor` while the corpus holds exactly one module."""
    modules = list(runtime.modules)
    return modules + [DEFAULT_MODEL] if len(modules) == 1 and DEFAULT_MODEL not in modules else modules


def resolve_model(runtime: Runtime, model: str) -> Module:
    """The module a `model` names; ModelNotFound (404) with the models to pick from otherwise."""
    modules = runtime.modules
    if model in modules:
        return modules[model]
    if not modules:
        raise NotReady("no module is loaded yet; please try again shortly")
    if model == DEFAULT_MODEL and len(modules) == 1:
        return next(iter(modules.values()))
    known = ", ".join(modules)
    if model == DEFAULT_MODEL:
        raise ModelNotFound(
            f"model {DEFAULT_MODEL!r} stands for the only module, and this server has several: "
            f"ask one by its id ({known}; GET /v1/models)"
        )
    raise ModelNotFound(f"model {model!r} is not a module here; the models are the module ids: {known}")


@router.get("/models", response_model=ModelList)
def list_models(runtime: RuntimeDep) -> ModelList:
    """The modules this server answers about, one model each (`mentor` too, for a one-module corpus)."""
    created = int(time.time())
    return ModelList(data=[ModelCard(id=model, created=created) for model in model_ids(runtime)])


@router.get("/models/{model}", response_model=ModelCard, responses={404: ERRORS[404]})
def get_model(model: str, runtime: RuntimeDep) -> ModelCard:
    """One model: a module id, or `mentor` for a one-module corpus."""
    if model not in model_ids(runtime):
        resolve_model(runtime, model)  # raises, with the models to pick from
    return ModelCard(id=model, created=int(time.time()))


def text_of(message: ChatMessage, index: int) -> str:
    """A message's text: its string, or its text parts joined; other parts (images, audio...) are refused."""
    if message.content is None or isinstance(message.content, str):
        return message.content or ""
    pieces = []
    for part in message.content:
        if part.type == "text" and part.text is not None:
            pieces.append(part.text)
        elif part.type == "refusal" and part.refusal is not None:
            pieces.append(part.refusal)
        else:
            raise FacadeInvalid(
                f"messages.{index}.content: only text parts can be read (got a {part.type!r} part)", param="messages"
            )
    return "\n".join(pieces)


def read_messages(messages: list[ChatMessage]) -> tuple[str, tuple[Turn, ...]]:
    """The question (the last message, the learner's) and the turns before it.

    A turn is a user message and the assistant messages after it (joined); a user message with no answer is a turn
    with an empty answer; an assistant message before any user message (a greeting) answers nothing and is
    dropped. System, developer and tool messages are not read: mentor's own instructions and calculators apply.
    """
    last = len(messages) - 1
    if messages[last].role != "user":
        raise FacadeInvalid(
            f"messages: the last message must be the learner's question (role 'user'), not {messages[last].role!r}",
            param="messages",
        )
    question = text_of(messages[last], last)
    if not question.strip():
        raise FacadeInvalid("messages: the last message, the learner's question, has no text", param="messages")
    if len(question) > MAX_MESSAGE_CHARS:
        raise FacadeInvalid(
            f"messages: the question (the last message) is at most {MAX_MESSAGE_CHARS} characters "
            f"(got {len(question)})",
            param="messages",
        )
    turns: list[tuple[str, list[str]]] = []
    for index, message in enumerate(messages[:last]):
        if message.role == "user":
            turns.append((text_of(message, index), []))
        elif message.role == "assistant" and turns:
            # Without the sources list the facade appended to its answer: the answer is what a follow-up reads.
            turns[-1][1].append(without_sources(text_of(message, index)))
    return question, tuple(Turn(q, "\n\n".join(a for a in answers if a)) for q, answers in turns)


def to_input(body: ChatCompletionRequest, request: Request, learner: Learner, module: Module) -> ChatInput:
    """The chat's question: the last message, the earlier ones as the client-held conversation."""
    if body.n not in (None, 1):
        raise FacadeInvalid("n: mentor gives one answer per question; send n=1 or leave it out", param="n")
    question, history = read_messages(body.messages)
    return ChatInput(
        message=question,
        module_id=module.id,
        learner_id=learner.resolve(body.user),
        client=client_address(request),
        authenticated=learner.authenticated,
        channel="openai",
        lti_context=learner.token_context,
        history=history,
    )


@router.post(
    "/chat/completions",
    response_model=ChatCompletion,
    responses={200: {"content": {"text/event-stream": {"schema": SSE_CHUNK}}}, **ERRORS},
    openapi_extra=ANONYMOUS_ALLOWED,
)
async def chat_completions(
    body: ChatCompletionRequest, request: Request, runtime: RuntimeDep, learner: LearnerDep
) -> Response:
    """Answer the last message from the module, as OpenAI's chat completions do (streamed with `stream`)."""
    question = to_input(body, request, learner, resolve_model(runtime, body.model))
    if not body.stream:
        answered = await runtime.chat.ask(question)
        completion = ChatCompletion.of(answered, created=int(time.time()), sources=body.mentor_sources == "text")
        return JSONResponse(completion.model_dump(mode="json"))
    prepared = await runtime.chat.prepare(question)  # 4xx before the stream starts
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    sources = body.mentor_sources == "text"
    return EventSourceResponse(chunks(runtime, prepared, include_usage=include_usage, sources=sources), sep="\n")


async def chunks(
    runtime: Runtime, prepared: Prepared, *, include_usage: bool, sources: bool = True
) -> AsyncIterator[dict[str, str]]:
    """The answer as chat.completion.chunk events: role, content pieces, the sources in words (with `sources`),
    the finish with `mentor`, [DONE].

    mentor's calculator calls are not OpenAI tool calls (the client has nothing to run): they arrive with the
    rest of mentor's results in the final chunk's `mentor` field. When the LLM's streamed answer is replaced
    (ungrounded, then retried or answered by the extractive engine), `mentor.answer` holds the answer given.
    """
    head = {
        "id": completion_id(prepared.question_id),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": prepared.module.id,
    }

    def chunk(delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> dict[str, str]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return {"data": json.dumps({**head, "choices": [choice], **extra}, ensure_ascii=False)}

    try:
        yield chunk({"role": "assistant", "content": ""})
        answered: AnsweredQuestion | None = None
        # Closed at once when the client leaves: the work stops and the question is logged as abandoned.
        async with aclosing(runtime.chat.events(prepared)) as events:
            async for kind, payload in events:
                if kind == "delta":
                    yield chunk({"content": payload})
                elif kind == "done":
                    answered = payload
        assert answered is not None, "events() ends with a done event"
        listed = sources_in_words(answered.answer.citations) if sources else ""
        if listed:  # the last piece of content: what a client showing only the text can tell the sources by
            yield chunk({"content": listed})
        yield chunk({}, "stop", mentor=MentorExtension.of(answered).model_dump(mode="json"))
        if include_usage:
            usage = Usage.of(answered).model_dump()
            yield {"data": json.dumps({**head, "choices": [], "usage": usage})}
        yield {"data": "[DONE]"}
    except MentorError as exc:  # the status is sent already: OpenAI's SDK raises on an event carrying an error
        yield {"data": json.dumps(error_body(exc.status_code, exc.message, code=exc.code))}
    except Exception:
        log.exception("chat completion stream failed")
        message = "something went wrong on our side; please ask again"
        yield {"data": json.dumps(error_body(500, message, code="internal_error"))}
