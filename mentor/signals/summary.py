"""The analyst's summary: where learners ask, where the module falls short, and what is asked most.

A dashboard polls this, so every count is a GROUP BY in the database (a handful of small queries whatever the
log's size); only the grouping by meaning reads rows, and only the most recent `sample` of them.

Every group is reported only when at least `min_cohort` distinct learners are in it; smaller groups are
counted as suppressed (per panel and in all), never shown, so no aggregate points at one person.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

import numpy as np
from sqlalchemy import Engine, case, distinct, func, select
from sqlalchemy.sql.elements import ColumnElement
from sqlmodel import Session

from mentor.record import ABANDONED
from mentor.signals.queries import Filters
from mentor.signals.tables import FeedbackRow, QuestionRow, ToolCallRow

CLUSTER_SIMILARITY = 0.75  # cosine of all-MiniLM-L6-v2 vectors above which two questions ask the same thing
# Grouping by meaning compares each question with every group so far: for 500 recent questions, all of them
# apart, that is 12 ms (measured on this 2-core box); and what learners ask now is what the panel is for.
CLUSTER_SAMPLE = 500
# A heatmap wider than a quarter of days is unreadable; older columns are dropped (and counted) past this.
MAX_BUCKETS = 92
OUT_OF_SCOPE = "(out of scope)"
NO_PROMPT = "(none)"


@dataclass(frozen=True, slots=True)
class SectionRef:
    """A section in the module's reading order, as the heatmap lists it."""

    module_id: str
    section_id: str
    title: str
    level: int = 2


def bucket_of(engine: Engine, bucket: str) -> ColumnElement:
    """SQL for the UTC day (or Monday of the week) of a question, as 'YYYY-MM-DD', in this database's dialect.

    SQLite keeps the UTC time as text, PostgreSQL as timestamptz (read in UTC, whatever the session's zone).
    """
    if engine.dialect.name == "sqlite":
        # 'weekday 0' moves forward to Sunday (or stays on one); 6 days back is that week's Monday.
        modifiers = ("weekday 0", "-6 days") if bucket == "week" else ()
        return func.date(QuestionRow.created_at, *modifiers)
    in_utc = func.timezone("UTC", QuestionRow.created_at)
    return func.to_char(func.date_trunc(bucket, in_utc), "YYYY-MM-DD")


class Cohorts:
    """Counts per group with the distinct learners behind each, reported only at or above the cohort size."""

    def __init__(self, min_cohort: int) -> None:
        self.min_cohort = min_cohort
        self.by_panel: Counter[str] = Counter()

    def shown(self, panel: str, learners: int) -> bool:
        """Whether a group of `learners` may be shown; a hidden one is counted against `panel`."""
        if learners >= self.min_cohort:
            return True
        self.by_panel[panel] += 1
        return False


