"""The analyst API behind the dashboard, against known rows in real SQLite and PostgreSQL: aggregates, cohort
hiding, buckets in UTC, filters, paging, the token, the typed contract, and the page and its assets."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, event, text
from sqlmodel import Session

from mentor.api import create_app
from mentor.db import make_engine
from mentor.signals.queries import Filters
from mentor.signals.schema import migrate
from mentor.signals.summary import summarize
from mentor.signals.tables import (
    ConversationRow,
    FeedbackRow,
    LearnerRow,
    PassageRow,
    QuestionRow,
    ToolCallRow,
)

from .conftest import MODULE_ID, make_settings

PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
TOKEN = "dashboard-analyst-token-of-at-least-32-bytes"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MONDAY = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
ZERO, PRECISION, SCALING = "ref-parallelism-zero", "ref-mixed-precision", "ref-scaling-laws"


def meaning(k: int, wobble: int = 0) -> bytes:
    """A unit vector near axis k (cosine about 0.95 to any other wobble of the same k, about 0 across k)."""
    vector = np.zeros(384, dtype=np.float32)
    vector[k] = 1.0
    vector[100 + k * 10 + wobble] = 0.3
    return (vector / np.linalg.norm(vector)).astype(np.float32).tobytes()


@dataclass
class Q:
    """A question row to seed, with what hangs off it."""

    learner: str
    at: datetime
    section: str | None
    text: str = "what does ZeRO stage 2 shard?"
    vector: int = 3
    grounded: bool = True
    prompt: str | None = None
    fallback: str | None = None
    tools: tuple[str, ...] = ()
    rating: str | None = None
    module: str = MODULE_ID
    chunk: str = "c0"


# min_cohort is 5. What each panel must show or hide, by construction:
KNOWN = (
    # ZeRO: five learners on Monday (a shown cell), two more on Tuesday (a hidden cell); all seven rate and use the
    # memory calculator; prompt v1; the LLM fell back for five of them.
    [
        Q(
            f"z{i}",
            MONDAY + timedelta(minutes=i),
            ZERO,
            prompt="v1",
            fallback="connection",
            tools=("training_memory",),
            rating="up" if i < 4 else "down",
            vector=3,
            text=f"what does ZeRO stage {1 + i % 2} shard?",
        )
        for i in range(5)
    ]
    + [
        Q(f"z{i}", MONDAY + timedelta(days=1, minutes=i), ZERO, prompt="v1", tools=("training_memory",), vector=3)
        for i in range(5, 7)
    ]
    # Mixed precision: three learners the next Monday (hidden everywhere), one quantized_size call, one timeout.
    + [
        Q(
            f"p{i}",
            MONDAY + timedelta(days=7, hours=i),
            PRECISION,
            text="why bf16?",
            vector=4,
            tools=("quantized_size",) if i == 0 else (),
            fallback="timeout" if i == 0 else None,
            rating="down" if i == 0 else None,
        )
        for i in range(3)
    ]
    # Not covered: six learners ask about bread (one group), one about football (a group of one: hidden).
    + [
        Q(
            f"b{i}",
            MONDAY + timedelta(days=1, hours=2, minutes=i),
            None,
            text=["how do I bake bread?", "how to bake sourdough bread?", "how do I bake bread?"][i % 3],
            vector=7,
            grounded=False,
        )
        for i in range(6)
    ]
    + [Q("f0", MONDAY + timedelta(days=1, hours=3), None, text="who won the football?", vector=9, grounded=False)]
)


def seed(engine, questions: list[Q]) -> list[str]:
    """Write the rows as the signal writer would; return the question ids in order."""
    ids = []
    with Session(engine) as session:
        learners = sorted({q.learner for q in questions})
        session.add_all(LearnerRow(id=learner, first_seen=MONDAY, last_seen=MONDAY) for learner in learners)
        session.flush()  # the tables have foreign keys but no relationships: the session does not order inserts
        session.add_all(
            ConversationRow(id=f"conv-{learner}", learner_id=learner, module_id=MODULE_ID, started_at=MONDAY)
            for learner in learners
        )
        session.flush()
        for q in questions:
            qid = uuid.uuid4().hex
            ids.append(qid)
            session.add(
                QuestionRow(
                    id=qid,
                    conversation_id=f"conv-{q.learner}",
                    learner_id=q.learner,
                    module_id=q.module,
                    module_version="v-test",
                    primary_section_id=q.section,
                    section_ids=[q.section] if q.section else [],
                    text=q.text,
                    style="explain",
                    engine="extractive",
                    prompt_version=q.prompt,
                    out_of_scope=q.section is None,
                    grounded=q.grounded,
                    answer=f"An answer about {q.section} [1].",
                    relevance=0.5,
                    latency_ms=12.0,
                    fallback_reason=q.fallback,
                    embedding=meaning(q.vector, len(ids) % 5),
                    created_at=q.at,
                )
            )
            session.flush()
            if q.section:
                session.add(
                    PassageRow(
                        question_id=qid,
                        chunk_id=q.chunk,
                        section_id=q.section,
                        rank=1,
                        score=0.03,
                        dense_similarity=0.6,
                        cited=True,
                    )
                )
            for name in q.tools:
                session.add(
                    ToolCallRow(
                        question_id=qid,
                        name=name,
                        arguments={"params": "7B"},
                        result={"total_bytes": 1},
                        duration_ms=0.2,
                    )
                )
            if q.rating:
                session.add(
                    FeedbackRow(
                        id=uuid.uuid4().hex, question_id=qid, learner_id=q.learner, rating=q.rating, created_at=q.at
                    )
                )
        session.commit()
    return ids


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request, tmp_path) -> Iterator:
    """An empty, migrated database; PostgreSQL's session runs in New York time, which must not shift a UTC day."""
    if request.param == "sqlite":
        engine = make_engine(f"sqlite:///{tmp_path / 'dashboard.db'}")
        migrate(engine)
        yield engine
        engine.dispose()
        return
    schema = f"mentor_dash_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f"CREATE SCHEMA {schema}"))
    engine = make_engine(f"{PG}?options=-csearch_path%3D{schema}%20-ctimezone%3DAmerica/New_York")
    migrate(engine)
    yield engine
    engine.dispose()
    with admin.connect() as connection:
        connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
    admin.dispose()


