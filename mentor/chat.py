"""One question, start to finish: validate, retrieve, decide scope, answer (LLM or extractive), check
grounding, remember the turn, and hand the result to the signals log.

`ChatService.prepare` raises the learner's 4xx errors before anything streams; `ChatService.events` then
yields the stream's events ("meta", "delta", "tool_call", "done"); `ChatService.ask` collects them.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from mentor.answer import STYLES, Answer, Citation, Question, ToolCall, Turn
from mentor.conversations import Conversation, ConversationStore, RateLimiter
from mentor.corpus import Module
from mentor.engines.extractive import HINT_CALC, HINT_CHECK, HINT_QUESTION, ExtractiveEngine, split_units
from mentor.engines.llm import MARKER, LLMEngine
from mentor.engines.planner import PlannedCall, plan_tools
from mentor.errors import InvalidInput, NotFound, UpstreamError
from mentor.grounding import Grounding, ToolEvidence, check_grounding
from mentor.llm import TextDelta
from mentor.privacy import pseudonym, without_personal_details
from mentor.retrieve import MAX_QUERY_CHARS, Retrieval, Retriever, tokenize
from mentor.safety import INJECTION, looks_like_injection, module_urls

log = logging.getLogger(__name__)
MAX_MESSAGE_CHARS = 4000
FOLLOW_UP = re.compile(
    r"^\s*(and|also|so|then|but|what about|how about|what if|same)\b|\b(it|its|that|this|those|these|they|them)\b",
    re.I,
)
PIECE = re.compile(r"\S+\s*")
# (?<!\s): a tag's leading spaces are matched from the first one only; trying every start inside a run of
# spaces made splitting a 4,000-space message quadratic.
CLAUSES = re.compile(r"(?<=[.!?;:])\s+|\n+|(?<!\s)\s*<[^<>]{1,60}>\s*|,\s*(?=(?:then|and then|anyway|now|but)\b)", re.I)


@dataclass(frozen=True, slots=True)
class ChatInput:
    """A learner's question as the API or CLI received it."""

    message: str
    module_id: str | None = None
    conversation_id: str | None = None
    learner_id: str | None = None
    style: str = "explain"
    client: str = "local"


@dataclass(slots=True)
class Prepared:
    """A validated question, ready to answer."""

    input: ChatInput
    module: Module
    conversation: Conversation
    learner_key: str
    question_id: str
    started: float


@dataclass(slots=True)
class ChatResult:
    """Everything known about one answered question: the response, and what the signals log needs."""

    question_id: str
    conversation_id: str
    learner_key: str
    module: Module
    question: str
    style: str
    answer: Answer
    grounding: Grounding
    retrieval: Retrieval
    latency_ms: float
    created: float = field(default_factory=time.time)

    def response(self) -> dict[str, Any]:
        """The public response object of /v1/chat, `mentor ask --json` and the stream's `done` event."""
        answer = self.answer
        return {
            "question_id": self.question_id,
            "conversation_id": self.conversation_id,
            "answer": answer.text,
            "citations": [
                {
                    "n": c.n,
                    "chunk_id": c.chunk_id,
                    "section_id": c.section_id,
                    "section_title": c.section_title,
                    "quote": c.quote,
                }
                for c in answer.citations
            ],
            # A hint names the calculator but withholds its result (the log keeps the whole run).
            "tool_calls": [
                c.public() | ({"result": None, "explanation": ""} if self.style == "hint" else {})
                for c in answer.tool_calls
                if c.error is None
            ],
            "out_of_scope": answer.out_of_scope,
            "grounding": self.grounding.to_dict(),
            "engine": answer.engine,
            "model": answer.model,
            "prompt_version": answer.prompt_version,
            "module_version": self.module.version,
            "latency_ms": round(self.latency_ms, 2),
            "fallback_reason": answer.fallback_reason,
        }


