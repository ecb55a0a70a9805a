"""One question, start to finish, as the steps of answering:

1. `prepare`: validate, resolve the module, count the question against the rate limits (`throttle`), open the
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
import logging
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing
from functools import partial
from typing import Any

from mentor.answer import Answer, ChatInput, Question, ToolCall, Turn
from mentor.catalog import Catalog
from mentor.citations import ground
from mentor.consult import Grounds, consult
from mentor.conversations import ConversationStore
from mentor.corpus import Module
from mentor.engines.extractive import ExtractiveEngine
from mentor.engines.llm import LLMEngine
from mentor.errors import InvalidInput, NotReady
from mentor.grounding import Grounding
from mentor.intake import Prepared, held_conversation, validate
from mentor.privacy import pseudonym
from mentor.record import AnsweredQuestion, SignalSink
from mentor.respond import UNCHECKED, Responder, check
from mentor.throttle import ASK, ASK_CLIENT, RateLimiter

log = logging.getLogger(__name__)
# Start-up runs one question through every stage (ChatService.warm); a calculation reaches the planner and tools.
WARM_QUESTION = "how much memory does a 7B model need with ZeRO stage 3 on 8 GPUs, and why?"
WARM_MODULES = 20  # units embedded at start for this many modules; later ones are embedded on first use

__all__ = ["ChatInput", "ChatService", "Prepared"]


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
        self.responder = Responder(extractive, llm)
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
        await self.throttle(request, learner_key)
        if request.history is None:
            conversation = await self.conversations.open(
                request.conversation_id, learner_key=learner_key, module_id=module.id
            )
        else:
            conversation = held_conversation(
                request.history, request.message, learner_key=learner_key, module_id=module.id, key=self._key
            )
        return Prepared(request, catalog, module, conversation, learner_key, uuid.uuid4().hex, started)

    async def throttle(self, request: ChatInput, learner_key: str) -> None:
        """Count the question per learner (an anonymous one is their address), and per address while unproven."""
        client_key = self.client_key(request.client)
        await self.limiter.hit(ASK, learner_key if request.learner_id else client_key)
        if request.learner_id and not request.authenticated:
            await self.limiter.hit(ASK_CLIENT, client_key)

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
            question = asked(prepared.catalog, module, grounds, message, prepared.input.style, grounds.history)
            answer = grounding = None
            async with aclosing(self.responder.events(module, question, grounds, stream=stream)) as answering:
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
            abandoned = self.responder.abandoned(grounds, "".join(shown), calls)
            self._log(self._answered(prepared, message, grounds, abandoned, UNCHECKED))
            raise
        answered = self._answered(prepared, message, grounds, answer, grounding)
        self._log(answered)  # before remembering the turn: a client leaving now cannot lose the signal
        await self._remember(prepared, Turn(grounds.said, answer.text, grounds.reading.query))
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
            lti_context=prepared.input.lti_context,
        )

    def consult(self, message: str, history: tuple[Turn, ...], module_id: str, catalog: Catalog) -> Grounds:
        """Read the message once and find what its answer stands on (blocking: run in a worker thread)."""
        reader, retriever, pointed = catalog.reader, catalog.retriever, partial(catalog.pointed, module_id)
        return consult(message, history, module_id=module_id, reader=reader, retriever=retriever, top_k=self.top_k,
                       pointed=pointed)  # fmt: skip

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
        ground(self.responder.extract(question, grounds), question)

    async def asker(self, question_id: str) -> str | None:
        """The pseudonym of who asked a recent question, if the conversation store knows it."""
        return await self.conversations.asker(question_id)

    def learner_key(self, learner_id: str | None) -> str:
        """The pseudonym the signals log knows a learner by."""
        return pseudonym(learner_id, self._key)

    def client_key(self, address: str) -> str:
        """The pseudonym the limits per address count by (a pseudonym too: it may go to Redis)."""
        return pseudonym(f"client:{address}", self._key)

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
        text=grounds.question or message,
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
        unmodelled=grounds.unmodelled,
        pointers=grounds.pointers,
        sent=grounds.sent,
    )
