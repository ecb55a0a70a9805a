"""Spools of several processes in one directory, erasures the writer honours, and a schema it may not migrate."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

from sqlalchemy.exc import OperationalError
from sqlmodel import Session, select

from mentor.db import make_engine
from mentor.signals.queries import erase_learner
from mentor.signals.schema import migrate, schema_behind
from mentor.signals.tables import LearnerRow, QuestionRow
from mentor.signals.writer import SignalWriter, Spool, write_records

from .test_signals import db_url  # noqa: F401 - the fixture
from .test_signals_poison import GOOD, spool_of


def stored_ids(engine) -> set[str]:
    try:
        with Session(engine) as session:
            return set(session.exec(select(QuestionRow.id)).all())
    except OperationalError:  # no tables yet: the writer has not reached the database
        return set()


def wait_for(condition, timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def write_spool(path, lines: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))


def test_the_spool_of_a_dead_process_is_adopted_once_and_a_live_one_is_left_alone(tmp_path, runtime) -> None:
    lines, asked = spool_of(runtime, tmp_path, GOOD)
    spools = tmp_path / "spool"
    write_spool(spools / "host-101.jsonl", lines[:3])  # its process died: nobody holds the lock
    write_spool(spools / "host-102.jsonl", lines[3:])
    alive = Spool(spools / "host-102.jsonl")
    assert alive.claim()  # a live process's spool
    engine = make_engine(f"sqlite:///{tmp_path / 'mentor.db'}")
    writer = SignalWriter(engine, spools / "host-200.jsonl", retry_s=0.05).start()
    try:
        assert wait_for(lambda: stored_ids(engine) >= set(asked[:3]))
        assert not (spools / "host-101.jsonl").exists()
        time.sleep(0.3)
        assert stored_ids(engine) == set(asked[:3]) and (spools / "host-102.jsonl").exists()
        alive.release()  # that process dies too; the next round adopts its spool
        writer._next_adoption = 0.0
        assert wait_for(lambda: stored_ids(engine) == set(asked))
        assert not (spools / "host-102.jsonl").exists()
    finally:
        writer.stop()


def test_two_writers_cannot_share_one_spool(tmp_path) -> None:
    import pytest

    from mentor.errors import ConfigError

    engine = make_engine(f"sqlite:///{tmp_path / 'mentor.db'}")
    first = SignalWriter(engine, tmp_path / "spool" / "same.jsonl").start()
    try:
        with pytest.raises(ConfigError, match="in use by another running process"):
            SignalWriter(engine, tmp_path / "spool" / "same.jsonl").start()
    finally:
        first.stop()
    SignalWriter(engine, tmp_path / "spool" / "same.jsonl").start().stop()  # released on stop


def test_records_made_before_their_learners_erasure_are_dropped_and_later_ones_kept(tmp_path, runtime) -> None:
    lines, asked = spool_of(runtime, tmp_path, GOOD[:4])
    erased_learner = lines[1]["learner_id"]
    made = datetime.fromisoformat(lines[1]["created_at"]).timestamp()
    later = lines[2] | {
        "learner_id": erased_learner,
        "question_id": "f" * 32,
        "conversation_id": "e" * 32,
        "created_at": datetime.fromtimestamp(made + 10).astimezone().isoformat(),
    }
    write_spool(tmp_path / "spool" / "dead.jsonl", [*lines, later])
    engine = make_engine(f"sqlite:///{tmp_path / 'mentor.db'}")
    asked_about = []

    def erased_since(keys):
        asked_about.append(set(keys))
        return {erased_learner: made + 1}  # erased a second after their first question

    writer = SignalWriter(engine, tmp_path / "spool" / "live.jsonl", erased_since=erased_since).start()
    try:
        expected = {asked[0], asked[2], asked[3], "f" * 32}
        assert wait_for(lambda: stored_ids(engine) == expected)
        assert erased_learner in set().union(*asked_about)
    finally:
        writer.stop()


def test_when_erasures_cannot_be_checked_records_wait_in_the_spool(tmp_path, runtime) -> None:
    lines, asked = spool_of(runtime, tmp_path, GOOD[:2])
    write_spool(tmp_path / "spool" / "dead.jsonl", lines)
    engine = make_engine(f"sqlite:///{tmp_path / 'mentor.db'}")
    state = {"up": False}

    def erased_since(keys):
        if not state["up"]:
            raise ConnectionError("redis down")
        return {}

    writer = SignalWriter(engine, tmp_path / "spool" / "live.jsonl", erased_since=erased_since, retry_s=0.05).start()
    try:
        time.sleep(0.5)
        assert stored_ids(engine) == set() and (tmp_path / "spool" / "dead.jsonl").exists()
        state["up"] = True
        assert wait_for(lambda: stored_ids(engine) == set(asked))
    finally:
        writer.stop()


def test_a_replica_waits_for_the_schema_job_instead_of_migrating(tmp_path, runtime) -> None:
    lines, asked = spool_of(runtime, tmp_path, GOOD[:2])
    write_spool(tmp_path / "spool" / "dead.jsonl", lines)
    engine = make_engine(f"sqlite:///{tmp_path / 'mentor.db'}")
    assert "mentor db upgrade" in schema_behind(engine)
    writer = SignalWriter(engine, tmp_path / "spool" / "live.jsonl", migrate=False, retry_s=0.05).start()
    try:
        time.sleep(0.5)
        assert "mentor db upgrade" in schema_behind(engine)  # the replica did not migrate it
        migrate(engine)  # the one-off job
        assert schema_behind(engine) is None
        assert wait_for(lambda: stored_ids(engine) == set(asked), timeout_s=30)
    finally:
        writer.stop()


def test_an_erasure_on_another_replica_waits_for_a_write_under_way_then_deletes_its_rows(
    db_url,  # noqa: F811 - the fixture: a SQLite file or a fresh PostgreSQL schema
    tmp_path,
    runtime,
) -> None:
    lines, asked = spool_of(runtime, tmp_path, GOOD[:2])
    engine = make_engine(db_url)
    migrate(engine)
    write_records(engine, lines[:1])  # the learner has an earlier question on record
    erased = lines[0]["learner_id"]
    later = lines[1] | {"learner_id": erased, "conversation_id": lines[0]["conversation_id"]}
    erasure: dict[str, object] = {}

    def erase() -> None:
        try:
            erasure["questions"] = erase_learner(engine, erased)
        except Exception as exc:  # the failure the test is about: reported, not swallowed by the thread
            erasure["error"] = exc

    def checked_before_the_tombstone(records):
        # The writer's erasure check found none; the erasure starts on another replica right after it.
        thread = threading.Thread(target=erase)
        thread.start()
        thread.join(0.5)
        erasure["waited"] = thread.is_alive()
        erasure["thread"] = thread
        return records

    write_records(engine, [later], keep=checked_before_the_tombstone)
    erasure["thread"].join(30)
    assert "error" not in erasure, erasure.get("error")
    assert erasure["waited"], "the erasure ran while a write of the same learner was under way"
    assert erasure["questions"] == 2  # the earlier question and the one written meanwhile
    with Session(engine) as session:
        assert session.exec(select(QuestionRow.id).where(QuestionRow.learner_id == erased)).all() == []
        assert session.exec(select(LearnerRow.id).where(LearnerRow.id == erased)).all() == []
    engine.dispose()


def test_the_writer_brings_the_schema_up_when_it_starts_not_inside_a_request(tmp_path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'mentor.db'}")
    assert schema_behind(engine) is not None
    writer = SignalWriter(engine, tmp_path / "spool" / "live.jsonl").start()
    try:  # no record submitted: the check ran on its own, before the first learner's question needs the writer
        assert wait_for(lambda: schema_behind(engine) is None, timeout_s=30)
    finally:
        writer.stop()


EXITS_WITHOUT_STOP = """
import asyncio, sys
from mentor.answer import ChatInput
from mentor.runtime import build_runtime
from tests.conftest import MODULE_ID, make_settings

runtime = build_runtime(make_settings(__import__("pathlib").Path(sys.argv[1])))
runtime.writer.start()
for n in range(3):
    asyncio.run(runtime.chat.ask(ChatInput(message=f"what does ZeRO stage {n + 1} shard?", module_id=MODULE_ID)))
"""  # and the process ends here, its writer never stopped


def test_a_process_ending_without_stopping_its_writer_still_writes_its_signals(tmp_path) -> None:
    # The writer's thread used to die with the process: its queue was lost, and caught embedding a question
    # (ONNX Runtime) it aborted the interpreter. Now it finishes what is queued at exit.
    done = subprocess.run(
        [sys.executable, "-c", EXITS_WITHOUT_STOP, str(tmp_path)],
        cwd=Path(__file__).parent.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(stored_ids(make_engine(f"sqlite:///{tmp_path / 'data' / 'mentor.db'}"))) == 3
