"""What one answered question leaves behind, and where it goes: the record the signals log and the eval read.

Defined here, below the chat that builds it, so the log never needs the orchestrator's internals; the chat is
given a `SignalSink` in its constructor (the signal writer, or `NO_SINK` for replays and evals), so a reader
can follow a question into the log from the call site.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

from mentor.answer import Answer
from mentor.grounding import Grounding
from mentor.retrieve import Passage
from mentor.understanding import Reading

# The `fallback_reason` of a streamed answer its client left before the end: logged with what it had produced so
# far, its grounding unchecked (grounded false, coverage unknown).
ABANDONED = "abandoned"


@dataclass(frozen=True, slots=True)
class AnsweredQuestion:
    """One answered question: who asked what about which module, what was retrieved, answered and checked."""

    question_id: str
    conversation_id: str
    learner_key: str
    module_id: str
    module_version: str
    question: str
    retrieval_query: str
    style: str
    answer: Answer
    grounding: Grounding
    passages: tuple[Passage, ...]
    relevance: float
    latency_ms: float
    client: str = "local"
    channel: str = "chat"  # a Channel (mentor.answer): the surface the question came through
    lti_context: str | None = None  # the LTI course it was asked in (a pseudonym), None outside a launch
    created: float = field(default_factory=time.time)
    reading: Reading | None = None  # the message as read (None when the client left before it was read)


class SignalSink(Protocol):
    """Takes answered questions for the learning-signal log; must return at once and never raise."""

    def submit(self, item: AnsweredQuestion) -> None: ...


class NoSink:
    """Logs nothing: replays and evals are not learning signals."""

    def submit(self, item: AnsweredQuestion) -> None:
        return None


NO_SINK = NoSink()
