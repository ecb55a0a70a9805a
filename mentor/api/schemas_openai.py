"""HTTP shapes of the OpenAI-compatible facade (/v1/models, /v1/chat/completions), named as OpenAI names them.

Requests accept what OpenAI's SDK and the tools built on it send; parameters mentor has no use for (sampling,
token limits, tools, response formats...) are accepted and ignored, as listed on each field. mentor's own
results travel in one extension field, `mentor`: the /v1/chat response (`ChatResponse`) plus the module id.
Most clients show only the message's `content`, so by default it ends with the answer's sources in plain words
(`mentor_sources`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from mentor.api.schemas import ChatResponse
from mentor.citations import sources_in_words
from mentor.record import AnsweredQuestion

# Requested as `model`, it stands for the only module of a one-module corpus.
DEFAULT_MODEL = "mentor"
IGNORED = "Accepted and ignored: mentor answers from the module, not by sampling a model."


class ContentPart(BaseModel):
    """One part of a message's content; only text parts (and an assistant's refusal) are read."""

    model_config = {"extra": "allow"}  # image_url, input_audio, file...: refused by the route with a plain message

    type: str = Field(max_length=40)
    text: str | None = None
    refusal: str | None = None


class ChatMessage(BaseModel):
    """A message of the conversation; system, developer and tool messages are accepted and not read."""

    model_config = {"extra": "allow"}  # name, tool_calls, tool_call_id, audio...: accepted, not read

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None


class StreamOptions(BaseModel):
    include_usage: bool = Field(
        False, description="Send one more chunk before [DONE] with `usage` and no choices, as OpenAI does."
    )


class ChatCompletionRequest(BaseModel):
    """OpenAI's chat-completions body. The last message is the learner's question; earlier user and assistant
    messages are the conversation so far, held by the client (there is no conversation id). An LLM behind mentor
    reads them as quoted history: an `assistant` message is never passed on as the model's own words."""

    model_config = {"extra": "ignore"}  # OpenAI keeps adding parameters; an unknown one is no reason to refuse

    model: str = Field(
        min_length=1,
        max_length=200,
        description=f"A module id from GET /v1/models, or {DEFAULT_MODEL!r} for the "
        "only module of a one-module corpus.",
    )
    # No count limit: the 64 KB body limit bounds it, and only the latest 20 turns within 16 KB are read.
    messages: list[ChatMessage] = Field(
        min_length=1, description="The conversation; it must end with the learner's question."
    )
    stream: bool | None = Field(False, description="Answer as chat.completion.chunk server-sent events.")
    stream_options: StreamOptions | None = None
    user: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="The learner id, trusted as /v1/chat trusts learner_id (pseudonymised before anything is stored).",
    )
    n: int | None = Field(None, description="How many answers: mentor gives one, so only 1 is accepted.")
    temperature: float | None = Field(None, description=IGNORED)
    top_p: float | None = Field(None, description=IGNORED)
    max_tokens: int | None = Field(None, description=IGNORED)
    max_completion_tokens: int | None = Field(None, description=IGNORED)
    presence_penalty: float | None = Field(None, description=IGNORED)
    frequency_penalty: float | None = Field(None, description=IGNORED)
    seed: int | None = Field(None, description=IGNORED)
    stop: str | list[str] | None = Field(None, description=IGNORED)
    tools: list[dict[str, Any]] | None = Field(
        None, description="Accepted and ignored: mentor runs its own calculators and reports them in `mentor`."
    )
    tool_choice: str | dict[str, Any] | None = Field(None, description="Accepted and ignored.")
    response_format: dict[str, Any] | None = Field(None, description="Accepted and ignored: answers are Markdown.")
    # Not an OpenAI parameter. Text is the default because the clients people use (the openai SDK's
    # `message.content`, simonw's llm, Open WebUI, promptfoo's openai provider) show only `content` and cannot
    # send a field of their own; a client that reads `mentor` sends "none" (the SDK: extra_body).
    mentor_sources: Literal["text", "none"] = Field(
        "text",
        description="How the answer's sources reach a client. 'text' (default): `content` ends with a 'Sources:' "
        "list giving the section title of each [n] marker, for clients that show only `content`. 'none': "
        "`content` is the answer alone, for a client that shows `mentor.citations` itself.",
    )


