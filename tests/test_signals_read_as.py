"""The question as mentor read it (`questions.read_as`): logged redacted, shown to analysts, exported, migrated."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from dataclasses import replace
from datetime import datetime

from alembic import command
from fastapi.testclient import TestClient
from sqlalchemy import MetaData, Table, insert, select

from mentor.answer import ChatInput
from mentor.api import create_app
from mentor.db import make_engine
from mentor.signals.queries import Filters, list_questions
from mentor.signals.records import question_record
from mentor.signals.schema import alembic_config, migrate
from mentor.signals.tables import QuestionRow
from mentor.signals.writer import question_values

from .conftest import MODULE_ID
from .test_signals import TOKEN, db_url, signals_runtime  # noqa: F401

AUTH = {"Authorization": f"Bearer {TOKEN}"}
# Personal details in the asking clause itself, where the reader's reading keeps the words around them.
PII = {
    "email": "priya.raman@example.org",
    "phone": "+44 7700 900123",
    "card": "4111 1111 1111 1111",
}


def asked(rt, message: str, conversation: str | None = None):
    request = ChatInput(message=message, module_id=MODULE_ID, learner_id="reader", conversation_id=conversation)
    return asyncio.run(rt.chat.ask(request))


def stored(engine) -> dict[str, QuestionRow]:
    with engine.connect() as connection:
        return {row.text: row for row in connection.execute(select(QuestionRow.__table__)).all()}


def test_read_as_is_what_mentor_read_with_no_personal_detail(db_url, tmp_path, runtime) -> None:  # noqa: F811
    rt = signals_runtime(runtime, tmp_path, db_url)
    misspelled = "what does zero stgae 2 shrad?"
    with_details = (
        f"my email is {PII['email']}, call {PII['phone']}: whats pipline parallelism for a card {PII['card']}?"
    )
    asked(rt, misspelled)
    asked(rt, with_details)
    first = asked(rt, "int4 70B")
    asked(rt, "and int8?", conversation=first.conversation_id)
    asked(rt, "hi")
    assert rt.writer.flush()
    rows = stored(rt.database)
    assert rows[misspelled].read_as == "what does zero stage 2 shard?"  # spelling corrected
    assert rows["and int8?"].read_as.startswith("int4 70B") and "int8" in rows["and int8?"].read_as  # continued
    assert rows["hi"].read_as == ""  # read, and no question in it
    (details,) = [row for text, row in rows.items() if text.startswith("my email is")]
    assert "pipeline parallelism" in details.read_as
    for kind, value in PII.items():
        assert value not in details.text, kind
        assert value not in details.read_as and value.replace(" ", "") not in details.read_as.replace(" ", ""), kind
    rt.writer.stop()


def test_a_detail_the_reading_kept_is_redacted_like_the_text(runtime) -> None:
    """The reader reads a scrubbed copy; were a detail to reach its reading all the same (reshaped, or from the turn
    it continues), the record scrubs the reading with what it learned from the question."""
    answered = asyncio.run(
        runtime.chat.ask(ChatInput(message="my name is Jane Doe, jane.doe@example.com: what does ZeRO stage 2 shard?"))
    )
    leaked = "what does ZeRO stage 2 shard for Jane, jane.doe@example.com and 4111 1111 1111 1111?"
    record = question_record(replace(answered, reading=replace(answered.reading, query=leaked)))
    assert "jane.doe@example.com" not in record["text"] and "Jane" not in record["text"]
    assert "jane.doe@example.com" not in record["read_as"] and "Jane" not in record["read_as"]
    assert "4111" not in record["read_as"] and "[EMAIL]" in record["read_as"] and "[CARD]" in record["read_as"]
    assert record["read_as"].startswith("what does ZeRO stage 2 shard")
    assert question_record(replace(answered, reading=None))["read_as"] is None  # left before it was read


def test_analysts_see_read_as_in_rows_and_every_export(tmp_path, runtime) -> None:
    rt = signals_runtime(runtime, tmp_path, f"sqlite:///{tmp_path / 'analyst.db'}")
    with TestClient(create_app(rt.settings, runtime=rt)) as client:
        client.post("/v1/chat", json={"message": "what does zero stgae 2 shrad?", "learner_id": "a1"})
        client.post("/v1/chat", json={"message": "=1+1 whats pipline parallelism?", "learner_id": "a2"})
        assert rt.writer.flush()
        items = client.get("/v1/signals/questions", headers=AUTH).json()["items"]
        read = {item["text"]: item["read_as"] for item in items}
        assert read["what does zero stgae 2 shrad?"] == "what does zero stage 2 shard?"
        table = list(csv.reader(io.StringIO(client.get("/v1/signals/export?format=csv", headers=AUTH).text)))
        assert table[0].index("read_as") > table[0].index("feedback")  # after the older columns: they keep places
        rows = [dict(zip(table[0], row, strict=True)) for row in table[1:]]
        by_text = {row["text"]: row["read_as"] for row in rows}
        assert by_text["what does zero stgae 2 shrad?"] == "what does zero stage 2 shard?"
        formula = next(value for text, value in by_text.items() if "pipline" in text)
        assert "pipeline parallelism" in formula and not formula.startswith("=")  # neutralised like the text
        jsonl = [json.loads(line) for line in client.get("/v1/signals/export", headers=AUTH).text.splitlines()]
        assert {r["text"]: r["read_as"] for r in jsonl} == read
        xapi = [
            json.loads(line) for line in client.get("/v1/signals/export?format=xapi", headers=AUTH).text.splitlines()
        ]
        extensions = [statement["context"]["extensions"] for statement in xapi]
        assert [next(v for k, v in e.items() if k.endswith("/read-as")) for e in extensions] == [
            r["read_as"] for r in jsonl
        ]
    rt.writer.stop()


def test_migration_0004_leaves_older_rows_unread_and_takes_new_ones(db_url, tmp_path, runtime) -> None:  # noqa: F811
    engine = make_engine(db_url)
    config = alembic_config(engine)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0003")
    old = question_record(asyncio.run(runtime.chat.ask(ChatInput(message="what is FSDP?", learner_id="early"))))
    with engine.begin() as connection:  # written as a 0003 writer did: the columns of that schema only
        tables = {name: Table(name, MetaData(), autoload_with=connection) for name in ("learners", "conversations")}
        questions = Table("questions", MetaData(), autoload_with=connection)
        assert "read_as" not in questions.c
        at = datetime.fromisoformat(old["created_at"])
        connection.execute(insert(tables["learners"]).values(id=old["learner_id"], first_seen=at, last_seen=at))
        connection.execute(
            insert(tables["conversations"]).values(
                id=old["conversation_id"], learner_id=old["learner_id"], module_id=old["module_id"], started_at=at
            )
        )
        connection.execute(
            insert(questions).values({k: v for k, v in question_values(old).items() if k in questions.c})
        )
    migrate(engine)
    rt = signals_runtime(runtime, tmp_path, db_url)
    asked(rt, "what does zero stgae 2 shrad?")
    assert rt.writer.flush()
    items, _ = list_questions(engine, Filters(), limit=10, cursor=None)
    read = {item["text"]: item["read_as"] for item in items}
    assert read == {"what is FSDP?": None, "what does zero stgae 2 shrad?": "what does zero stage 2 shard?"}
    rt.writer.stop()
