"""The OpenAI-SDK chat model behind a Protocol: streamed text, tool calls, token usage."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from mentor.errors import UpstreamError

DEFAULT_MODEL = "gpt-4o-mini"


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the assistant's text as it streams."""

    text: str


@dataclass(frozen=True, slots=True)
class RawToolCall:
    """A tool call as the model sent it; `arguments` is unparsed JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Completion:
    """The end of one model turn."""

    content: str
    tool_calls: list[RawToolCall] = field(default_factory=list)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class ChatModel(Protocol):
    """Anything that streams one assistant turn for a list of messages and tools."""

    name: str

    def stream(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]
    ) -> AsyncIterator[TextDelta | Completion]: ...

    async def complete(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> Completion: ...


class OpenAIChatModel:
    """An OpenAI-compatible server through the official async SDK; one client per process."""

    def __init__(self, *, base_url: str | None, api_key: str | None, model: str | None, timeout_s: float) -> None:
        # Imported here, not at the top: the SDK's types take ~0.7 s to import, which the offline default (and
        # every CLI command that builds a runtime) need not pay.
        import httpx  # its Response, as `cast_to`: the raw reply, not a parsed model
        import openai

        self._errors = (openai.APIError, ValueError)
        # max_retries=0: a slow or failing model must fall back within the time-out, not retry past it.
        self._client = openai.AsyncOpenAI(
            base_url=base_url, api_key=api_key or "not-needed", timeout=timeout_s, max_retries=0
        )
        self._raw_response = httpx.Response
        self.name = model or DEFAULT_MODEL
        # The SDK imports its chat resources on first use (~60 ms): here, at start, not in the first answer.
        _ = self._client.chat.completions
        # The tool schemas as JSON, for the list last sent (the engine sends the one list it built at start).
        self._tools_sent: Sequence[dict[str, Any]] | None = None
        self._tools_json = b"[]"

    async def complete(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> Completion:
        """One assistant turn without streaming: a single response to parse instead of one object per chunk,
        which is most of the SDK's cost when nobody is watching the text arrive.

        The request still goes through the SDK's client (base URL, auth, time-out, its status and connection
        errors), but as JSON bytes made here, and the reply is read as plain JSON. The typed
        `chat.completions.create` walked every message to transform it, encoded the ~20 KB of tool schemas
        again, and built pydantic models of the reply: 4.4 ms of CPU a call against 2.6 ms this way, on the
        bench's prompt (~1.5 ms of each new question's latency, and ~8% of the server's CPU at concurrency 32).
        """
        try:
            response = await self._client.post(
                "/chat/completions", content=self._request_body(messages, tools), cast_to=self._raw_response
            )
        except self._errors as exc:
            raise upstream_error(exc) from exc
        try:
            reply = json.loads(response.content)
        except ValueError as exc:  # a proxy's HTML page, a cut-off body
            raise UpstreamError("malformed_reply", "the language model's reply is not JSON") from exc
        return completion_of(reply)

    def _request_body(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> bytes:
        """The JSON the SDK would send for model, messages, temperature 0 and the tools (when there are any)."""
        head = _json({"model": self.name, "messages": list(messages), "temperature": 0})
        if not tools:
            return head
        if tools is not self._tools_sent:
            self._tools_sent, self._tools_json = tools, _json(list(tools))
        return head[:-1] + b',"tools":' + self._tools_json + b"}"

    async def stream(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]
    ) -> AsyncIterator[TextDelta | Completion]:
        """Yield text deltas as they arrive, then one `Completion` with the whole turn."""
        content: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        usage = None
        try:
            stream = await self._client.chat.completions.create(
                model=self.name,
                messages=list(messages),
                temperature=0,
                extra_body=_tools_body(tools),
                stream=True,
                stream_options={"include_usage": True},
            )
            async with stream:  # closes the HTTP response however this ends (a learner who left included)
                async for chunk in stream:
                    if chunk.usage is not None:
                        usage = chunk.usage
                    for choice in chunk.choices:
                        delta = choice.delta
                        if delta.content:
                            content.append(delta.content)
                            yield TextDelta(delta.content)
                        for piece in delta.tool_calls or ():
                            call = calls.setdefault(piece.index, {"id": "", "name": "", "arguments": ""})
                            call["id"] = piece.id or call["id"]
                            if piece.function is not None:
                                call["name"] += piece.function.name or ""
                                call["arguments"] += piece.function.arguments or ""
        except self._errors as exc:
            raise upstream_error(exc) from exc
        yield Completion(
            content="".join(content),
            tool_calls=[
                RawToolCall(c["id"] or f"call_{i}", c["name"], c["arguments"]) for i, c in sorted(calls.items())
            ],
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
        )


def upstream_error(exc: Exception) -> UpstreamError:
    """The SDK's failure as mentor's one upstream error, with a short reason for `fallback_reason`."""
    import openai  # imported already by the client that failed

    if isinstance(exc, openai.APITimeoutError):
        return UpstreamError("timeout", "the language model did not answer in time")
    if isinstance(exc, openai.APIStatusError):
        return UpstreamError(f"http_{exc.status_code}", f"the language model failed ({exc.status_code})")
    return UpstreamError("connection", f"the language model cannot be used ({type(exc).__name__})")


def completion_of(reply: Any) -> Completion:
    """A chat-completion reply (parsed JSON) as a `Completion`; UpstreamError when it has no message."""
    choices = reply.get("choices") if isinstance(reply, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict):
        raise UpstreamError("malformed_reply", "the language model sent no choices")
    calls = [
        RawToolCall(call.get("id") or f"call_{i}", function.get("name") or "", function.get("arguments") or "")
        for i, call in enumerate(message.get("tool_calls") or ())
        if isinstance(call, dict) and isinstance(function := call.get("function"), dict)
    ]
    usage = reply.get("usage") if isinstance(reply.get("usage"), dict) else {}
    return Completion(
        content=message.get("content") or "",
        tool_calls=calls,
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
    )


def _json(value: Any) -> bytes:
    # As the SDK encodes a request body (openai._utils._json.openapi_dumps).
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _tools_body(tools: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    # The schemas are built once and already valid; passed as `tools=` the SDK would walk and copy all twelve
    # on every call (a tenth of mentor's CPU per question in the profile), so they go in as-is.
    return {"tools": list(tools)} if tools else None