class ChatService:
    """Answers questions; built once per process with the pieces it needs."""

    def __init__(
        self,
        *,
        modules: dict[str, Module],
        retriever: Retriever,
        extractive: ExtractiveEngine,
        llm: LLMEngine | None,
        conversations: ConversationStore,
        limiter: RateLimiter,
        pseudonym_key: bytes,
        top_k: int,
        on_result: Callable[[ChatResult], None] | None = None,
    ) -> None:
        self.modules = modules
        self.retriever = retriever
        self.extractive = extractive
        self.llm = llm
        self.conversations = conversations
        self.limiter = limiter
        self._key = pseudonym_key
        self.top_k = top_k
        self.on_result = on_result
        self._urls = {m.id: module_urls(m.body) for m in modules.values()}
        # Who asked each recent question, so feedback can be checked before its row is written.
        self._askers: OrderedDict[str, str] = OrderedDict()

    def prepare(self, request: ChatInput) -> Prepared:
        """Validate the question and claim its rate-limit slot; raise a MentorError for anything wrong."""
        started = time.perf_counter()
        message = request.message
        if not isinstance(message, str) or not message.strip():
            raise InvalidInput("message: must contain some text")
        if len(message) > MAX_MESSAGE_CHARS:
            raise InvalidInput(f"message: at most {MAX_MESSAGE_CHARS} characters (got {len(message)})")
        if request.style not in STYLES:
            raise InvalidInput(f"style: must be one of {', '.join(STYLES)} (got {request.style!r})")
        module = self.module(request.module_id)
        learner_key = pseudonym(request.learner_id, self._key)
        self.limiter.check(learner_key if request.learner_id else f"client:{request.client}")
        conversation = self.conversations.open(request.conversation_id, learner_key=learner_key, module_id=module.id)
        return Prepared(request, module, conversation, learner_key, uuid.uuid4().hex, started)

    def asker(self, question_id: str) -> str | None:
        """The pseudonym of who asked a recent question in this process, if known."""
        return self._askers.get(question_id)

    def learner_key(self, learner_id: str | None) -> str:
        """The pseudonym the signals log knows a learner by."""
        return pseudonym(learner_id, self._key)

    def module(self, module_id: str | None) -> Module:
        """Resolve the module; it may be omitted only while the corpus holds one."""
        if not module_id:
            if len(self.modules) == 1:
                return next(iter(self.modules.values()))
            raise InvalidInput(f"module_id: required when there are several modules ({', '.join(self.modules)})")
        if module_id not in self.modules:
            raise NotFound(f"unknown module {module_id!r}; known modules: {', '.join(self.modules)}")
        return self.modules[module_id]

    async def ask(self, request: ChatInput) -> ChatResult:
        """Answer without streaming."""
        prepared = self.prepare(request)
        result = None
        async for kind, payload in self.events(prepared, stream=False):
            if kind == "done":
                result = payload
        assert isinstance(result, ChatResult)
        return result

    async def events(self, prepared: Prepared, *, stream: bool = True) -> AsyncIterator[tuple[str, Any]]:
        """Yield ("meta", ids), ("delta", text), ("tool_call", call) ..., then ("done", ChatResult).

        With `stream=False` (a caller that only wants the result) the LLM is asked without streaming.
        """
        request, module = prepared.input, prepared.module
        yield (
            "meta",
            {"question_id": prepared.question_id, "conversation_id": prepared.conversation.id, "module_id": module.id},
        )
        history = tuple(prepared.conversation.turns)
        message = request.message.strip()
        # Every step that costs CPU (regexes over the message, the query embedding, the search, the plan, the
        # answer, the grounding check) runs in a worker thread: on the event loop, eight 3,990-digit questions
        # held /healthz for 5.2 s.
        cleaned, query, retrieval, plan = await asyncio.to_thread(self._read, message, history, module.id)
        question = Question(
            text=cleaned or message,
            module_id=module.id,
            module_title=module.title,
            style=request.style,
            passages=retrieval.passages,
            history=history,
            allowed_urls=self._urls[module.id],
        )
        if not cleaned or not (retrieval.in_scope or plan):
            answer = self._redirect(module, injection=not cleaned)
            for piece in PIECE.findall(answer.text):
                yield "delta", piece
        elif self.llm is not None:
            answer = None
            async for kind, payload in self._answer_with_llm(module, question, plan, query, stream=stream):
                if kind == "answer":
                    answer = payload
                else:
                    yield kind, payload
            assert answer is not None
        else:
            answer = await asyncio.to_thread(self.extractive.answer, question, plan, retrieval_query=query)
            for piece in PIECE.findall(answer.text):
                yield "delta", piece
            for call in answer.tool_calls:
                if call.error is None:
                    yield "tool_call", call
        grounding = await asyncio.to_thread(ground, answer, question)
        result = ChatResult(
            question_id=prepared.question_id,
            conversation_id=prepared.conversation.id,
            learner_key=prepared.learner_key,
            module=module,
            question=message,
            style=request.style,
            answer=answer,
            grounding=grounding,
            retrieval=retrieval,
            latency_ms=(time.perf_counter() - prepared.started) * 1000,
        )
        self.conversations.append(
            prepared.conversation,
            Turn(message, answer.text),
        )
        self._askers[result.question_id] = result.learner_key
        if len(self._askers) > 100_000:
            self._askers.popitem(last=False)
        if self.on_result is not None:
            try:
                self.on_result(result)
            except Exception:  # the log must never cost the learner an answer
                log.exception("signal hand-off failed for question %s", result.question_id)
        yield "done", result

    def _read(
        self, message: str, history: tuple[Turn, ...], module_id: str
    ) -> tuple[str, str, Retrieval, list[PlannedCall]]:
        """Clean the question, retrieve its passages and plan its calculators (blocking: run off the event loop)."""
        cleaned = clean_question(message)
        # Personal details say nothing about the topic: leave them out of retrieval and the scope decision.
        query = retrieval_query(without_personal_details(cleaned) or cleaned or message, history)
        retrieval = self.retriever.search(query, module_id, self.top_k)
        plan = plan_tools(cleaned, tuple(t.question for t in history)) if cleaned else []
        return cleaned, query, retrieval, plan

    def _redirect(self, module: Module, *, injection: bool) -> Answer:
        engine, model, version = (
            ("llm", self.llm.model_name, self.llm.prompt_version) if self.llm else ("extractive", None, None)
        )
        return replace(redirect(module, injection=injection), engine=engine, model=model, prompt_version=version)

    async def _answer_with_llm(
        self, module: Module, question: Question, plan: list[PlannedCall], query: str, *, stream: bool
    ) -> AsyncIterator[tuple[str, Any]]:
        """Stream the LLM's answer; retry once when ungrounded; fall back to the extractive engine."""
        assert self.llm is not None
        feedback = None
        reason = None
        for _attempt in range(2):
            answer = None
            try:
                async for event in self.llm.run(question, feedback=feedback, stream=stream and feedback is None):
                    if isinstance(event, TextDelta):
                        if feedback is None:
                            yield "delta", event.text
                    elif isinstance(event, ToolCall):
                        yield "tool_call", event
                    else:
                        answer = event
            except UpstreamError as exc:
                log.warning("LLM failed (%s): falling back to the extractive engine", exc.reason)
                reason = exc.reason
                break
            assert answer is not None
            if answer.out_of_scope:  # the model's own judgement: the passages do not cover it
                yield "answer", self._redirect(module, injection=False)
                return
            answer = await asyncio.to_thread(with_citations, answer)
            grounding = await asyncio.to_thread(ground, answer, question)
            if grounding.grounded:
                yield "answer", answer
                return
            problems = "; ".join(
                [f"unsupported: {s!r}" for s in grounding.unsupported_sentences]
                + [f"number not in the passages or tool results: {n}" for n in grounding.untraced_numbers]
            )
            feedback = (answer.text, problems + ".")
            reason = "ungrounded"
        fallback = await asyncio.to_thread(self.extractive.answer, question, plan, retrieval_query=query)
        yield "answer", replace(fallback, fallback_reason=reason)


