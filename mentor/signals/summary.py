"""The analyst's summary: where learners ask, where the module falls short, and what is asked most.

Every group is reported only when at least `min_cohort` distinct learners are in it; smaller groups are
counted as suppressed, never shown, so no aggregate points at one person.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Hashable
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy import Engine, select
from sqlmodel import Session

from mentor.signals.queries import Filters
from mentor.signals.tables import FeedbackRow, QuestionRow, ToolCallRow

CLUSTER_SIMILARITY = 0.75  # cosine of all-MiniLM-L6-v2 vectors above which two questions ask the same thing


def bucket_start(moment: datetime, bucket: str) -> str:
    """The day (or the Monday of the week) a moment falls in."""
    day = moment.date()
    return (day - timedelta(days=day.weekday()) if bucket == "week" else day).isoformat()


class Cohorts:
    """Counts per group with the distinct learners behind each, reported only above the cohort size."""

    def __init__(self, min_cohort: int) -> None:
        self.min_cohort = min_cohort
        self.suppressed = 0

    def report(self, groups: dict[Hashable, set[str]], value: Callable[[Hashable], dict[str, Any]]) -> list[dict]:
        rows = []
        for key, learners in groups.items():
            if len(learners) < self.min_cohort:
                self.suppressed += 1
                continue
            rows.append(value(key) | {"learners": len(learners)})
        return rows


def summarize(
    engine: Engine,
    filters: Filters,
    *,
    bucket: str,
    min_cohort: int,
    embed: Callable[[str], np.ndarray] | None = None,
    top: int = 10,
) -> dict[str, Any]:
    """Aggregate the filtered questions for analysts."""
    with Session(engine) as session:
        rows = list(session.exec(filters.apply(select(QuestionRow))).scalars())
        ids = [r.id for r in rows]
        tools = (
            list(
                session.exec(
                    select(ToolCallRow.question_id, ToolCallRow.name).where(ToolCallRow.question_id.in_(ids))
                ).all()
            )
            if ids
            else []
        )
        feedback = (
            list(session.exec(select(FeedbackRow).where(FeedbackRow.question_id.in_(ids))).scalars()) if ids else []
        )
    by_id = {r.id: r for r in rows}
    cohorts = Cohorts(min_cohort)

    per_section: dict[Hashable, set[str]] = defaultdict(set)
    per_section_count: Counter = Counter()
    for r in rows:
        key = (bucket_start(r.created_at, bucket), r.primary_section_id or "(out of scope)")
        per_section[key].add(r.learner_id)
        per_section_count[key] += 1
    questions_per_section = cohorts.report(
        per_section, lambda k: {"bucket": k[0], "section_id": k[1], "questions": per_section_count[k]}
    )

    def shares(key_of: Callable[[QuestionRow], Hashable], name: str) -> list[dict]:
        groups: dict[Hashable, set[str]] = defaultdict(set)
        counts: Counter = Counter()
        for r in rows:
            groups[key_of(r)].add(r.learner_id)
            counts[key_of(r)] += 1
        return cohorts.report(
            groups, lambda k: {name: k, "questions": counts[k], "share": round(counts[k] / len(rows), 4)}
        )

    def feedback_by(key_of: Callable[[QuestionRow], Hashable], name: str) -> list[dict]:
        groups: dict[Hashable, set[str]] = defaultdict(set)
        votes: dict[Hashable, Counter] = defaultdict(Counter)
        for f in feedback:
            key = key_of(by_id[f.question_id])
            groups[key].add(f.learner_id)
            votes[key][f.rating] += 1
        return cohorts.report(groups, lambda k: {name: k, "up": votes[k]["up"], "down": votes[k]["down"]})

    tool_groups: dict[Hashable, set[str]] = defaultdict(set)
    tool_counts: Counter = Counter()
    for question_id, name in tools:
        tool_groups[name].add(by_id[question_id].learner_id)
        tool_counts[name] += 1

    out_of_scope = [r for r in rows if r.out_of_scope]
    learners = {r.learner_id for r in rows}
    overall_ok = len(learners) >= min_cohort
    return {
        "questions": len(rows) if overall_ok else None,
        "learners": len(learners) if overall_ok else None,
        "min_cohort": min_cohort,
        "questions_per_section": sorted(questions_per_section, key=lambda r: (r["bucket"], r["section_id"])),
        "out_of_scope_share": round(len(out_of_scope) / len(rows), 4) if rows and overall_ok else None,
        "content_gaps": clusters(out_of_scope, cohorts, embed, top) if overall_ok else [],
        "feedback_by_section": feedback_by(lambda r: r.primary_section_id or "(out of scope)", "section_id"),
        "feedback_by_prompt_version": feedback_by(lambda r: r.prompt_version or "(none)", "prompt_version"),
        "tool_usage": cohorts.report(tool_groups, lambda k: {"name": k, "calls": tool_counts[k]}),
        "grounded_share": round(sum(r.grounded for r in rows) / len(rows), 4) if rows and overall_ok else None,
        "engine_mix": shares(lambda r: r.engine, "engine"),
        "most_asked": clusters([r for r in rows if not r.out_of_scope], cohorts, embed, top) if overall_ok else [],
        "suppressed_groups": cohorts.suppressed + (0 if overall_ok or not rows else 1),
        "note": f"groups with fewer than {min_cohort} distinct learners are not shown (suppressed_groups counts them)",
    }


def clusters(
    rows: list[QuestionRow], cohorts: Cohorts, embed: Callable[[str], np.ndarray] | None, top: int
) -> list[dict[str, Any]]:
    """Group questions by meaning (greedy, by cosine to each group's first question); biggest first."""
    groups: list[tuple[np.ndarray, list[QuestionRow]]] = []
    for row in sorted(rows, key=lambda r: r.created_at):
        vector = _vector(row, embed)
        if vector is None:
            continue
        for centre, members in groups:
            if float(centre @ vector) >= CLUSTER_SIMILARITY:
                members.append(row)
                break
        else:
            groups.append((vector, [row]))
    learners = {i: {m.learner_id for m in members} for i, (_, members) in enumerate(groups)}
    reported = cohorts.report(
        learners,
        lambda i: {
            "example": Counter(m.text for m in groups[i][1]).most_common(1)[0][0],
            "questions": len(groups[i][1]),
            "sections": [
                s for s, _ in Counter(m.primary_section_id for m in groups[i][1] if m.primary_section_id).most_common(3)
            ],
        },
    )
    return sorted(reported, key=lambda r: -r["questions"])[:top]


def _vector(row: QuestionRow, embed: Callable[[str], np.ndarray] | None) -> np.ndarray | None:
    if row.embedding:
        return np.frombuffer(row.embedding, dtype=np.float32)
    return embed(row.text) if embed is not None else None
