"""One question, start to finish, as the steps of answering:

1. `prepare`: validate, resolve the module, count the question against the learner's rate limit, open the
   conversation, or take the one the client holds (4xx errors are raised here, before anything streams);
2. `events`: read the message once and find what the answer stands on (`mentor.consult`: the reading, the
   passages, the calculator plan), answer with the LLM engine or the extractive one (or redirect when the module
   does not cover it, `mentor.framing`), check grounding (`mentor.citations`), remember the turn, hand the
   `AnsweredQuestion` to the sink it was given.

`ask` collects the events of one question. Every CPU-heavy step runs in a worker thread: on the event loop,
eight 3,990-digit questions held /healthz for 5.2 s.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, replace
from typing import Any

from mentor.answer import STYLES, Answer, ChatInput, Question, ToolCall, Turn
from mentor.catalog import Catalog
from mentor.chat_model import TextDelta
from mentor.citations import ground
from mentor.consult import Grounds, consult
from mentor.conversations import MAX_CONVERSATION_BYTES, Conversation, ConversationStore, RateLimiter, turn_bytes
from mentor.corpus import Module
from mentor.engines.extractive import ExtractiveEngine, missing_names
from mentor.engines.llm import LLMEngine
from mentor.errors import InvalidInput, NotReady, UpstreamError
from mentor.framing import PARTIAL_OPENING, redirect
from mentor.grounding import Grounding
from mentor.privacy import pseudonym
from mentor.record import ABANDONED, AnsweredQuestion, SignalSink
from mentor.text import MAX_MESSAGE_CHARS

log = logging.getLogger(__name__)
PIECE = re.compile(r"\S+\s*")
# Start-up runs one question through every stage (ChatService.warm); a calculation reaches the planner and tools.
WARM_QUESTION = "how much memory does a 7B model need with ZeRO stage 3 on 8 GPUs, and why?"
WARM_MODULES = 20  # units embedded at start for this many modules; later ones are embedded on first use
UNCHECKED = Grounding(grounded=False, unsupported_sentences=[], untraced_numbers=[])  # an answer cut short
# An answer whose check reads at most this much text (answer, question, history) is checked on the event loop: the
# check of a usual answer (~0.35 ms) cost no more than the hand-off to a worker thread and back (~0.3 ms at
# concurrency 1); longer ones (a pasted log, a 3,990-digit number) could hold the loop for milliseconds.
INLINE_CHECK_CHARS = 2000

__all__ = ["ChatInput", "ChatService", "Prepared"]


@dataclass(slots=True)
class Prepared:
    """A validated question, ready to answer."""

    input: ChatInput
    catalog: Catalog  # the snapshot this question is answered from, even if another is swapped in meanwhile
    module: Module
    conversation: Conversation
    learner_key: str
    question_id: str
    started: float


class ChatService:
    """Answers questions; built once per process with the pieces it needs, the signal sink included."""

    def __init__(
        self,
        *,
        catalog: Catalog,
        extractive: ExtractiveEngine,
        llm: LLMEngine | None,
        conversations: ConversationStore,
        limiter: RateLimiter,
        pseudonym_key: bytes,
        top_k: int,
        sink: SignalSink,
    ) -> None:
        self.catalog = catalog
        self.extractive = extractive
        self.llm = llm
        self.conversations = conversations
        self.limiter = limiter
        self._key = pseudonym_key
        self.top_k = top_k
        self.sink = sink

    def use(self, catalog: Catalog) -> None:
        """Serve `catalog` from the next question on (questions under way finish with the one they began with)."""
        self.catalog = catalog

    async def prepare(self, request: ChatInput) -> Prepared:
        """Validate the question and claim its rate-limit slot; raise a MentorError for anything wrong."""
        started = time.perf_counter()
        validate(request)
        catalog = self.catalog
        module = self.module(request.module_id, catalog)
        learner_key = self.learner_key(request.learner_id)
        # Anonymous askers are limited by address, which is kept as a pseudonym too (it may go to Redis).
        await self.limiter.hit(learner_key if request.learner_id else self.learner_key(f"client:{request.client}"))
        if request.history is None:
            conversation = await self.conversations.open(
                request.conversation_id, learner_key=learner_key, module_id=module.id
            )
        else:
            conversation = held_conversation(
                request.history, request.message, learner_key=learner_key, module_id=module.id, key=self._key
            )
        return Prepared(request, catalog, module, conversation, learner_key, uuid.uuid4().hex, started)

    async def ask(self, request: ChatInput) -> AnsweredQuestion:
        """Answer without streaming."""
        prepared = await self.prepare(request)
        async for kind, payload in self.events(prepared, stream=False):
            if kind == "done":
                return payload
        raise AssertionError("events() ends with a done event")

    async def events(self, prepared: Prepared, *, stream: bool = True) -> AsyncIterator[tuple[str, Any]]:
        """Yield ("meta", ids), ("delta", text), ("tool_call", call) ..., then ("done", AnsweredQuestion).

        With `stream=False` (a caller that only wants the result) the LLM is asked without streaming. Closed or
        cancelled before "done" (the client left), it stops answering and still logs the question, as abandoned.
        """
        module, conversation = prepared.module, prepared.conversation
        message = prepared.input.message.strip()
        history = tuple(conversation.turns)
        grounds: Grounds | None = None
        shown: list[str] = []  # what the client was sent, should it leave before the end
        calls: list[ToolCall] = []
        try:
            ids = {"question_id": prepared.question_id, "conversation_id": conversation.id, "module_id": module.id}
            yield "meta", ids
            grounds = await asyncio.to_thread(self.consult, message, history, module.id, prepared.catalog)
            question = asked(prepared.catalog, module, grounds, message, prepared.input.style, history)
            answer = grounding = None
            async with aclosing(self._answer(module, question, grounds, stream=stream)) as answering:
                async for kind, payload in answering:
                    if kind == "answer":
                        answer, grounding = payload
                        continue
                    if kind == "delta":
                        shown.append(payload)
                    elif kind == "tool_call":
                        calls.append(payload)
                    yield kind, payload
            assert answer is not None
            if grounding is None:  # an LLM answer comes checked already: checking it again cost ~0.6 ms a question
                grounding = await check(answer, question)
        except (GeneratorExit, asyncio.CancelledError):
            # The client left (its stream was closed, or its request cancelled): the work stops here, and the
            # question is still logged, with what it was shown (only what can be done without awaiting).
            abandoned = self._abandoned(grounds, "".join(shown), calls)
            self._log(self._answered(prepared, message, grounds, abandoned, UNCHECKED))
            raise
        answered = self._answered(prepared, message, grounds, answer, grounding)
        self._log(answered)  # before remembering the turn: a client leaving now cannot lose the signal
        await self._remember(prepared, Turn(message, answer.text, grounds.reading.query))
        yield "done", answered

    def _answered(
        self, prepared: Prepared, message: str, grounds: Grounds | None, answer: Answer, grounding: Grounding
    ) -> AnsweredQuestion:
        """The record of the question (`grounds` is None when the client left before retrieval ended)."""
        return AnsweredQuestion(
            question_id=prepared.question_id,
            conversation_id=prepared.conversation.id,
            learner_key=prepared.learner_key,
            module_id=prepared.module.id,
            module_version=prepared.module.version,
            question=message,
            retrieval_query=grounds.reading.query if grounds else message,
            style=prepared.input.style,
            answer=answer,
            grounding=grounding,
            passages=tuple(grounds.retrieval.passages) if grounds else (),
            relevance=float(grounds.retrieval.relevance) if grounds else 0.0,
            reading=grounds.reading if grounds else None,
            latency_ms=(time.perf_counter() - prepared.started) * 1000,
            client=prepared.input.client,
            channel=prepared.input.channel,
        )

    def _abandoned(self, grounds: Grounds | None, text: str, calls: list[ToolCall]) -> Answer:
        """The answer a client left: the text and calculator calls it was sent, by the engine that was answering."""
        by_llm = self.llm is not None and (grounds is None or grounds.answerable)
        engine, model, version = (
            ("llm", self.llm.model_name, self.llm.prompt_version) if by_llm and self.llm else ("extractive", None, None)
        )
        return Answer(
            text=text,
            citations=[],
            tool_calls=list(calls),
            out_of_scope=False,
            engine=engine,
            model=model,
            prompt_version=version,
            passages=list(grounds.retrieval.passages) if grounds else [],
            fallback_reason=ABANDONED,
            coverage=None,  # type: ignore[arg-type]  # not measured: stored as NULL, like rows older than coverage
        )

    def consult(self, message: str, history: tuple[Turn, ...], module_id: str, catalog: Catalog) -> Grounds:
        """Read the message once and find what its answer stands on (blocking: run in a worker thread)."""
        return consult(
            message, history, module_id=module_id, reader=catalog.reader, retriever=catalog.retriever, top_k=self.top_k
        )

    async def _answer(
        self, module: Module, question: Question, grounds: Grounds, *, stream: bool
    ) -> AsyncIterator[tuple[str, Any]]:
        """The answer's events, then ("answer", (Answer, Grounding or None)): a redirect, the LLM's answer, or the
        extractive one, with the grounding verdict when it was already reached (the LLM's answer is checked to
        decide on a retry), else None."""
        if self.llm is not None and grounds.answerable:
            async with aclosing(self._answer_with_llm(module, question, grounds, stream=stream)) as events:
                async for event in events:
                    yield event
            return
        answer = await asyncio.to_thread(self._extract, question, grounds) if grounds.answerable else None
        if answer is None or answer.out_of_scope:  # the engine, too, may find the module lacks the question's subject
            answer = self._redirect(module, injection=grounds.reading.instructed)
        for piece in PIECE.findall(answer.text):
            yield "delta", piece
        for call in answer.tool_calls:
            if call.error is None:
                yield "tool_call", call
        yield "answer", (answer, None)

    async def _answer_with_llm(
        self, module: Module, question: Question, grounds: Grounds, *, stream: bool
    ) -> AsyncIterator[tuple[str, Any]]:
        """Stream the LLM's answer; retry once when ungrounded; fall back to the extractive engine."""
        assert self.llm is not None
        # What the module lacks is known before the model answers: say it first, as the offline engine does.
        named = missing_names(question)
        framing = (f"{PARTIAL_OPENING} {', '.join(named)}; here is what it does say.",) if named else ()
        if framing and stream:
            yield "delta", f"{framing[0]}\n\n"
        feedback = None
        reason = None
        for _attempt in range(2):
            answer = None
            try:
                run = self.llm.run(question, feedback=feedback, stream=stream and feedback is None)
                async with aclosing(run) as events:  # closed at once if the client leaves: the model stops too
                    async for event in events:
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
                yield "answer", (self._redirect(module, injection=False), None)
                return
            if framing:
                answer = replace(answer, text=f"{framing[0]}\n\n{answer.text}", coverage="partial", framing=framing)
            grounding = await check(answer, question)
            if grounding.grounded:
                yield "answer", (answer, grounding)
                return
            feedback = (answer.text, describe_problems(grounding))
            reason = "ungrounded"
        fallback = await asyncio.to_thread(self._extract, question, grounds)
        yield "answer", (replace(fallback, fallback_reason=reason), None)

    def _extract(self, question: Question, grounds: Grounds) -> Answer:
        return self.extractive.answer(question, grounds.plan)

    def _redirect(self, module: Module, *, injection: bool) -> Answer:
        engine, model, version = (
            ("llm", self.llm.model_name, self.llm.prompt_version) if self.llm else ("extractive", None, None)
        )
        return replace(redirect(module, injection=injection), engine=engine, model=model, prompt_version=version)

    async def _remember(self, prepared: Prepared, turn: Turn) -> None:
        if prepared.input.history is None:  # a client-held conversation comes back whole with the next question
            await self.conversations.append(prepared.conversation, turn)
        await self.conversations.remember_asker(prepared.question_id, prepared.learner_key)

    def _log(self, answered: AnsweredQuestion) -> None:
        try:
            self.sink.submit(answered)
        except Exception:  # the log must never cost the learner an answer
            log.exception("signal hand-off failed for question %s", answered.question_id)

    def warm(self, max_modules: int = WARM_MODULES) -> None:
        """Run every stage once before the first learner: embed the units of the first `max_modules` modules
        and answer one question end to end (retrieval, planning, selection, grounding), logged nowhere."""
        catalog = self.catalog
        indexes = list(catalog.retriever.modules.items())[:max_modules]
        self.extractive.warm([chunk for _, index in indexes for chunk in index.chunks])
        if not indexes:
            return
        module = catalog.module(indexes[0][0])
        grounds = self.consult(WARM_QUESTION, (), module.id, catalog)
        question = asked(catalog, module, grounds, WARM_QUESTION, "explain", ())
        ground(self._extract(question, grounds), question)

    async def asker(self, question_id: str) -> str | None:
        """The pseudonym of who asked a recent question, if the conversation store knows it."""
        return await self.conversations.asker(question_id)

    def learner_key(self, learner_id: str | None) -> str:
        """The pseudonym the signals log knows a learner by."""
        return pseudonym(learner_id, self._key)

    def module(self, module_id: str | None, catalog: Catalog | None = None) -> Module:
        """Resolve the module; it may be omitted only while the catalog holds one."""
        modules = (catalog or self.catalog).modules
        if not module_id:
            if len(modules) == 1:
                return next(iter(modules.values()))
            if not modules:
                raise NotReady("no module is loaded yet; please try again shortly")
            raise InvalidInput(f"module_id: required when there are several modules ({', '.join(modules)})")
        return (catalog or self.catalog).module(module_id)


