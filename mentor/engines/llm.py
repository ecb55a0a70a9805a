"""The LLM engine: numbered passages and the calculators as tools, through any OpenAI-compatible server.

Tool calls are validated and run; a calculator's refusal goes back to the model as the tool message so it
can correct itself. An unknown tool, arguments that are not JSON, or a model that will not stop calling
tools raise `UpstreamError`, and the chat falls back to the extractive engine.

Everything from the learner is data, in one user message: the passages, the conversation so far (`<history>`), the
question. Earlier turns are quoted there, never sent as the model's own `assistant` messages: an answer a client
holds (the OpenAI facade's `assistant` messages) may have been written by anyone, so mentor quotes every earlier
answer rather than vouching for some. Each earlier question is the one the reader read, its orders left out, as
the current one; the answers lose their tags (`safety.quoted`), so none can close the fence or open another.
Personal details were replaced before any of it got here (`mentor.consult`).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from mentor.answer import Answer, Question, ToolCall
from mentor.chat_model import ChatModel, Completion, TextDelta
from mentor.citations import with_citations
from mentor.engines.tool_calls import run_tool_call
from mentor.errors import UpstreamError
from mentor.prompts import Prompt
from mentor.safety import quoted, sanitize_markdown, without_planted
from mentor.tools import REGISTRY, tool_schemas
from mentor.understanding.reading import STATES, SUFFICES

if TYPE_CHECKING:
    from mentor.metrics import Metrics

ENGINE = "llm"
OUT_OF_SCOPE = "OUT_OF_SCOPE"


class LLMEngine:
    """Asks the model, runs its tool calls, and returns the same `Answer` the extractive engine does."""

    name = ENGINE

    def __init__(
        self,
        model: ChatModel,
        prompt: Prompt,
        *,
        max_tool_rounds: int,
        history_chars: int,
        metrics: Metrics | None = None,
    ) -> None:
        self._model = model
        self._metrics = metrics
        self._prompt = prompt
        self._max_tool_rounds = max_tool_rounds
        self._history_chars = history_chars
        self._tools = tool_schemas()

    @property
    def model_name(self) -> str:
        """The model answers are attributed to."""
        return self._model.name

    @property
    def prompt_version(self) -> str:
        """The version of the system prompt in use."""
        return self._prompt.version

    def messages(self, question: Question, *, feedback: tuple[str, str] | None = None) -> list[dict[str, Any]]:
        """System prompt, then one user message of data: the numbered passages, the bounded history, the question."""
        system = self._prompt.system(
            module_id=question.module_id, module_title=question.module_title, style=question.style
        )
        passages = "\n\n".join(
            f"[{p.rank}] (section: {p.section_title})\n{without_planted(p.text, question.planted)}"
            for p in question.passages
        )
        user = f"<passages>\n{passages}\n</passages>"
        history = self.history(question)
        if history:
            user = f"{user}\n\n<history>\n{history}\n</history>"
        user = f"{user}\n\n<question>\n{question.text}\n</question>"
        plan = plan_of(question)
        if plan:
            user = f"{user}\n\n<plan>\n{plan}\n</plan>"
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        if feedback is not None:
            previous, problems = feedback
            messages += [
                {"role": "assistant", "content": previous},
                {
                    "role": "user",
                    "content": "Your answer failed the grounding check: " + problems + " Rewrite it "
                    "using only the passages and tool results, citing [n] after every sentence, and call a tool for "
                    "every number you need.",
                },
            ]
        return messages

    def history(self, question: Question) -> str:
        """The latest earlier turns that fit the budget, quoted: each question as read, and the answer to it."""
        turns: list[str] = []
        budget = self._history_chars
        for turn in reversed(question.history):
            asked, answer = quoted(turn.asked), quoted(turn.answer)
            size = len(asked) + len(answer)
            if size > budget:
                break
            budget -= size
            turns.insert(0, f"<turn>\n<learner>{asked}</learner>\n<mentor>{answer}</mentor>\n</turn>")
        return "\n".join(turns)

    async def run(
        self, question: Question, *, feedback: tuple[str, str] | None = None, stream: bool = True
    ) -> AsyncIterator[TextDelta | ToolCall | Answer]:
        """Yield text deltas (when streaming) and tool calls as they happen, then the `Answer`."""
        try:
            async with aclosing(self._run(question, feedback=feedback, stream=stream)) as events:
                async for event in events:
                    yield event
        except UpstreamError as exc:
            if self._metrics is not None:
                self._metrics.llm_error(self._model.name, exc.reason)
            raise

    async def _run(
        self, question: Question, *, feedback: tuple[str, str] | None, stream: bool
    ) -> AsyncIterator[TextDelta | ToolCall | Answer]:
        messages = self.messages(question, feedback=feedback)
        # A calculator that does not model what the question names is not offered (its figure would be false).
        # Otherwise the list itself, not a copy: the chat model encodes the schemas once per list (0.37 ms).
        tools = self._tools
        if question.unmodelled:
            tools = [t for t in self._tools if t["function"]["name"] not in question.unmodelled]
        tool_calls: list[ToolCall] = []
        prompt_tokens = completion_tokens = 0
        for _round in range(self._max_tool_rounds + 1):
            completion: Completion | None = None
            started = time.perf_counter()
            if stream:
                # Closed at once when the learner leaves mid-answer, so the model's HTTP stream ends too.
                async with aclosing(self._model.stream(messages, tools)) as turn:
                    async for event in turn:
                        if isinstance(event, TextDelta):
                            yield event
                        else:
                            completion = event
            else:
                completion = await self._model.complete(messages, tools)
            assert completion is not None
            if self._metrics is not None:
                self._metrics.llm_turn(
                    self._model.name, "stream" if stream else "complete", time.perf_counter() - started
                )
            prompt_tokens += completion.prompt_tokens or 0
            completion_tokens += completion.completion_tokens or 0
            if not completion.tool_calls:
                break
            messages.append(
                {
                    "role": "assistant",
                    "content": completion.content or None,
                    "tool_calls": [
                        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                        for c in completion.tool_calls
                    ],
                }
            )
            for raw in completion.tool_calls:
                call, content = execute(raw.name, raw.arguments)
                tool_calls.append(call)
                yield call
                messages.append({"role": "tool", "tool_call_id": raw.id, "content": content})
        else:
            raise UpstreamError("tool_loop", f"the model kept calling tools after {self._max_tool_rounds} rounds")
        text = sanitize_markdown(completion.content.strip(), allowed_urls=question.allowed_urls)
        out_of_scope = text.strip().strip(".").upper() == OUT_OF_SCOPE
        # Like the extractive engine's, the answer carries its citations: the [n] markers read against the passages.
        yield with_citations(
            Answer(
                text=text,
                citations=[],
                tool_calls=tool_calls,
                out_of_scope=out_of_scope,
                engine=ENGINE,
                model=self._model.name,
                prompt_version=self._prompt.version,
                passages=list(question.passages),
                prompt_tokens=prompt_tokens or None,
                completion_tokens=completion_tokens or None,
            )
        )


def execute(name: str, arguments: str) -> tuple[ToolCall, str]:
    """Run one tool call from the model; return the record and the tool message content."""
    if name not in REGISTRY:
        raise UpstreamError("unknown_tool", f"the model called an unknown tool {name!r}")
    try:
        parsed = json.loads(arguments or "{}")
    except json.JSONDecodeError as exc:
        raise UpstreamError("malformed_tool_call", f"the model sent arguments that are not JSON for {name}") from exc
    if not isinstance(parsed, dict):
        raise UpstreamError("malformed_tool_call", f"the model sent arguments that are not an object for {name}")
    call = run_tool_call(name, parsed)
    # The model reads a refusal as {"error": ...} so it can correct its arguments, else the calculator's result.
    return call, json.dumps({"error": call.error} if call.error is not None else call.public())


# What a figure the learner writes is to the question (`Reading.figure`), as the plan tells the model to check it.
FIGURE_PLANS = {
    STATES: "the learner states the answer; compare it with the tool's result, then open with Yes or No",
    SUFFICES: "the learner asks whether the figure is enough; compare it with the tool's need, then say Yes or No",
}


def plan_of(question: Question) -> str:
    """How the reader read the question, for the model to follow (rule 7 of the system prompt): the kind of answer
    it wants, its parts when it has several, the concepts the module lacks, the calculators that do not model it,
    and a figure the learner wrote to be checked. Empty when there is nothing to add to the question itself."""
    reading = question.reading
    if reading is None:
        return ""
    lines = [f"answer kind: {reading.kind}"] if reading.parts else []
    if len(reading.parts) > 1 and not question.set_aside:  # a part set aside is not the model's to see
        lines += [f"part {i}: {part.written}" for i, part in enumerate(reading.parts, start=1)]
    if reading.lacking and not reading.guarded:
        lines.append(f"not in the module: {', '.join(reading.lacking)}")
    if question.unmodelled:
        lines.append(f"tools that do not model this question: {', '.join(question.unmodelled)}")
    if reading.figure in FIGURE_PLANS:
        lines.append(f"figure to check: {FIGURE_PLANS[reading.figure]}")
    return "\n".join(lines)