def analyst_client(runtime, tmp_path, engine, **settings) -> TestClient:
    config = make_settings(tmp_path, analyst_token=TOKEN, **settings)
    rt = replace(runtime, settings=config, database=engine, analyst_token=TOKEN)
    return TestClient(create_app(config, runtime=rt))


def rows_by(items: list[dict], key: str) -> dict:
    return {item[key]: item for item in items}


EXPECTED_HIDDEN = {
    "questions_per_section": 2,  # ZERO on Tuesday (2 learners), PRECISION on 03-10 (3)
    "heatmap": 1,  # PRECISION's row total
    "content_gaps": 1,  # football
    "most_asked": 1,  # PRECISION
    "feedback_by_section": 1,  # PRECISION: one rater
    "feedback_by_prompt_version": 1,  # no prompt: one rater
    "tool_usage": 1,  # quantized_size
    "fallback_reasons": 1,  # timeout
}


def test_summary_aggregates_known_rows_and_hides_small_groups(database) -> None:
    seed(database, KNOWN)
    s = summarize(database, Filters(), bucket="day", min_cohort=5)
    assert (s["questions"], s["learners"], s["out_of_scope_questions"]) == (17, 17, 7)
    assert (s["out_of_scope_share"], s["grounded_share"]) == (round(7 / 17, 4), round(10 / 17, 4))
    assert s["questions_per_section"] == [
        {"bucket": "2025-03-03", "section_id": ZERO, "questions": 5, "learners": 5},
        {"bucket": "2025-03-04", "section_id": "(out of scope)", "questions": 7, "learners": 7},
    ]
    heat = s["heatmap"]
    assert heat["buckets"] == [f"2025-03-{d:02d}" for d in range(3, 11)] and heat["omitted_buckets"] == 0
    rows = rows_by(heat["rows"], "section_id")
    assert list(rows) == [PRECISION, ZERO, "(out of scope)"]  # no module sections given: seen ones, then the gap
    assert rows[ZERO]["counts"] == [5, None, 0, 0, 0, 0, 0, 0] and rows[ZERO]["questions"] == 7
    assert rows[PRECISION]["counts"] == [0] * 7 + [None] and rows[PRECISION]["questions"] is None
    assert rows["(out of scope)"]["counts"] == [0, 7, 0, 0, 0, 0, 0, 0]
    (gap,) = s["content_gaps"]
    assert gap == {
        "example": "how do I bake bread?",
        "examples": ["how do I bake bread?", "how to bake sourdough bread?"],
        "questions": 6,
        "learners": 6,
        "sections": [],
    }
    (asked,) = s["most_asked"]
    assert asked["example"] == "what does ZeRO stage 2 shard?" and (asked["questions"], asked["learners"]) == (7, 7)
    assert asked["examples"] == ["what does ZeRO stage 2 shard?", "what does ZeRO stage 1 shard?"]
    assert asked["sections"] == [ZERO] and s["clustered"] == 17
    assert s["feedback_by_section"] == [{"section_id": ZERO, "up": 4, "down": 1, "learners": 5}]
    assert s["feedback_by_prompt_version"] == [{"prompt_version": "v1", "up": 4, "down": 1, "learners": 5}]
    assert s["tool_usage"] == [{"name": "training_memory", "calls": 7, "learners": 7}]
    assert s["fallback_reasons"] == [{"reason": "connection", "questions": 5, "share": round(5 / 17, 4), "learners": 5}]
    assert s["engine_mix"] == [{"engine": "extractive", "questions": 17, "share": 1.0, "learners": 17}]
    assert s["suppressed_by_panel"] == EXPECTED_HIDDEN and s["suppressed_groups"] == sum(EXPECTED_HIDDEN.values())

    weekly = summarize(database, Filters(), bucket="week", min_cohort=5)
    assert weekly["heatmap"]["buckets"] == ["2025-03-03", "2025-03-10"]
    weeks = rows_by(weekly["heatmap"]["rows"], "section_id")
    assert weeks[ZERO]["counts"] == [7, 0] and weeks[PRECISION]["counts"] == [0, None]
    assert weekly["questions_per_section"] == [
        {"bucket": "2025-03-03", "section_id": "(out of scope)", "questions": 7, "learners": 7},
        {"bucket": "2025-03-03", "section_id": ZERO, "questions": 7, "learners": 7},
    ]