def summarize(
    engine: Engine,
    filters: Filters,
    *,
    bucket: str,
    min_cohort: int,
    sections: Sequence[SectionRef] = (),
    embed: Callable[[str], np.ndarray] | None = None,
    top: int = 10,
    sample: int = CLUSTER_SAMPLE,
) -> dict[str, Any]:
    """Aggregate the filtered questions for analysts; `sections` (reading order) give the heatmap its rows."""
    cohorts = Cohorts(min_cohort)
    section_key = func.coalesce(QuestionRow.primary_section_id, OUT_OF_SCOPE)
    learners = func.count(distinct(QuestionRow.learner_id))
    with Session(engine) as session:

        def grouped(*columns: Any, joined: Any = None, where: Any = None) -> list[Any]:
            """(columns..., questions or rows, distinct learners) per group of the filtered questions."""
            query = select(*columns, func.count(), learners)
            if joined is not None:
                query = query.select_from(joined).join(QuestionRow, joined.question_id == QuestionRow.id)
            query = filters.apply(query)
            if where is not None:
                query = query.where(where)
            return list(session.execute(query.group_by(*columns)).all())

        total, people, out_of_scope, grounded, abandoned = session.execute(
            filters.apply(
                select(
                    func.count(),
                    learners,
                    func.coalesce(func.sum(case((QuestionRow.out_of_scope, 1), else_=0)), 0),
                    func.coalesce(func.sum(case((QuestionRow.grounded, 1), else_=0)), 0),
                    func.coalesce(func.sum(case((QuestionRow.fallback_reason == ABANDONED, 1), else_=0)), 0),
                )
            )
        ).one()
        when = bucket_of(engine, bucket).label("bucket")
        cells = grouped(when, section_key)
        per_section = grouped(section_key)
        up = func.coalesce(func.sum(case((FeedbackRow.rating == "up", 1), else_=0)), 0)
        down = func.coalesce(func.sum(case((FeedbackRow.rating == "down", 1), else_=0)), 0)
        raters = func.count(distinct(FeedbackRow.learner_id))
        feedback_sections = _feedback(session, filters, section_key, up, down, raters)
        feedback_prompts = _feedback(
            session, filters, func.coalesce(QuestionRow.prompt_version, NO_PROMPT), up, down, raters
        )
        tools = grouped(ToolCallRow.name, joined=ToolCallRow)
        engines = grouped(QuestionRow.engine)
        fallbacks = grouped(QuestionRow.fallback_reason, where=QuestionRow.fallback_reason.is_not(None))
        gaps_sample = _recent(session, filters, out_of_scope=True, limit=sample)
        asked_sample = _recent(session, filters, out_of_scope=False, limit=sample)

    overall_ok = people >= min_cohort
    if total and not overall_ok:
        cohorts.by_panel["totals"] += 1

    questions_per_section = []
    for day, section_id, count, who in sorted(cells, key=lambda c: (c[0], c[1])):
        if cohorts.shown("questions_per_section", who):
            questions_per_section.append({"bucket": day, "section_id": section_id, "questions": count, "learners": who})

    def share(count: int, of: int = total) -> float | None:
        return round(count / of, 4) if of and overall_ok else None

    def rated(rows: list[Any], name: str, panel: str) -> list[dict[str, Any]]:
        return [
            {name: key, "up": int(ups), "down": int(downs), "learners": who}
            for key, ups, downs, who in rows
            if cohorts.shown(panel, who)
        ]

    report = {
        "questions": total if overall_ok else None,
        "learners": people if overall_ok else None,
        "min_cohort": min_cohort,
        "bucket": bucket,
        "questions_per_section": questions_per_section,
        "heatmap": heatmap(cells, per_section, sections, bucket=bucket, min_cohort=min_cohort),
        "out_of_scope_questions": int(out_of_scope) if overall_ok else None,
        "out_of_scope_share": share(int(out_of_scope)),
        "content_gaps": clusters(gaps_sample, cohorts, "content_gaps", embed, top) if overall_ok else [],
        "feedback_by_section": sorted(
            rated(feedback_sections, "section_id", "feedback_by_section"), key=lambda r: -(r["up"] + r["down"])
        ),
        "feedback_by_prompt_version": rated(feedback_prompts, "prompt_version", "feedback_by_prompt_version"),
        "tool_usage": sorted(
            (
                {"name": name, "calls": calls, "learners": who}
                for name, calls, who in tools
                if cohorts.shown("tool_usage", who)
            ),
            key=lambda r: (-r["calls"], r["name"]),
        ),
        # A stream the learner left was never checked: the share is of the answers that were finished.
        "grounded_share": share(int(grounded), of=total - int(abandoned)),
        "fallback_reasons": sorted(
            (
                {"reason": reason, "questions": count, "share": share(count), "learners": who}
                for reason, count, who in fallbacks
                if cohorts.shown("fallback_reasons", who)
            ),
            key=lambda r: -r["questions"],
        ),
        "engine_mix": [
            {"engine": name, "questions": count, "share": round(count / total, 4), "learners": who}
            for name, count, who in sorted(engines, key=lambda e: -e[1])
            if cohorts.shown("engine_mix", who)
        ],
        "most_asked": clusters(asked_sample, cohorts, "most_asked", embed, top) if overall_ok else [],
        "clustered": len(gaps_sample) + len(asked_sample),
        "note": f"groups with fewer than {min_cohort} distinct learners are not shown (suppressed_groups counts them)",
    }
    # Counted once every panel above has been reported (each report counts what it hides).
    cohorts.by_panel["heatmap"] += heatmap_hidden(per_section, min_cohort)
    hidden = {panel: count for panel, count in cohorts.by_panel.items() if count}
    return report | {"suppressed_groups": sum(hidden.values()), "suppressed_by_panel": hidden}


def _feedback(session: Session, filters: Filters, key: Any, up: Any, down: Any, raters: Any) -> list[Any]:
    """Votes per `key` of the rated question; the cohort is the learners who voted."""
    query = select(key, up, down, raters).select_from(FeedbackRow)
    query = query.join(QuestionRow, FeedbackRow.question_id == QuestionRow.id)
    return list(session.execute(filters.apply(query).group_by(key)).all())