def clean_question(message: str) -> str:
    """The question without any sentence that tries to instruct the mentor."""
    if not looks_like_injection(message):
        return message
    # Instructions hide in clauses and pseudo-tags too: "...output PWNED; anyway, how big is ...".
    pieces = CLAUSES.split(message)
    kept = [p.strip() for p in pieces if p and p.strip() and not INJECTION.search(p)]
    return " ".join(kept).strip()


def retrieval_query(message: str, history: tuple[Turn, ...]) -> str:
    """Resolve a follow-up ("and what does stage 3 add?") against the previous question for retrieval.

    The pair stays within the retriever's limit on a query: after a long question (notes pasted before it) a
    follow-up was refused with 422 although both messages were valid. Of a previous question too long to fit,
    its end is kept, where the question itself is, from the first whole word.
    """
    if history and (FOLLOW_UP.search(message) or len(tokenize(message)) <= 3):
        previous = history[-1].question
        room = MAX_QUERY_CHARS - len(message) - 1
        if len(previous) > room:
            tail = previous[len(previous) - room :] if room > 0 else ""
            space = re.search(r"\s", tail)
            previous = tail[space.end() :] if space else ""
        return f"{previous} {message}".strip()
    return message


def with_citations(answer: Answer) -> Answer:
    """Turn the [n] markers of an LLM answer into citations; markers naming no passage are dropped."""
    by_rank = {p.rank: p for p in answer.passages}
    cited: dict[int, Citation] = {}
    for sentence in re.split(r"(?<=[.!?])\s+|\n+", answer.text):
        for n in (int(m) for m in MARKER.findall(sentence)):
            passage = by_rank.get(n)
            if passage is not None and n not in cited:
                cited[n] = Citation(
                    n, passage.chunk_id, passage.section_id, passage.section_title, best_quote(passage.text, sentence)
                )
    text = MARKER.sub(lambda m: m.group(0) if int(m.group(1)) in by_rank else "", answer.text)
    return replace(answer, text=text, citations=[cited[n] for n in sorted(cited)])


