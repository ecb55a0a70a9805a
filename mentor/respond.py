"""The answer to a question, as events: the polite redirect when the module does not cover it (a short kind reply
when the message only greets, thanks or takes leave), the LLM's answer checked against the passages (retried once,
with what failed, when it is not grounded), or the extractive engine's (also the LLM's fallback). Both engines'
answers stream the same way: text deltas, then the calculator calls.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import replace
from typing import Any

from mentor.answer import Answer, Question, ToolCall
from mentor.chat_model import TextDelta
from mentor.citations import ground
from mentor.consult import Grounds
from mentor.corpus import Module, Pointer
from mentor.engines.extractive import ExtractiveEngine, missing_names
from mentor.engines.llm import LLMEngine
from mentor.errors import UpstreamError
from mentor.framing import PARTIAL_OPENING, pointed, redirect, social_reply, with_pointers
from mentor.grounding import Grounding
from mentor.record import ABANDONED

log = logging.getLogger(__name__)
PIECE = re.compile(r"\S+\s*")
UNCHECKED = Grounding(grounded=False, unsupported_sentences=[], untraced_numbers=[])  # an answer cut short
# An answer whose check reads at most this much text (answer, question, history) is checked on the event loop: the
# check of a usual answer (~0.35 ms) cost no more than the hand-off to a worker thread and back (~0.3 ms at
# concurrency 1); longer ones (a pasted log, a 3,990-digit number) could hold the loop for milliseconds.
INLINE_CHECK_CHARS = 2000


class Responder:
    """Answers a question whose grounds are found, with the LLM engine when one is configured."""

    def __init__(self, extractive: ExtractiveEngine, llm: LLMEngine | None) -> None:
        self.extractive = extractive
        self.llm = llm

    async def events(
        self, module: Module, question: Question, grounds: Grounds, *, stream: bool
    ) -> AsyncIterator[tuple[str, Any]]:
        """The answer's events, then ("answer", (Answer, Grounding or None)): a redirect, the LLM's answer, or the
        extractive one, with the grounding verdict when it was already reached (the LLM's answer is checked to
        decide on a retry), else None."""
        if self.llm is not None and grounds.answerable:
            async with aclosing(self._with_llm(module, question, grounds, stream=stream)) as events:
                async for event in events:
                    yield event
            return
        answer = await asyncio.to_thread(self.extract, question, grounds) if grounds.answerable else None
        if answer is None and grounds.reading.social:  # "hi", "thanks!": a kind word back, not the redirect
            answer = self.attributed(social_reply(module, grounds.reading.social))
        elif answer is None or answer.out_of_scope:  # the engine, too, may find the module lacks the question's subject
            answer = self.redirect(module, injection=grounds.reading.instructed, pointers=question.pointers)
        else:
            answer = with_pointers(answer, question.pointers)
        for piece in PIECE.findall(answer.text):
            yield "delta", piece
        for call in answer.tool_calls:
            if call.error is None:
                yield "tool_call", call
        yield "answer", (answer, None)

    async def _with_llm(
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
                yield "answer", (self.redirect(module, injection=False, pointers=question.pointers), None)
                return
            if framing:
                answer = replace(answer, text=f"{framing[0]}\n\n{answer.text}", coverage="partial", framing=framing)
            grounding = await check(answer, question)
            if grounding.grounded:
                answer = with_pointers(answer, question.pointers)
                if question.pointers and stream:
                    yield "delta", f"\n\n{pointed(question.pointers)}"
                yield "answer", (answer, grounding)
                return
            feedback = (answer.text, describe_problems(grounding))
            reason = "ungrounded"
        fallback = await asyncio.to_thread(self.extract, question, grounds)
        yield "answer", (replace(with_pointers(fallback, question.pointers), fallback_reason=reason), None)

    def extract(self, question: Question, grounds: Grounds) -> Answer:
        """The extractive engine's answer (blocking)."""
        return self.extractive.answer(question, grounds.plan)

    def redirect(self, module: Module, *, injection: bool, pointers: tuple[Pointer, ...] = ()) -> Answer:
        """The polite redirect, attributed to the engine that would have answered."""
        return self.attributed(redirect(module, injection=injection, pointers=pointers))

    def attributed(self, answer: Answer) -> Answer:
        """The mentor's own words (a redirect, a reply to chat), attributed to the engine that would have answered."""
        engine, model, version = (
            ("llm", self.llm.model_name, self.llm.prompt_version) if self.llm else ("extractive", None, None)
        )
        return replace(answer, engine=engine, model=model, prompt_version=version)

    def abandoned(self, grounds: Grounds | None, text: str, calls: list[ToolCall]) -> Answer:
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
