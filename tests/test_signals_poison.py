"""One record the database cannot take must not take any other with it: on SQLite and PostgreSQL, with and
without an outage. A NUL byte is sanitised when the record is built; a record the database still refuses is
isolated by writing its batch again record by record."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import replace

from sqlalchemy import create_engine, event, select, text
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from mentor.db import make_engine
from mentor.runtime import build_chat
from mentor.signals.records import storable
from mentor.signals.schema import migrate
from mentor.signals.tables import QuestionRow
from mentor.signals.writer import SignalWriter, write_records

from .conftest import make_settings
from .proxy import Proxy
from .test_signals import PG, ask, db_url  # noqa: F401 - db_url is the fixture: a SQLite file or a PG schema

POISON = "why does fp16\x00 need loss scaling?"
GOOD = ["what is ZeRO?", "int4 70B", "why bf16?", "tokens for 7B", "what is LoRA?", "what does ZeRO stage 2 shard?"]


def quiet_runtime(runtime, tmp_path, url, spool: str = "signals.spool"):
    """The session runtime with its own database and a writer that is not started yet (so a burst is one batch)."""
    config = make_settings(tmp_path, database_url=url, rate_limit_per_minute=10_000)
    engine = make_engine(url)
    writer = SignalWriter(engine, tmp_path / spool, embed=runtime.embedder.embed_query, retry_s=0.1)
    chat = build_chat(config, runtime.catalog, runtime.embedder, sink=writer)
    return replace(runtime, settings=config, database=engine, chat=chat, writer=writer)


def stored(engine) -> dict[str, str]:
    """Question id -> stored text."""
    with Session(engine) as session:
        return {row.id: row.text for row in session.exec(select(QuestionRow)).scalars()}


def rejected_lines(writer: SignalWriter) -> list[dict]:
    path = writer._spool.path.with_suffix(".rejected")
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def spool_of(runtime, tmp_path, questions: list[str]) -> tuple[list[dict], list[str]]:
    """The spool lines a writer leaves while its database is unreachable, and the asked question ids."""
    rt = quiet_runtime(runtime, tmp_path, "postgresql+psycopg://postgres@127.0.0.1:1/test", spool="down.spool")
    rt.writer.start()
    asked = [ask(rt, q, learner=f"s{i}")["question_id"] for i, q in enumerate(questions)]
    deadline = time.monotonic() + 15
    while rt.writer.spooled < len(questions) and time.monotonic() < deadline:
        time.sleep(0.05)
    rt.writer.stop()
    lines = [json.loads(line) for line in (tmp_path / "down.spool").read_text().splitlines()]
    assert [r["question_id"] for r in lines] == asked
    return lines, asked


def test_a_nul_byte_in_a_burst_of_eight_costs_no_record(db_url, tmp_path, runtime) -> None:  # noqa: F811
    rt = quiet_runtime(runtime, tmp_path, db_url)
    migrate(rt.database)
    questions = [*GOOD[:3], POISON, *GOOD[3:], "what is FSDP?"]
    asked = [ask(rt, q, learner=f"b{i}")["question_id"] for i, q in enumerate(questions)]
    rt.writer.start()  # all eight are queued: one batch, one transaction
    assert rt.writer.flush(20)
    rows = stored(rt.database)
    assert set(rows) == set(asked) and len(rows) == 8  # 0 lost
    assert rows[asked[3]] == "why does fp16\ufffd need loss scaling?"  # the same on SQLite and PostgreSQL
    assert rt.writer.rejected == 0 and rejected_lines(rt.writer) == []
    rt.writer.stop()


def test_ten_good_records_and_a_poison_one_survive_an_outage(tmp_path, runtime) -> None:
    """PostgreSQL behind a proxy that goes down; the spool holds the poison record among ten good ones."""
    schema = f"mentor_poison_{uuid.uuid4().hex[:8]}"
    admin = create_engine(PG, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f"CREATE SCHEMA {schema}"))
    proxy = Proxy(5432)
    proxy.up()
    try:
        url = f"postgresql+psycopg://postgres@127.0.0.1:{proxy.port}/test?options=-csearch_path%3D{schema}"
        rt = quiet_runtime(runtime, tmp_path, url)
        migrate(rt.database)
        rt.writer.start()
        proxy.down()
        questions = [*GOOD, POISON, *GOOD[:4]]
        asked = [ask(rt, q, learner=f"o{i}")["question_id"] for i, q in enumerate(questions)]
        deadline = time.monotonic() + 15
        while rt.writer.spooled < 11 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert rt.writer.spooled >= 11 and rt.writer.flush(0.3) is False
        proxy.up()
        assert rt.writer.flush(30)
        rows = stored(rt.database)
        lost = set(asked) - set(rows)
        assert lost == set() and len(rows) == 11, f"{len(lost)} records lost"
        assert "\x00" not in rows[asked[6]] and rt.writer.rejected == 0 and rejected_lines(rt.writer) == []
        rt.writer.stop()
    finally:
        proxy.down()
        with admin.connect() as connection:
            connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


def test_a_spool_with_a_poison_record_is_replayed_whole(db_url, tmp_path, runtime) -> None:  # noqa: F811
    """Written while the database was unreachable, replayed by the next start into SQLite or PostgreSQL."""
    lines, asked = spool_of(runtime, tmp_path, [*GOOD, POISON, *GOOD[:4]])
    assert "\x00" not in json.dumps(lines)  # sanitised when built, so the spool holds what any database takes
    engine = make_engine(db_url)
    migrate(engine)
    writer = SignalWriter(engine, tmp_path / "down.spool").start()
    assert writer.flush(20)
    assert set(stored(engine)) == set(asked) and writer.rejected == 0
    writer.stop()


def test_a_record_the_database_refuses_is_set_aside_alone(db_url, tmp_path, runtime) -> None:  # noqa: F811
    """A record that violates a constraint in the middle of a replayed spool: the ten around it are written."""
    lines, asked = spool_of(runtime, tmp_path, GOOD + GOOD[:4])
    refused = lines[0] | {"question_id": uuid.uuid4().hex, "answer": None}  # answer is NOT NULL
    feedback = {
        "type": "feedback",
        "id": uuid.uuid4().hex,
        "question_id": asked[2],
        "learner_id": lines[2]["learner_id"],
        "rating": "up",
        "comment": None,
        "redactions": [],
        "created_at": lines[2]["created_at"],
    }
    spool = [*lines[:5], refused, *lines[5:], feedback]
    (tmp_path / "down.spool").write_text("".join(json.dumps(r) + "\n" for r in spool))
    engine = make_engine(db_url)
    migrate(engine)
    writer = SignalWriter(engine, tmp_path / "down.spool").start()
    assert writer.flush(20)
    assert set(stored(engine)) == set(asked)  # all ten, in spite of their neighbour
    assert [r["question_id"] for r in rejected_lines(writer)] == [refused["question_id"]] and writer.rejected == 1
    assert writer.written == 11  # ten questions and the feedback
    writer.stop()


def test_write_records_refuses_the_batch_and_each_record_alone(db_url, tmp_path, runtime) -> None:  # noqa: F811
    lines, asked = spool_of(runtime, tmp_path, GOOD[:3])
    engine = make_engine(db_url)
    migrate(engine)
    bad = lines[1] | {"answer": None}
    try:
        write_records(engine, [lines[0], bad, lines[2]])
        raise AssertionError("the database took a NULL answer")
    except IntegrityError:
        pass
    assert stored(engine) == {}  # one transaction: nothing of the batch went in
    write_records(engine, [lines[0]])
    write_records(engine, [lines[2]])
    assert set(stored(engine)) == {asked[0], asked[2]}


def test_an_outage_while_isolating_a_refused_record_rejects_nothing(tmp_path, runtime) -> None:
    """An outage in the middle of the record-by-record retry is an outage, not a refusal."""
    schema = f"mentor_poison_{uuid.uuid4().hex[:8]}"
    admin = create_engine(PG, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f"CREATE SCHEMA {schema}"))
    proxy = Proxy(5432)
    proxy.up()
    try:
        lines, asked = spool_of(runtime, tmp_path, GOOD + GOOD[:4])
        refused = lines[0] | {"question_id": uuid.uuid4().hex, "answer": None}
        (tmp_path / "down.spool").write_text("".join(json.dumps(r) + "\n" for r in [*lines[:5], refused, *lines[5:]]))
        engine = make_engine(
            f"postgresql+psycopg://postgres@127.0.0.1:{proxy.port}/test?options=-csearch_path%3D{schema}"
        )
        migrate(engine)
        state = {"refused": False, "cut": False}

        @event.listens_for(engine, "handle_error")
        def _refused(context) -> None:  # noqa: ANN001
            if isinstance(context.sqlalchemy_exception, IntegrityError):
                state["refused"] = True

        @event.listens_for(engine, "before_cursor_execute")
        def _cut(*_args) -> None:  # noqa: ANN002
            if state["refused"] and not state["cut"]:  # the first statement of the record-by-record retry
                state["cut"] = True
                proxy.down()

        writer = SignalWriter(engine, tmp_path / "down.spool", retry_s=0.1).start()
        deadline = time.monotonic() + 10
        while not state["cut"] and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        assert state["cut"] and writer.rejected == 0 and rejected_lines(writer) == []
        assert len((tmp_path / "down.spool").read_text().splitlines()) == 11  # all still waiting
        proxy.up()
        assert writer.flush(30)
        assert set(stored(engine)) == set(asked) and writer.rejected == 1
        writer.stop()
    finally:
        proxy.down()
        with admin.connect() as connection:
            connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


def test_storable_replaces_what_no_database_takes() -> None:
    record = {
        "text": "a\x00b",
        "arguments": {"k\x00": ["\ud800x", 1.5, float("nan")], "ok": "😀"},
        "relevance": 0.5,
    }
    assert storable(record) == {
        "text": "a\ufffdb",
        "arguments": {"k\ufffd": ["\ufffdx", 1.5, None], "ok": "😀"},
        "relevance": 0.5,
    }
