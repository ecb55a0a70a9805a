"""Turn an answered question (or a rating) into a redacted, storable, JSON-ready signal record.

Records are what the spool holds and what the writer inserts, so nothing personal reaches disk in any form:
every field that comes from the learner or is derived from their words (question, tool arguments and results,
answer, unsupported sentences, untraced numbers, comment) goes through one `Scrubber`. And nothing in a record
is a value a database refuses (NUL in text), so one odd question cannot stop a batch.
"""

from __future__ import annotations

import base64
import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from mentor.answer import ToolCall
from mentor.privacy import NUMERIC_KINDS, Scrubber
from mentor.record import AnsweredQuestion


@dataclass(frozen=True, slots=True)
class Feedback:
    """A learner's rating of one answer, as received."""

    question_id: str
    learner_key: str
    rating: str
    comment: str | None
    created: float


def question_record(result: AnsweredQuestion, *, embed: Callable[[str], np.ndarray] | None = None) -> dict[str, Any]:
    """The question's signal: redacted text and answer, passages, tool calls, verdicts and timings."""
    scrub = Scrubber()
    text = storable(scrub.text(result.question))  # first: what it finds is then removed from every later field
    # The reader read a scrubbed copy already; scrubbing what it made again (details learned from the text above)
    # keeps a detail it reshaped, or one of the earlier question it joined, out of the log too.
    reading = result.reading
    read_as = storable(scrub.text(reading.query)) if reading is not None else None
    answer = result.answer
    tool_calls = [_tool_call(call, scrub) for call in answer.tool_calls]  # before the answer, which quotes them
    answer_text = scrub.text(answer.text)
    unsupported = [scrub.text(s) for s in result.grounding.unsupported_sentences]
    untraced = [scrub.text(n) for n in result.grounding.untraced_numbers]
    cited = {c.chunk_id for c in answer.citations}
    sections = list(dict.fromkeys(c.section_id for c in answer.citations))
    primary = sections[0] if sections else None
    if primary is None and not answer.out_of_scope and result.passages:
        primary = result.passages[0].section_id
    # The question as the reader read it was embedded for retrieval already (personal details left out): its vector
    # groups the question with others meaning the same, at no forward pass of its own.
    vector = reading.vector if reading is not None and reading.query else embed(text) if embed is not None else None
    return storable(
        {
            "type": "question",
            "question_id": result.question_id,
            "conversation_id": result.conversation_id,
            "learner_id": result.learner_key,
            "module_id": result.module_id,
            "module_version": result.module_version,
            "primary_section_id": primary,
            "section_ids": sections,
            "text": text,
            "read_as": read_as,
            "redactions": sorted(scrub.kinds),
            "style": result.style,
            "channel": result.channel,
            "lti_context": result.lti_context,
            "engine": answer.engine,
            "model": answer.model,
            "prompt_version": answer.prompt_version,
            "out_of_scope": answer.out_of_scope,
            "coverage": answer.coverage,
            "grounded": result.grounding.grounded,
            "unsupported_sentences": unsupported,
            "untraced_numbers": untraced,
            "answer": answer_text,
            "relevance": float(result.relevance),
            "latency_ms": round(result.latency_ms, 3),
            "prompt_tokens": answer.prompt_tokens,
            "completion_tokens": answer.completion_tokens,
            "fallback_reason": answer.fallback_reason,
            "created_at": iso(result.created),
            "embedding": None if vector is None else base64.b64encode(vector.astype(np.float32).tobytes()).decode(),
            "passages": [
                {
                    "chunk_id": p.chunk_id,
                    "section_id": p.section_id,
                    "rank": p.rank,
                    "score": p.score,
                    "dense_similarity": p.dense_similarity,
                    "cited": p.chunk_id in cited,
                }
                for p in result.passages
            ],
            "tool_calls": tool_calls,
        }
    )


def _tool_call(call: ToolCall, scrub: Scrubber) -> dict[str, Any]:
    """A calculator run with the learner's details gone from its arguments, and from its result when derived."""
    done = len(scrub.replaced)
    arguments = scrub.value(call.arguments)
    numeric = [kind for kind in scrub.replaced[done:] if kind in NUMERIC_KINDS]
    return {
        "name": call.name,
        "arguments": arguments,
        # A result computed from a card or phone number gives it back by one division: its long numbers go too.
        "result": scrub.derived(call.result, numeric[0]) if numeric else scrub.value(call.result),
        "error": scrub.text(call.error) if call.error else call.error,
        "duration_ms": call.duration_ms,
    }


def feedback_record(feedback: Feedback) -> dict[str, Any]:
    """The rating's signal, with its comment redacted; its id makes a replay idempotent."""
    scrub = Scrubber()
    comment = scrub.text(feedback.comment) if feedback.comment else None
    return storable(
        {
            "type": "feedback",
            "id": uuid.uuid4().hex,
            "question_id": feedback.question_id,
            "learner_id": feedback.learner_key,
            "rating": feedback.rating,
            "comment": comment,
            "redactions": sorted(scrub.kinds),
            "created_at": iso(feedback.created),
        }
    )


def storable(value: Any) -> Any:
    """`value` with what SQLite and PostgreSQL cannot store replaced, so a record is written alike on both.

    PostgreSQL refuses NUL in text ("text fields cannot contain NUL (0x00) bytes") and both drivers refuse lone
    UTF-16 surrogates, which JSON input may carry ("\\ud800"): each becomes U+FFFD, the replacement character.
    Infinities and NaN are not JSON (PostgreSQL refuses them in a JSON column): they become null.
    """
    if isinstance(value, str):
        if "\x00" in value:
            value = value.replace("\x00", "\ufffd")
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                value = value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return value
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def iso(timestamp: float) -> str:
    """UTC ISO-8601 with microseconds."""
    return datetime.fromtimestamp(timestamp, UTC).isoformat()