class MentorExtension(ChatResponse):
    """mentor's results for the answer: the /v1/chat response (citations with quotes, calculator calls with
    results, grounding verdict, coverage, ids) plus the module id. `answer` is the message content without its
    sources list, so this object alone is what /v1/chat answers; `conversation_id` names the client-held thread in
    the signals log (derived, not to be sent back)."""

    module_id: str

    @classmethod
    def of(cls, answered: AnsweredQuestion) -> MentorExtension:
        return cls.model_validate({**ChatResponse.of(answered).model_dump(), "module_id": answered.module_id})


class Usage(BaseModel):
    """The tokens the LLM reported for the answer given (every tool round); 0 where none were reported: the
    extractive engine, redirects and fallbacks run no model, and mentor counts no tokens of its own (a word count
    would be a different unit under the same name). Tokens of an LLM attempt that was replaced are not counted."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int

    @classmethod
    def of(cls, answered: AnsweredQuestion) -> Usage:
        prompt = answered.answer.prompt_tokens or 0
        completion = answered.answer.completion_tokens or 0
        return cls(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion)


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str = Field(
        description="The answer: Markdown with [n] citation markers (see mentor.citations), ending with a "
        "'Sources:' list of the cited sections unless the request sent mentor_sources 'none'."
    )
    refusal: None = None


class Choice(BaseModel):
    index: int = 0
    message: AssistantMessage
    finish_reason: Literal["stop"] = "stop"
    logprobs: None = None


class ChatCompletion(BaseModel):
    """The answer in OpenAI's shape, with mentor's results in `mentor`."""

    id: str = Field(description="chatcmpl-<question_id>: the question's id, as feedback and the signals log know it.")
    object: Literal["chat.completion"] = "chat.completion"
    created: int = Field(description="Unix seconds when the answer was given.")
    model: str = Field(description="The module that answered.")
    choices: list[Choice]
    usage: Usage
    mentor: MentorExtension

    @classmethod
    def of(cls, answered: AnsweredQuestion, *, created: int, sources: bool = True) -> ChatCompletion:
        """The completion of an answered question; `sources`: its content ends with them in plain words."""
        listed = sources_in_words(answered.answer.citations) if sources else ""
        return cls(
            id=completion_id(answered.question_id),
            created=created,
            model=answered.module_id,
            choices=[Choice(message=AssistantMessage(content=answered.answer.text + listed))],
            usage=Usage.of(answered),
            mentor=MentorExtension.of(answered),
        )


def completion_id(question_id: str) -> str:
    """The completion's id: the question's, so feedback (/v1/questions/{question_id}/feedback) can name it."""
    return f"chatcmpl-{question_id}"


class ModelCard(BaseModel):
    id: str = Field(description=f"A module id, or {DEFAULT_MODEL!r} (the only module of a one-module corpus).")
    object: Literal["model"] = "model"
    created: int = Field(description="Unix seconds of this listing: modules carry no creation date.")
    owned_by: Literal["mentor"] = "mentor"


class ModelList(BaseModel):
    """The modules this server answers about, one model each."""

    object: Literal["list"] = "list"
    data: list[ModelCard]


class OpenAIError(BaseModel):
    message: str = Field(description="What is wrong, in a plain sentence (the message mentor's own routes give).")
    type: str = Field(
        description="invalid_request_error, authentication_error, rate_limit_error or server_error, by status."
    )
    param: str | None = Field(None, description="The request field at fault, when one is.")
    code: str | None = Field(None, description="mentor's error code (model_not_found for an unknown model).")


class OpenAIErrorResponse(BaseModel):
    """Every 4xx/5xx body of the facade, in OpenAI's shape."""

    error: OpenAIError


# One server-sent event of a streamed completion, as schemathesis and the docs read it.
SSE_CHUNK = {
    "type": "string",
    "description": "Lines `data: <chat.completion.chunk JSON>`: the first has delta.role, then delta.content "
    "pieces (the last of them the 'Sources:' list, unless mentor_sources is 'none'), then one with finish_reason "
    "'stop', an empty delta and the `mentor` extension (plus, with stream_options.include_usage, a chunk with "
    '`usage` and no choices), then `data: [DONE]`. A failure after the stream began is one `data: {"error": '
    "{...}}` event.",
}