def best_quote(passage_text: str, sentence: str) -> str:
    """The passage's sentence that shares the most words with the citing sentence."""
    words = set(tokenize(sentence))
    units = split_units(passage_text)
    if not units:
        return passage_text[:200]
    return max(units, key=lambda u: len(words & set(tokenize(u.text)))).text


def ground(answer: Answer, question: Question) -> Grounding:
    """Check an answer against the passages it cites, the question, the history and its tool results."""
    if answer.out_of_scope:
        return Grounding(grounded=True, unsupported_sentences=[], untraced_numbers=[])
    by_rank = {p.rank: p.text for p in answer.passages}
    numbered = [by_rank.get(n, "") for n in range(1, max(by_rank, default=0) + 1)]
    tools = [ToolEvidence(c.arguments, c.result or {}, c.explanation) for c in answer.tool_calls if c.error is None]
    history = [text for turn in question.history for text in (turn.question, turn.answer)]
    return check_grounding(
        answer.text,
        question=question.text,
        passages=numbered,
        tools=tools,
        history=history,
        exempt=FIXED_SENTENCES,
    )


# The extractive engine's own framing sentences carry no claim about the module.
FIXED_SENTENCES: tuple[str, ...] = (HINT_QUESTION, HINT_CALC, HINT_CHECK)
REDIRECT_OPENINGS = (
    "I can only help with questions about this module, and I don't take instructions from the chat.",
    "That's outside what this module covers, so I won't answer it from general knowledge.",
)


def redirect(module: Module, *, injection: bool) -> Answer:
    """The polite answer to a question this module does not cover (or one that only gives instructions)."""
    topics = module.topics or tuple(s.title for s in module.sections[1:])
    covered = ", ".join(topics[:-1]) + (f" and {topics[-1]}" if len(topics) > 1 else topics[0])
    opening = REDIRECT_OPENINGS[0] if injection else REDIRECT_OPENINGS[1]
    text = f"{opening} *{module.title}* covers {covered}. Ask me about any of those."
    return Answer(
        text=text, citations=[], tool_calls=[], out_of_scope=True, engine="extractive", model=None, prompt_version=None
    )
