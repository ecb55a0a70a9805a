"""Turn an answered question (or a rating) into a redacted, JSON-ready signal record.

Records are what the spool holds and what the writer inserts, so nothing personal reaches disk in any form.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from mentor.chat import ChatResult
from mentor.privacy import redact


@dataclass(frozen=True, slots=True)
class Feedback:
    """A learner's rating of one answer, as received."""

    question_id: str
    learner_key: str
    rating: str
    comment: str | None
    created: float


def question_record(result: ChatResult, *, embed: Callable[[str], np.ndarray] | None = None) -> dict[str, Any]:
    """The question's signal: redacted text and answer, passages, tool calls, verdicts and timings."""
    text, kinds = redact(result.question)
    answer_text, answer_kinds = redact(result.answer.text)
    answer = result.answer
    cited = {c.chunk_id for c in answer.citations}
    sections = list(dict.fromkeys(c.section_id for c in answer.citations))
    primary = sections[0] if sections else None
    if primary is None and not answer.out_of_scope and result.retrieval.passages:
        primary = result.retrieval.passages[0].section_id
    vector = embed(text) if embed is not None else None
    return {
        "type": "question",
        "question_id": result.question_id,
        "conversation_id": result.conversation_id,
        "learner_id": result.learner_key,
        "module_id": result.module.id,
        "module_version": result.module.version,
        "primary_section_id": primary,
        "section_ids": sections,
        "text": text,
        "redactions": sorted(set(kinds) | set(answer_kinds)),
        "style": result.style,
        "engine": answer.engine,
        "model": answer.model,
        "prompt_version": answer.prompt_version,
        "out_of_scope": answer.out_of_scope,
        "grounded": result.grounding.grounded,
        "unsupported_sentences": [redact(s)[0] for s in result.grounding.unsupported_sentences],
        "untraced_numbers": list(result.grounding.untraced_numbers),
        "answer": answer_text,
        "relevance": float(result.retrieval.relevance),
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
            for p in result.retrieval.passages
        ],
        "tool_calls": [
            {
                "name": c.name,
                "arguments": c.arguments,
                "result": c.result,
                "error": c.error,
                "duration_ms": c.duration_ms,
            }
            for c in answer.tool_calls
        ],
    }


def feedback_record(feedback: Feedback) -> dict[str, Any]:
    """The rating's signal, with its comment redacted; its id makes a replay idempotent."""
    comment, kinds = redact(feedback.comment) if feedback.comment else (None, [])
    return {
        "type": "feedback",
        "id": uuid.uuid4().hex,
        "question_id": feedback.question_id,
        "learner_id": feedback.learner_key,
        "rating": feedback.rating,
        "comment": comment,
        "redactions": kinds,
        "created_at": iso(feedback.created),
    }


def iso(timestamp: float) -> str:
    """UTC ISO-8601 with microseconds."""
    return datetime.fromtimestamp(timestamp, UTC).isoformat()
