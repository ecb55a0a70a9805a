"""Personal details on the way to an LLM: what a learner types reaches the upstream model (a `StubLLM` over real HTTP,
which records every request it receives) only as placeholders, in the question and in the earlier turns, and is
absent from the database, the exports and the log as well."""

from __future__ import annotations

import json
import logging

from fastapi.testclient import TestClient

from mentor.api import create_app
from mentor.stub_llm import StubLLM

from .conftest import MODULE_ID
from .test_chat_llm import fenced, grounded_zero_answer
from .test_privacy_storage import AUTH, FORMATS, files_bytes, leaked, sqlite_files
from .test_signals import signals_runtime

# Two turns of one stored conversation, each with a question the module answers, so both reach the model: the first
# names the learner without "my name is", the second writes an address out and one with a fullwidth "＠".
FIRST = (
    "I'm Janeth Doerfler, and I wonder: what does ZeRO shard? Refund DE89 3704 0044 0532 0130 00 "
    "or mail jane_x at example dot com"
)
SECOND = "and why is that the memory hog? Write to janeth_q＠example.com, IBAN GB82 WEST 1234 5698 7654 32"
DETAILS = [
    "Janeth",
    "Doerfler",
    "DE89 3704 0044 0532 0130 00",
    "jane_x",
    "example dot com",
    "janeth_q",
    "example.com",
    "GB82 WEST 1234 5698 7654 32",
]


def sent(stub: StubLLM) -> bytes:
    """Every request the upstream received, as the bytes of its JSON."""
    return b"\n".join(json.dumps(r, ensure_ascii=False).encode() for r in stub.requests)


def test_no_personal_detail_reaches_the_llm_the_database_the_exports_or_the_log(tmp_path, runtime, caplog) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, the openai SDK's request log included
    database = tmp_path / "mentor.db"
    with StubLLM(grounded_zero_answer) as stub:
        rt = signals_runtime(runtime, tmp_path, f"sqlite:///{database}", llm_base_url=stub.url, llm_model="stub")
        with TestClient(create_app(rt.settings, runtime=rt)) as client:
            body = {"module_id": MODULE_ID, "learner_id": "upstream"}
            first = client.post("/v1/chat", json=body | {"message": FIRST}).json()
            second = client.post(
                "/v1/chat", json=body | {"message": SECOND, "conversation_id": first["conversation_id"]}
            ).json()
            assert rt.writer.flush(20)
            exports = {f: client.get("/v1/signals/export", params={"format": f}, headers=AUTH) for f in FORMATS}
            on_disk = files_bytes(*sqlite_files(database))
        rt.writer.stop()
    places = {"upstream": sent(stub), "db+wal": on_disk, "log": caplog.text.encode()}
    places |= {f"export.{f}": r.content for f, r in exports.items()}
    places |= {f"log record {r.name}": r.getMessage().encode() for r in caplog.records}
    found = [(detail, where) for detail in DETAILS for where, blob in places.items() if leaked(blob, detail)]
    assert found == []
    assert all(r.status_code == 200 for r in exports.values())
    assert b"[NAME]" in places["db+wal"] and b"[EMAIL]" in places["db+wal"] and b"[IBAN]" in places["db+wal"]
    # Both questions reached the model, the earlier turn as data: its question as read, without the details.
    assert first["engine"] == second["engine"] == "llm" and len(stub.requests) == 2
    later = stub.requests[-1]
    assert "ZeRO shard" in fenced(later, "history") and "memory hog" in fenced(later, "question")
