"""What analysts ask of the signal log: filtered pages of questions, exports, erasure and retention."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, delete, func, or_, select
from sqlmodel import Session

from mentor.db import forget_deleted
from mentor.errors import InvalidInput
from mentor.signals.locks import lock_learners
from mentor.signals.tables import (
    ConversationRow,
    FeedbackRow,
    LearnerRow,
    PassageRow,
    QuestionRow,
    ToolCallRow,
)


@dataclass(frozen=True, slots=True)
class Filters:
    """The filters every analyst route accepts."""

    module_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    section_id: str | None = None
    out_of_scope: bool | None = None
    grounded: bool | None = None
    coverage: str | None = None
    lti_context: str | None = None  # one LTI course's questions (a course analyst token sets it: mentor.lti)

    def apply(self, query: Any) -> Any:
        if self.since and self.until and self.since > self.until:
            raise InvalidInput("since: must not be after until")
        conditions = [
            QuestionRow.module_id == self.module_id if self.module_id else None,
            QuestionRow.created_at >= self.since if self.since else None,
            QuestionRow.created_at < self.until if self.until else None,
            QuestionRow.primary_section_id == self.section_id if self.section_id else None,
            QuestionRow.out_of_scope == self.out_of_scope if self.out_of_scope is not None else None,
            QuestionRow.grounded == self.grounded if self.grounded is not None else None,
            QuestionRow.coverage == self.coverage if self.coverage is not None else None,
            QuestionRow.lti_context == self.lti_context if self.lti_context is not None else None,
        ]
        return query.where(*[c for c in conditions if c is not None])


def question_dict(
    row: QuestionRow, passages: list[PassageRow], tools: list[ToolCallRow], feedback: list[FeedbackRow]
) -> dict[str, Any]:
    """One question as analysts and exports see it (no embedding, no raw learner id: there is none)."""
    return {
        "question_id": row.id,
        "conversation_id": row.conversation_id,
        "learner": row.learner_id,
        "module_id": row.module_id,
        "module_version": row.module_version,
        "section_id": row.primary_section_id,
        "section_ids": row.section_ids,
        "text": row.text,
        "redactions": row.redactions,
        "style": row.style,
        "channel": row.channel,
        "engine": row.engine,
        "model": row.model,
        "prompt_version": row.prompt_version,
        "out_of_scope": row.out_of_scope,
        "coverage": row.coverage,
        "grounded": row.grounded,
        "unsupported_sentences": row.unsupported_sentences,
        "untraced_numbers": row.untraced_numbers,
        "answer": row.answer,
        "relevance": row.relevance,
        "latency_ms": row.latency_ms,
        "prompt_tokens": row.prompt_tokens,
        "completion_tokens": row.completion_tokens,
        "fallback_reason": row.fallback_reason,
        "created_at": row.created_at.isoformat(),
        "passages": [
            {"chunk_id": p.chunk_id, "section_id": p.section_id, "rank": p.rank, "score": p.score, "cited": p.cited}
            for p in sorted(passages, key=lambda p: p.rank)
        ],
        "tool_calls": [
            {
                "name": t.name,
                "arguments": t.arguments,
                "result": t.result,
                "error": t.error,
                "duration_ms": t.duration_ms,
            }
            for t in tools
        ],
        "feedback": [
            {"rating": f.rating, "comment": f.comment, "created_at": f.created_at.isoformat()} for f in feedback
        ],
        "read_as": row.read_as,  # last, as the newest fields: an export's earlier fields keep their places
        "lti_context": row.lti_context,
    }


def list_questions(
    engine: Engine, filters: Filters, *, limit: int, cursor: str | None
) -> tuple[list[dict], str | None]:
    """A page of questions, newest first; the cursor continues where the last page stopped."""
    query = filters.apply(select(QuestionRow)).order_by(QuestionRow.created_at.desc(), QuestionRow.id.desc())
    if cursor:
        created, question_id = decode_cursor(cursor)
        query = query.where(
            or_(QuestionRow.created_at < created, (QuestionRow.created_at == created) & (QuestionRow.id < question_id))
        )
    with Session(engine) as session:
        rows = list(session.exec(query.limit(limit + 1)).scalars())
        page, more = rows[:limit], len(rows) > limit
        items = _with_children(session, page)
    next_cursor = encode_cursor(page[-1].created_at, page[-1].id) if more and page else None
    return items, next_cursor


def count_questions(engine: Engine, filters: Filters) -> int:
    """How many questions match (one COUNT over the filter's indexes, for "21-40 of 134")."""
    with Session(engine) as session:
        return session.execute(filters.apply(select(func.count()).select_from(QuestionRow))).scalar_one()


def iter_questions(engine: Engine, filters: Filters, *, batch: int = 500) -> Iterator[dict[str, Any]]:
    """Every matching question, oldest first, in batches (for streamed exports)."""
    last: tuple[datetime, str] | None = None
    while True:
        query = filters.apply(select(QuestionRow)).order_by(QuestionRow.created_at, QuestionRow.id)
        if last is not None:
            query = query.where(
                or_(QuestionRow.created_at > last[0], (QuestionRow.created_at == last[0]) & (QuestionRow.id > last[1]))
            )
        with Session(engine) as session:
            rows = list(session.exec(query.limit(batch)).scalars())
            items = _with_children(session, rows)
        yield from items
        if len(rows) < batch:
            return
        last = (rows[-1].created_at, rows[-1].id)


def _with_children(session: Session, rows: list[QuestionRow]) -> list[dict[str, Any]]:
    ids = [r.id for r in rows]
    if not ids:
        return []
    passages: dict[str, list[PassageRow]] = {}
    for p in session.exec(select(PassageRow).where(PassageRow.question_id.in_(ids))).scalars():
        passages.setdefault(p.question_id, []).append(p)
    tools: dict[str, list[ToolCallRow]] = {}
    for t in session.exec(select(ToolCallRow).where(ToolCallRow.question_id.in_(ids))).scalars():
        tools.setdefault(t.question_id, []).append(t)
    feedback: dict[str, list[FeedbackRow]] = {}
    for f in session.exec(select(FeedbackRow).where(FeedbackRow.question_id.in_(ids))).scalars():
        feedback.setdefault(f.question_id, []).append(f)
    return [question_dict(r, passages.get(r.id, []), tools.get(r.id, []), feedback.get(r.id, [])) for r in rows]


def encode_cursor(created: datetime, question_id: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([created.isoformat(), question_id]).encode()).decode()


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        created, question_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        moment = datetime.fromisoformat(created)
        if moment.tzinfo is None:  # every cursor this API returns is zone-aware
            raise ValueError("naive time")
        return moment.astimezone(UTC), str(question_id)
    except (ValueError, TypeError, OverflowError) as exc:
        raise InvalidInput("cursor: not a cursor this API returned") from exc


def question_owner(engine: Engine, question_id: str) -> str | None:
    """The pseudonym of the learner who asked `question_id`, if it is logged."""
    with Session(engine) as session:
        return session.exec(select(QuestionRow.learner_id).where(QuestionRow.id == question_id)).scalar()


def erase_learner(engine: Engine, learner_key: str) -> int:
    """Delete every row of one learner (questions and their children, conversations, feedback); return questions.

    Under the learner's lock, so a signal writer on any replica either committed before (and its rows are
    deleted here) or checks the tombstone, set before this runs, after (and writes nothing).
    """
    with Session(engine) as session:
        lock_learners(session.connection(), [learner_key])
        ids = list(session.exec(select(QuestionRow.id).where(QuestionRow.learner_id == learner_key)).scalars())
        _delete_questions(session, ids)
        session.exec(delete(FeedbackRow).where(FeedbackRow.learner_id == learner_key))
        session.exec(delete(ConversationRow).where(ConversationRow.learner_id == learner_key))
        session.exec(delete(LearnerRow).where(LearnerRow.id == learner_key))
        session.commit()
    forget_deleted(engine)  # or the erased text stays readable in SQLite's write-ahead log
    return len(ids)


def purge_older_than(engine: Engine, age: timedelta, *, now: datetime) -> int:
    """Retention: delete questions (with their children) older than `age`; return how many."""
    cutoff = now - age
    with Session(engine) as session:
        ids = list(session.exec(select(QuestionRow.id).where(QuestionRow.created_at < cutoff)).scalars())
        _delete_questions(session, ids)
        session.exec(delete(FeedbackRow).where(FeedbackRow.created_at < cutoff))
        session.commit()
    forget_deleted(engine)
    return len(ids)


def _delete_questions(session: Session, ids: list[str]) -> None:
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        for table in (PassageRow, ToolCallRow, FeedbackRow):
            session.exec(delete(table).where(table.question_id.in_(part)))
        session.exec(delete(QuestionRow).where(QuestionRow.id.in_(part)))