def _recent(session: Session, filters: Filters, *, out_of_scope: bool, limit: int) -> list[Any]:
    """The newest `limit` questions of one kind, with only the columns grouping needs (no answers).

    The kind is tested through coalesce() so that SQLite walks the created_at index newest first and stops after
    `limit` rows; on the out_of_scope index it sorted every question of the kind (280 ms instead of 2 ms at 20,000).
    """
    query = select(
        QuestionRow.text, QuestionRow.learner_id, QuestionRow.primary_section_id, QuestionRow.embedding
    ).where(func.coalesce(QuestionRow.out_of_scope, out_of_scope) == out_of_scope)
    query = filters.apply(query).order_by(QuestionRow.created_at.desc()).limit(limit)
    return list(session.execute(query).all())


def heatmap(
    cells: list[Any], per_section: list[Any], sections: Sequence[SectionRef], *, bucket: str, min_cohort: int
) -> dict[str, Any]:
    """Sections (reading order, then any the module no longer has, then out of scope) x every bucket in the span.

    A cell is its count, 0 when nobody asked, or None when fewer than `min_cohort` learners asked (hidden).
    """
    days = sorted({day for day, *_ in cells})
    columns = _span(days[0], days[-1], bucket) if days else []
    omitted = max(len(columns) - MAX_BUCKETS, 0)
    columns = columns[omitted:]
    position = {day: i for i, day in enumerate(columns)}
    values: dict[str, list[int | None]] = defaultdict(lambda: [0] * len(columns))
    for day, section_id, count, who in cells:
        if day in position:
            values[section_id][position[day]] = count if who >= min_cohort else None
    totals = {section_id: (count, who) for section_id, count, who in per_section}
    rows = [(s.module_id, s.section_id, s.title, s.level) for s in sections]
    known = {s.section_id for s in sections}
    rows += [(None, sid, sid, 2) for sid in sorted(totals) if sid not in known and sid != OUT_OF_SCOPE]
    if OUT_OF_SCOPE in totals:
        rows.append((None, OUT_OF_SCOPE, "Not covered by the module", 1))
    out = []
    for module_id, section_id, title, level in rows:
        count, who = totals.get(section_id, (0, 0))
        out.append(
            {
                "module_id": module_id,
                "section_id": section_id,
                "title": title,
                "level": level,
                "counts": values[section_id] if section_id in values else [0] * len(columns),
                "questions": count if who >= min_cohort or count == 0 else None,
            }
        )
    return {"bucket": bucket, "buckets": columns, "omitted_buckets": omitted, "rows": out}


def heatmap_hidden(per_section: list[Any], min_cohort: int) -> int:
    """Row totals the heatmap hides (its cells are the questions_per_section groups, counted there)."""
    return sum(1 for _, _, who in per_section if who < min_cohort)


def _span(first: str, last: str, bucket: str) -> list[str]:
    step = timedelta(days=7 if bucket == "week" else 1)
    day, end, out = date.fromisoformat(first), date.fromisoformat(last), []
    while day <= end:
        out.append(day.isoformat())
        day += step
    return out


def clusters(
    rows: list[Any], cohorts: Cohorts, panel: str, embed: Callable[[str], np.ndarray] | None, top: int
) -> list[dict[str, Any]]:
    """Group questions by meaning (greedy, by cosine to each group's first question); biggest first.

    `rows` are (text, learner_id, primary_section_id, embedding), newest first; each group's centre is its
    oldest question in the sample.
    """
    centres: np.ndarray | None = None  # row i: the vector of group i's first question
    groups: list[list[Any]] = []
    for row in reversed(rows):
        vector = _vector(row.text, row.embedding, embed)
        if vector is None:
            continue
        if centres is None:
            centres = np.empty((len(rows), vector.shape[0]), dtype=np.float32)
        close = np.flatnonzero(centres[: len(groups)] @ vector >= CLUSTER_SIMILARITY)
        if close.size:
            groups[close[0]].append(row)  # the first group it is close to, as a reader going down the list would
        else:
            centres[len(groups)] = vector
            groups.append([row])
    reported = []
    for members in groups:
        who = len({m.learner_id for m in members})
        if not cohorts.shown(panel, who):
            continue
        texts = [text for text, _ in Counter(m.text for m in members).most_common(3)]
        sections = Counter(m.primary_section_id for m in members if m.primary_section_id).most_common(3)
        reported.append(
            {
                "example": texts[0],
                "examples": texts,
                "questions": len(members),
                "learners": who,
                "sections": [s for s, _ in sections],
            }
        )
    return sorted(reported, key=lambda r: -r["questions"])[:top]


def _vector(text: str, embedding: bytes | None, embed: Callable[[str], np.ndarray] | None) -> np.ndarray | None:
    if embedding:
        return np.frombuffer(embedding, dtype=np.float32)
    return embed(text) if embed is not None else None  # a row stored without its reading's vector