def test_a_small_cohort_hides_the_totals_too(database) -> None:
    seed(database, KNOWN[:3])
    s = summarize(database, Filters(), bucket="day", min_cohort=5)
    assert s["questions"] is s["learners"] is s["grounded_share"] is s["out_of_scope_share"] is None
    assert s["most_asked"] == s["content_gaps"] == s["tool_usage"] == s["questions_per_section"] == []
    assert s["heatmap"]["rows"][0]["counts"] == [None] and s["suppressed_by_panel"]["totals"] == 1


def test_buckets_are_utc_days_and_mondays_whatever_the_session_zone(database) -> None:
    new_york = timezone(timedelta(hours=-5))
    late = datetime(2025, 3, 9, 21, 0, tzinfo=new_york)  # Monday 02:00 UTC; Sunday 22:00 in New York (EDT)
    seed(database, [Q("n0", late, ZERO), Q("n1", datetime(2025, 3, 9, 12, tzinfo=UTC), ZERO)])
    daily = summarize(database, Filters(), bucket="day", min_cohort=1)
    assert [r["bucket"] for r in daily["questions_per_section"]] == ["2025-03-09", "2025-03-10"]
    weekly = summarize(database, Filters(), bucket="week", min_cohort=1)
    assert [r["bucket"] for r in weekly["questions_per_section"]] == ["2025-03-03", "2025-03-10"]


def capture(engine, action) -> list[str]:
    """The SQL statements `action` sends to `engine`."""
    seen: list[str] = []

    def record(_connection, _cursor, statement, *_args) -> None:
        seen.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        action()
    finally:
        event.remove(engine, "before_cursor_execute", record)
    return seen