def asked(
    catalog: Catalog, module: Module, grounds: Grounds, message: str, style: str, history: tuple[Turn, ...]
) -> Question:
    """What an engine is asked: the question as read, with its module's passages, links and profile."""
    return Question(
        text=grounds.reading.question or message,
        module_id=module.id,
        module_title=module.title,
        style=style,
        passages=grounds.retrieval.passages,
        history=history,
        allowed_urls=catalog.urls[module.id],
        profile=catalog.retriever.modules[module.id].profile,
        reading=grounds.reading,
        planted=catalog.planted,
        set_aside=grounds.set_aside,
    )


def held_conversation(
    history: tuple[Turn, ...], message: str, *, learner_key: str, module_id: str, key: bytes
) -> Conversation:
    """The conversation a client holds, as the readers of a stored one see it; never stored.

    Its id is keyed on the learner, the module and the thread's first question, so every turn of one thread is
    one conversation in the signals log, as with a stored conversation (two threads one learner opens with the
    same question are logged as one). It is kept within a stored conversation's bounds: the latest 20 turns that
    fit in 16 KB, and always the latest.
    """
    first = history[0].question if history else message
    material = "\x00".join(("client-held", learner_key, module_id, first)).encode("utf-8", "surrogatepass")
    conversation = Conversation(hmac.new(key, material, hashlib.sha256).hexdigest()[:32], learner_key, module_id)
    conversation.turns.extend(history)  # the deque keeps the latest MAX_TURNS
    size = sum(turn_bytes(turn) for turn in conversation.turns)
    while len(conversation.turns) > 1 and size > MAX_CONVERSATION_BYTES:
        size -= turn_bytes(conversation.turns.popleft())
    return conversation


