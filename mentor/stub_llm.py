"""A scripted OpenAI-compatible chat-completions server on localhost, for tests and benchmarks.

Tests point the real `openai` SDK at it so the whole client path (HTTP, SSE parsing, tool-call deltas, error
mapping, time-outs) runs; benchmarks use it as an instant LLM, optionally with a fixed per-token delay.

with StubLLM([Reply(tool_calls=[{"name": "zero_memory", "arguments": {"params": "7B"}}]), Reply("Done [1]")]) as llm:
    OpenAI(base_url=llm.url, api_key="x").chat.completions.create(model="stub", messages=[...])
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import re
import socket
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from mentor.text import ROUGH, split_sentences

log = logging.getLogger(__name__)

MODEL_ID = "stub"
DEFAULT_CONTENT = "OK [1]"
# Real servers split arguments at arbitrary points; small fixed-size pieces make clients reassemble them.
ARGUMENT_PIECE_CHARS = 8
# How often a delayed reply checks whether its client already gave up, so time-out tests end promptly.
DISCONNECT_POLL_S = 0.05
START_TIMEOUT_S = 10.0
MAX_RECORDED = 1000
# Passage [1]'s first paragraph, after a "(section: ...)" header line when there is one.
PASSAGE_ONE = re.compile(r"\[1\][^\S\n]*(?:\(section:[^\n]*\)[^\S\n]*\n)?([^\n]+(?:\n[^\n]+)*)")
QUOTE_WORDS = 20
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


@dataclass
class Reply:
    """One scripted assistant turn (or, with status >= 400, one scripted failure)."""

    content: str | None = None
    # [{"name": "zero_memory", "arguments": {...} or a raw string}]; a raw string may be malformed JSON on purpose.
    tool_calls: list[dict] = field(default_factory=list)
    status: int = 200
    delay_s: float = 0.0
    token_delay_s: float = 0.0
    body: bytes | None = None  # sent as the whole response, as is, with `status` (a broken upstream or proxy)


Script = Iterable[Reply] | Callable[[dict], Reply] | None


class StubLLM:
    """Scripted OpenAI-compatible server."""

    def __init__(self, script: Script = None, *, default: Reply | None = None, token_delay_s: float = 0.0) -> None:
        self.default = default or Reply(content=DEFAULT_CONTENT)
        self.token_delay_s = token_delay_s
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._queue: deque[Reply] = deque()
        self._builder: Callable[[dict], Reply] | None = None
        self._ids = itertools.count(1)
        self._url: str | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.set_script(script)
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat_completions, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )

    @property
    def url(self) -> str:
        """The base URL including /v1, for `OpenAI(base_url=...)`."""
        if self._url is None:
            raise RuntimeError("StubLLM is not running; call start() first")
        return self._url

    def set_script(self, script: Script) -> None:
        """Replace the queued replies, or install a callable that builds each Reply from the request body."""
        with self._lock:
            self._queue.clear()
            self._builder = None
            if callable(script):
                self._builder = script
            elif script is not None:
                self._queue.extend(script)

    def start(self) -> StubLLM:
        """Serve on a free localhost port in a daemon thread; return once it accepts connections."""
        if self._server is not None:
            raise RuntimeError("StubLLM is already running")
        # Binding the socket here (not probing a port and closing it) means no other process can take the port.
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app, host="127.0.0.1", port=port, log_level="warning", lifespan="off", timeout_graceful_shutdown=1
        )
        self._server = uvicorn.Server(config)
        # uvicorn installs signal handlers only on the main thread, so running it in a thread is safe.
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name=f"stub-llm-{port}", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                sock.close()
                raise RuntimeError("StubLLM server failed to start")
            time.sleep(0.01)
        self._url = f"http://127.0.0.1:{port}/v1"
        return self

    def stop(self) -> None:
        """Shut the server down and wait for its thread."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = self._url = None

    def __enter__(self) -> StubLLM:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _next_reply(self, body: dict) -> Reply:
        with self._lock:
            if len(self.requests) < MAX_RECORDED:  # a benchmark sends many; tests read the first few
                self.requests.append(body)
            if self._builder is not None:
                builder = self._builder
            else:
                return self._queue.popleft() if self._queue else self.default
        # Called outside the lock so a slow or failing builder cannot block other requests.
        return builder(body)

    async def _models(self, request: Request) -> Response:
        return JSONResponse(
            {"object": "list", "data": [{"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "mentor"}]}
        )

    async def _chat_completions(self, request: Request) -> Response:
        try:
            body = await request.json()
        except ValueError:
            return error_response(400, "Request body is not valid JSON")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return error_response(400, "'messages' is required and must be a list")
        try:
            reply = self._next_reply(body)
        except Exception as exc:  # a broken test script should fail the request loudly, not hang the client
            log.exception("StubLLM script raised")
            return error_response(500, f"stub script raised {exc!r}")
        if reply.delay_s > 0 and await _sleep_unless_disconnected(request, reply.delay_s):
            return Response(status_code=499)
        if reply.body is not None:
            return Response(reply.body, status_code=reply.status, media_type="application/json")
        if reply.status >= 400:
            return error_response(reply.status, reply.content or f"Scripted error with status {reply.status}")

        completion_id = f"chatcmpl-stub-{next(self._ids)}"
        model = str(body.get("model") or MODEL_ID)
        token_delay_s = reply.token_delay_s or self.token_delay_s
        tool_calls = [_tool_call(call, completion_id, i) for i, call in enumerate(reply.tool_calls)]
        usage = count_usage(body, reply.content, tool_calls)
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            chunks = _stream_chunks(completion_id, model, reply.content, tool_calls, usage if include_usage else None)
            return StreamingResponse(
                _sse(chunks, token_delay_s), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
            )
        if token_delay_s > 0:
            await asyncio.sleep(token_delay_s * max(len(content_pieces(reply.content)) - 1, 0))
        message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None}
        if tool_calls:
            message["tool_calls"] = tool_calls
        return JSONResponse(
            {
                "id": completion_id,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {"index": 0, "message": message, "logprobs": None, "finish_reason": _finish_reason(tool_calls)}
                ],
                "usage": usage,
            }
        )


def error_response(status: int, message: str) -> JSONResponse:
    """An OpenAI-style error body with the given HTTP status."""
    error_type = ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return JSONResponse(
        {"error": {"message": message, "type": error_type, "param": None, "code": str(status)}}, status_code=status
    )


def content_pieces(content: str | None) -> list[str]:
    """Split text into word-sized pieces (leading whitespace attached) that join back to the exact text."""
    return re.findall(r"\s*\S+|\s+", content or "")


def count_usage(body: dict, content: str | None, tool_calls: list[dict]) -> dict[str, int]:
    """Rough token counts: one token per whitespace-separated word."""
    prompt = sum(_words(message.get("content")) for message in body["messages"] if isinstance(message, dict))
    completion = _words(content) + sum(
        1 + _words(call["function"]["arguments"].replace(",", " ")) for call in tool_calls
    )
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def bench_reply(request: dict, *, tool_call: bool = False) -> Reply:
    """Answer a benchmark request instantly: optionally call `chinchilla_optimal` first, then cite passage [1]."""
    messages = [m for m in request.get("messages", []) if isinstance(m, dict)]
    has_tool_result = any(m.get("role") == "tool" for m in messages)
    if tool_call and request.get("tools") and not has_tool_result:
        return Reply(tool_calls=[{"name": "chinchilla_optimal", "arguments": {"params": "7B"}}])
    return Reply(content=_quote_passage_one(messages))


def serve_stub(host: str, port: int, *, token_delay_s: float = 0.0, tool_call: bool = False) -> None:
    """Run a stub in the foreground until interrupted, answering every request at once via `bench_reply`.

    With tool_call=True the first turn of each conversation (no tool message yet in the request) calls
    `chinchilla_optimal` with {"params": "7B"} and the next answers with text quoting passage [1].
    """
    stub = StubLLM(partial(bench_reply, tool_call=tool_call), token_delay_s=token_delay_s)
    uvicorn.run(stub.app, host=host, port=port, log_level="warning", lifespan="off")


def _quote_passage_one(messages: list[dict]) -> str:
    """A verbatim sentence of passage [1], so a grounding check finds every word of the answer in it.

    The passage text follows its "[1]" marker on the same line, or on the next one after a
    "(section: ...)" header line, as in mentor's prompt.
    """
    for message in reversed(messages):
        match = PASSAGE_ONE.search(_text(message.get("content")))
        if match and match.group(1).strip():
            sentences = split_sentences(" ".join(match.group(1).split()), ROUGH)
            # A heading-like fragment ("The two walls.") is too short to count as support.
            sentence = next((s for s in sentences if len(s.split()) >= 6), sentences[0])
            return " ".join(sentence.split()[:QUOTE_WORDS]) + " [1]"
    return DEFAULT_CONTENT


def _tool_call(call: dict, completion_id: str, index: int) -> dict:
    arguments = call.get("arguments", {})
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    call_id = call.get("id") or f"call_{completion_id.rsplit('-', 1)[-1]}_{index}"
    return {"id": call_id, "type": "function", "function": {"name": call["name"], "arguments": arguments}}


def _finish_reason(tool_calls: list[dict]) -> str:
    return "tool_calls" if tool_calls else "stop"


def _stream_chunks(
    completion_id: str, model: str, content: str | None, tool_calls: list[dict], usage: dict | None
) -> list[tuple[dict, bool]]:
    """Build the chunk sequence, each paired with whether it carries a content piece (for the token delay)."""
    created = int(time.time())

    def chunk(delta: dict, finish_reason: str | None = None) -> dict:
        body = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }
        if usage is not None:
            body["usage"] = None  # as OpenAI does: null on every chunk but the last when usage is requested
        return body

    # The first chunk carries the role; OpenAI sends content "" there for text and null for tool calls.
    chunks = [(chunk({"role": "assistant", "content": None if tool_calls and not content else ""}), False)]
    chunks += [(chunk({"content": piece}), True) for piece in content_pieces(content)]
    for index, call in enumerate(tool_calls):
        head = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""},
        }
        chunks.append((chunk({"tool_calls": [head]}), False))
        arguments = call["function"]["arguments"]
        for start in range(0, len(arguments), ARGUMENT_PIECE_CHARS):
            piece = arguments[start : start + ARGUMENT_PIECE_CHARS]
            chunks.append((chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}), False))
    chunks.append((chunk({}, _finish_reason(tool_calls)), False))
    if usage is not None:
        final = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": usage,
        }
        chunks.append((final, False))
    return chunks


async def _sse(chunks: list[tuple[dict, bool]], token_delay_s: float) -> AsyncIterator[str]:
    first_piece = True
    for body, is_piece in chunks:
        if is_piece and token_delay_s > 0 and not first_piece:
            await asyncio.sleep(token_delay_s)
        first_piece = first_piece and not is_piece
        yield f"data: {json.dumps(body)}\n\n"
    yield "data: [DONE]\n\n"


async def _sleep_unless_disconnected(request: Request, seconds: float) -> bool:
    """Sleep, returning True early if the client hung up (so a timed-out request does not hold up shutdown)."""
    deadline = asyncio.get_running_loop().time() + seconds
    while (remaining := deadline - asyncio.get_running_loop().time()) > 0:
        if await request.is_disconnected():
            return True
        await asyncio.sleep(min(DISCONNECT_POLL_S, remaining))
    return False


def _text(content: Any) -> str:
    # Message content is a string or a list of parts like {"type": "text", "text": ...}.
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _words(content: Any) -> int:
    return len(_text(content).split())