def test_the_summary_reads_no_answers_and_a_fixed_number_of_queries(database) -> None:
    """A polled summary costs the same queries at any size, and only the grouping sample reads question rows."""

    seed(database, KNOWN)
    small = capture(database, lambda: summarize(database, Filters(), bucket="week", min_cohort=5, sample=4))
    seed(database, [replace(q, learner=f"{q.learner}-again") for q in KNOWN])
    big = capture(database, lambda: summarize(database, Filters(), bucket="week", min_cohort=5, sample=4))
    assert len(small) == len(big) <= 12
    assert not any("questions.answer" in sql for sql in big)
    reading_rows = [sql for sql in big if "questions.embedding" in sql]
    assert len(reading_rows) == 2 and all("LIMIT" in sql.upper() for sql in reading_rows)
    assert summarize(database, Filters(), bucket="week", min_cohort=5, sample=4)["clustered"] == 8


# ---------------------------------------------------------------------------------------------- over HTTP


@pytest.fixture
def analyst(runtime, tmp_path) -> Iterator[tuple[TestClient, list[str]]]:
    engine = make_engine(f"sqlite:///{tmp_path / 'analyst.db'}")
    migrate(engine)
    chunks = runtime.retriever.modules[MODULE_ID].chunks
    real = {ZERO: next(c.id for c in chunks if c.section_id == ZERO)}
    known = [replace(q, chunk=real.get(q.section, "gone-since")) for q in KNOWN]
    known.append(Q("o0", MONDAY, "elsewhere", module="X.other.01"))
    ids = seed(engine, known)
    with analyst_client(runtime, tmp_path, engine, min_cohort=5) as client:
        yield client, ids
    engine.dispose()


def test_the_summary_route_lists_the_module_sections_in_reading_order(analyst, runtime) -> None:
    client, _ = analyst
    response = client.get("/v1/signals/summary", params={"module_id": MODULE_ID, "bucket": "week"}, headers=AUTH)
    assert response.status_code == 200, response.text
    s = response.json()
    order = [section.id for section in runtime.modules[MODULE_ID].sections]
    rows = s["heatmap"]["rows"]
    assert [r["section_id"] for r in rows] == [*order, "(out of scope)"]
    assert [r["title"] for r in rows[: len(order)]] == [
        section.title for section in runtime.modules[MODULE_ID].sections
    ]
    quiet = rows_by(rows, "section_id")["overview"]
    assert quiet["counts"] == [0, 0] and quiet["questions"] == 0  # nobody asked: zero, not hidden
    assert s["questions"] == 17  # the other module's question is filtered out
    everything = client.get("/v1/signals/summary", headers=AUTH).json()
    assert everything["learners"] == 18 and "elsewhere" in [r["section_id"] for r in everything["heatmap"]["rows"]]


def test_the_summary_names_the_setting_that_hides_small_groups(analyst, monkeypatch) -> None:
    """What would show the hidden groups: the dashboard quotes the setting, so it must be the one that sets them."""
    from mentor.settings import Settings

    client, _ = analyst
    s = client.get("/v1/signals/summary", headers=AUTH).json()
    assert s["min_cohort"] == 5 and s["suppressed_groups"] > 0
    assert s["min_cohort_setting"] == "MENTOR_MIN_COHORT"
    monkeypatch.setenv(s["min_cohort_setting"], "2")
    assert Settings().min_cohort == 2


def test_filters_by_module_and_utc_dates(analyst) -> None:
    client, _ = analyst

    def total(**params: str) -> int:
        response = client.get("/v1/signals/questions", params=params | {"limit": 1}, headers=AUTH)
        assert response.status_code == 200, response.text
        return response.json()["total"]

    assert total() == 18 and total(module_id=MODULE_ID) == 17 and total(module_id="X.other.01") == 1
    assert total(since="2025-03-10") == 3  # PRECISION, the Monday after
    assert total(until="2025-03-04", module_id=MODULE_ID) == 5  # the five ZERO questions of the first Monday
    assert total(since="2025-03-04", until="2025-03-05") == 2 + 7
    assert total(section_id=ZERO) == 7 and total(out_of_scope="true") == 7 and total(grounded="false") == 7
    later = client.get("/v1/signals/summary", params={"since": "2025-03-10"}, headers=AUTH).json()
    assert later["questions"] is None and later["heatmap"]["buckets"] == ["2025-03-10"]  # 3 learners: hidden
    backwards = client.get("/v1/signals/summary", params={"since": "2025-03-10", "until": "2025-03-01"}, headers=AUTH)
    assert backwards.status_code == 422