async def check(answer: Answer, question: Question) -> Grounding:
    """The grounding verdict on `answer`: on the event loop when the check reads little, else in a worker thread."""
    read = len(answer.text) + len(question.text) + sum(len(t.question) + len(t.answer) for t in question.history)
    if read <= INLINE_CHECK_CHARS:
        return ground(answer, question)
    return await asyncio.to_thread(ground, answer, question)


def describe_problems(grounding: Grounding) -> str:
    """What the grounding check found, as the sentence the LLM is asked to fix."""
    problems = [f"unsupported: {s!r}" for s in grounding.unsupported_sentences]
    problems += [f"number not in the passages or tool results: {n}" for n in grounding.untraced_numbers]
    return "; ".join(problems) + "."


def validate(request: ChatInput) -> None:
    """Raise InvalidInput for a message or style the chat cannot take."""
    message = request.message
    if request.history is not None and request.conversation_id is not None:
        raise InvalidInput("conversation_id: not with a client-held history; send one or the other")
    if not isinstance(message, str) or not message.strip():
        raise InvalidInput("message: must contain some text")
    if len(message) > MAX_MESSAGE_CHARS:
        raise InvalidInput(f"message: at most {MAX_MESSAGE_CHARS} characters (got {len(message)})")
    if request.style not in STYLES:
        raise InvalidInput(f"style: must be one of {', '.join(STYLES)} (got {request.style!r})")