def test_question_pages_carry_the_total_and_the_cited_passages(analyst, runtime) -> None:
    client, ids = analyst
    seen, cursor, totals = [], None, set()
    while True:
        page = client.get("/v1/signals/questions", params={"limit": 5, "cursor": cursor}, headers=AUTH).json()
        seen += [q["question_id"] for q in page["items"]]
        totals.add(page["total"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == 18 and set(seen) == set(ids) and totals == {18}
    items = client.get("/v1/signals/questions", params={"section_id": ZERO, "limit": 50}, headers=AUTH).json()["items"]
    chunk = {c.id: c for c in runtime.retriever.modules[MODULE_ID].chunks}[items[0]["passages"][0]["chunk_id"]]
    passage = items[0]["passages"][0]
    assert passage["cited"] and passage["text"] == chunk.text and passage["section_title"] == chunk.section_title
    assert {t["name"] for q in items for t in q["tool_calls"]} == {"training_memory"}
    assert sorted(f["rating"] for q in items for f in q["feedback"]) == ["down", "up", "up", "up", "up"]
    gone = client.get("/v1/signals/questions", params={"section_id": PRECISION}, headers=AUTH).json()["items"]
    assert gone[0]["passages"][0]["text"] is None  # a passage the served module no longer has


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}])
def test_the_analyst_routes_need_the_token_but_the_page_does_not(analyst, headers) -> None:
    client, _ = analyst
    for path in ("/v1/signals/summary", "/v1/signals/questions", "/v1/signals/export?format=csv"):
        response = client.get(path, headers=headers)
        assert response.status_code == 401 and response.json()["error"] == "unauthorized", path
    assert client.delete("/v1/learners/z0", headers=headers).status_code == 401
    page = client.get("/dashboard", headers=headers)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")


def test_the_page_has_no_inline_script_and_serves_its_assets(analyst) -> None:
    client, _ = analyst
    page = client.get("/dashboard")
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
    assert page.headers["cache-control"] == "no-store"
    html = page.text
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html) and not re.search(r"\son[a-z]+=", html)
    assets = re.findall(r'(?:src|href)="(/dashboard/assets/[^"]+)"', html)
    assert sorted(a.split("?")[0] for a in assets) == [
        "/dashboard/assets/dashboard.css",
        "/dashboard/assets/dashboard.js",
    ]
    for asset in assets:
        response = client.get(asset)
        assert response.status_code == 200 and response.headers["cache-control"] == "public, max-age=3600"
        assert re.fullmatch(r".*\?v=[0-9a-f]{12}", asset)  # named by content: a release is fetched at once
    assert client.get("/dashboard/assets/dashboard.js").headers["content-type"].startswith("text/javascript")
    for missing in ("/dashboard/assets/dashboard.html", "/dashboard/assets/..%2Fsettings.py", "/dashboard/assets/x.js"):
        assert client.get(missing).status_code == 404, missing
    script = client.get("/dashboard/assets/dashboard.js").text
    assert "innerHTML" not in script and "localStorage" not in script and "sessionStorage" in script


def test_the_openapi_document_types_the_analyst_responses(analyst) -> None:
    client, _ = analyst
    document = client.get("/openapi.json").json()
    schemas = document["components"]["schemas"]

    def response_schema(path: str) -> str:
        return document["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]

    assert response_schema("/v1/signals/summary") == "#/components/schemas/SignalSummary"
    assert response_schema("/v1/signals/questions") == "#/components/schemas/QuestionPage"
    summary = schemas["SignalSummary"]["properties"]
    for field in (
        "heatmap",
        "content_gaps",
        "most_asked",
        "feedback_by_section",
        "feedback_by_prompt_version",
        "tool_usage",
        "grounded_share",
        "fallback_reasons",
        "suppressed_groups",
        "suppressed_by_panel",
    ):
        assert field in summary, field
    assert {"Heatmap", "HeatmapRow", "QuestionGroup", "LoggedQuestion", "LoggedPassage"} <= set(schemas)
    assert not any(path.startswith("/dashboard") for path in document["paths"])
