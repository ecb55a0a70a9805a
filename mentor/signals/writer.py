"""The only writer of signal rows: off the request path, batched, and never losing a signal.

`submit` only puts the result on a queue. A background thread redacts it, writes batches in one
transaction, and when the database cannot be reached appends the records to a durable spool
(JSON lines, fsync, mode 600) instead. While the spool holds anything, new records go behind it, so rows
arrive in order; the spool is replayed when the database is back, and inserts skip rows that already
exist, so a record replayed twice is written once.

A batch the database refuses (a constraint, a value it cannot store) is written again record by record,
each in its own transaction, so only the refused record is set aside (in `<spool>.rejected`) and every
other one is written. Nothing but an unavailable database sends records to the spool, and nothing but a
refusal sends one to the rejected file.

Each process has a spool of its own, locked (flock) while it lives. Replicas may share the spool directory:
a spool whose lock is free belongs to a process that died, and the next writer to find it (at start, then
every ADOPT_EVERY_S) writes its records and removes it. Records of a learner erased after they were made are
dropped on the way in, whichever replica's spool held them; the check runs under the learner's lock (`locks`), so
an erasure on another replica never interleaves with a write.
"""

from __future__ import annotations

import atexit
import base64
import fcntl
import json
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Collection, Iterable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import Connection, Engine, bindparam, insert, select, update
from sqlalchemy.exc import DataError, DBAPIError, DisconnectionError, IntegrityError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from mentor.errors import ConfigError
from mentor.privacy import create_private
from mentor.record import AnsweredQuestion
from mentor.signals.locks import lock_learners
from mentor.signals.records import Feedback, feedback_record, question_record
from mentor.signals.schema import migrate, schema_behind
from mentor.signals.tables import (
    ConversationRow,
    FeedbackRow,
    LearnerRow,
    PassageRow,
    QuestionRow,
    ToolCallRow,
)

if TYPE_CHECKING:
    from mentor.metrics import Metrics

log = logging.getLogger(__name__)
LINGER_S = 0.05
REFUSED = (IntegrityError, DataError)
ADOPT_EVERY_S = 30.0
# Which of these learners were erased, and when (epoch seconds): the learner state's tombstones.
ErasedSince = Callable[[Collection[str]], dict[str, float]]


class Unavailable(Exception):
    """The database cannot take records now (down, locked, restarting, its schema not yet in place)."""


def retryable(exc: BaseException) -> bool:
    """Whether the same records may go in later: the database was unreachable, not refusing them."""
    if isinstance(exc, DBAPIError):
        # A dropped connection can surface as any driver error; only a live database's refusal is final.
        return exc.connection_invalidated or not isinstance(exc, REFUSED)
    return isinstance(exc, Unavailable | PoolTimeout | DisconnectionError | OSError)


class Spool:
    """Append-only JSON lines on local disk, fsynced, for records the database could not take yet."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._lock: int | None = None

    def claim(self) -> bool:
        """Lock the spool for this process (released when it exits, however it exits); False if a live process holds
        it."""
        create_private(self.path)
        fd = os.open(self.path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._lock = fd
        return True

    def release(self) -> None:
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def pending(self) -> bool:
        return self.path.exists() and self.path.stat().st_size > 0

    def append(self, records: Iterable[dict[str, Any]]) -> None:
        lines = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records)
        create_private(self.path)  # learners' questions: owner-only, like the database
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(lines)
            handle.flush()
            os.fsync(handle.fileno())

    def read(self) -> list[dict[str, Any]]:
        records = []
        with open(self.path, encoding="utf-8") as handle:
            for line in handle:
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    log.error("spool line is not JSON (a torn write?); kept in %s.bad", self.path)
                    create_private(Path(f"{self.path}.bad"))
                    with open(f"{self.path}.bad", "a", encoding="utf-8") as bad:
                        bad.write(line)
        return records

    def clear(self) -> None:
        with open(self.path, "w", encoding="utf-8") as handle:
            handle.flush()
            os.fsync(handle.fileno())


class SignalWriter:
    """Writes signals in a background thread; `submit` never blocks and never raises."""

    def __init__(
        self,
        engine: Engine,
        spool_path: Path,
        *,
        embed: Callable[[str], np.ndarray] | None = None,
        erased_since: ErasedSince | None = None,
        migrate: bool = True,
        batch_size: int = 200,
        retry_s: float = 1.0,
        metrics: Metrics | None = None,
    ) -> None:
        self._engine = engine
        self._metrics = metrics
        self._embed = embed
        self._erased_since = erased_since
        self._may_migrate = migrate
        self._next_adoption = 0.0
        self._spool = Spool(spool_path)
        self._rejected = spool_path.with_suffix(".rejected")
        self._queue: queue.Queue[AnsweredQuestion | Feedback] = queue.Queue()
        self._batch_size = batch_size
        self._retry_s = retry_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="signal-writer", daemon=True)
        self.written = 0
        self.spooled = 0
        self.rejected = 0
        self._reported = (0, 0, 0)  # written, spooled, rejected as last given to the metrics
        self._migrated = False

    def start(self) -> SignalWriter:
        """Claim the spool and start the background thread (once; later calls do nothing).

        A process that exits without `stop` still finishes what is queued: left to die at exit, the thread lost
        its queue, and one caught embedding a question (ONNX Runtime, C++) aborted the interpreter (exit 134).
        """
        if not self._thread.is_alive() and not self._stop.is_set():
            if not self._spool.claim():
                raise ConfigError(f"the signal spool {self._spool.path} is in use by another running process")
            self._thread.start()
            atexit.register(self.stop)
        return self

    def submit(self, item: AnsweredQuestion | Feedback) -> None:
        """Queue a signal; returns at once."""
        self._queue.put_nowait(item)

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until everything submitted is in the database; False if it is not after `timeout`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._queue.unfinished_tasks == 0 and not self._spool.pending():
                return True
            time.sleep(0.02)
        return False

    def stop(self, timeout: float = 10.0) -> None:
        """Finish what is queued (into the database or the spool) and stop the thread."""
        self._stop.set()
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self._spool.release()
            atexit.unregister(self.stop)

    def _run(self) -> None:
        self._prepare()
        delay = self._retry_s
        while not (self._stop.is_set() and self._queue.empty()):
            items = self._take()
            records = [r for r in (self._record(item) for item in items) if r is not None]
            try:
                if records and self._spool.pending():
                    self._spool.append(records)  # behind what is already waiting, so rows arrive in order
                    self.spooled += len(records)
                    records = []
                if self._spool.pending():
                    replay = self._spool.read()
                    self._deliver(replay)
                    self._spool.clear()
                    log.info("signals database is back: %d spooled records written", len(replay))
                if records:
                    self._deliver(records)
                if time.monotonic() >= self._next_adoption:
                    self._adopt_orphans()
                delay = self._retry_s
            except Exception as exc:  # the thread must outlive any error, or every later signal is lost
                if retryable(exc):
                    log.warning(
                        "signals database unavailable (%s): signals wait in %s", type(exc).__name__, self._spool.path
                    )
                else:
                    log.exception("signal writer: unexpected error; the signals wait in %s", self._spool.path)
                try:
                    if records:  # not yet in the spool (a replay that failed is still there, whole)
                        self._spool.append(records)
                        self.spooled += len(records)
                except OSError:
                    log.exception("signals lost: neither the database nor the spool %s takes them", self._spool.path)
                self._stop.wait(delay)
                delay = min(delay * 2, 10.0)
            finally:
                for _ in items:
                    self._queue.task_done()
                self._observe()

    def _observe(self) -> None:
        """Report the backlog; every pass of the loop (at least every 0.2 s) keeps the gauges fresh."""
        if self._metrics is None:
            return
        try:
            spool_bytes = self._spool.path.stat().st_size
        except OSError:
            spool_bytes = 0
        written, spooled, rejected = self.written, self.spooled, self.rejected
        self._metrics.signal_writer(queue_depth=self._queue.qsize(), spool_bytes=spool_bytes)
        self._metrics.signals(
            written=written - self._reported[0],
            spooled=spooled - self._reported[1],
            rejected=rejected - self._reported[2],
        )
        self._reported = (written, spooled, rejected)

    def _prepare(self) -> None:
        """Bring the schema up (or check it) as soon as the thread starts, not in the first delivery.

        Alembic's check holds the GIL for a few hundred milliseconds; done at the first delivery, it landed
        inside the second or third learner's request after start (196 ms instead of ~45). A database that
        cannot be used now is tried again at the first delivery, as before.
        """
        try:
            self._ensure_schema()
        except Exception as exc:  # the deliveries retry it, and spool meanwhile
            log.info("signals database not ready at start (%s); records wait until it is", exc)
        else:
            self._migrated = True

    def _adopt_orphans(self) -> None:
        """Write and remove the spools of processes that died (their lock is free); raises while unavailable."""
        self._next_adoption = time.monotonic() + ADOPT_EVERY_S
        for path in sorted(self._spool.path.parent.glob(f"*{self._spool.path.suffix}")):
            if path == self._spool.path:
                continue
            orphan = Spool(path)
            if not orphan.claim():
                continue  # its process is alive, or another writer is adopting it
            try:
                records = orphan.read()
                self._deliver(records)
                path.unlink()
                log.info("adopted the spool of a stopped process: %d records written from %s", len(records), path.name)
            except Exception:
                self._next_adoption = 0.0  # try again as soon as the database is back
                raise
            finally:
                orphan.release()

    def _take(self) -> list[AnsweredQuestion | Feedback]:
        items: list[AnsweredQuestion | Feedback] = []
        try:
            items.append(self._queue.get(timeout=0.2))
        except queue.Empty:
            return items
        # Linger briefly so a burst of questions becomes one transaction, not one each.
        deadline = time.monotonic() + LINGER_S
        while len(items) < self._batch_size:
            remaining = deadline - time.monotonic()
            try:
                items.append(self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait())
            except queue.Empty:
                break
        return items

    def _record(self, item: AnsweredQuestion | Feedback) -> dict[str, Any] | None:
        try:
            if isinstance(item, Feedback):
                return feedback_record(item)
            return question_record(item, embed=self._embed)
        except Exception:  # one result that cannot be made a record must not stop the thread
            log.exception("signal dropped: could not build a record from %s", type(item).__name__)
            if self._metrics is not None:
                self._metrics.signals(unbuildable=1)
            return None

    def _deliver(self, records: list[dict[str, Any]]) -> None:
        """Write every record the database accepts; set aside each it refuses. Raises only while it is unavailable."""
        if not self._migrated:
            self._ensure_schema()
            self._migrated = True
        for start in range(0, len(records), self._batch_size):
            batch = records[start : start + self._batch_size]
            try:
                write_records(self._engine, batch, keep=self._without_erased)
            except Exception as exc:
                if retryable(exc):
                    raise
                log.warning("a batch of %d signals was refused (%s); writing them one by one", len(batch), _why(exc))
                self._isolate(batch)
            else:
                self.written += len(batch)

    def _ensure_schema(self) -> None:
        """Migrate a database this process owns; wait (spooling) while a shared one is behind `mentor db upgrade`."""
        try:
            if self._may_migrate:
                migrate(self._engine)  # a database that was down at start gets its schema on first contact
                return
            behind = schema_behind(self._engine)
        except Exception as exc:  # an unreachable database, or two processes creating the schema at once
            raise Unavailable(f"schema not ready: {type(exc).__name__}") from exc
        if behind:
            raise Unavailable(behind)

    def _without_erased(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Drop the records of learners erased after the records were made (a later question is kept)."""
        if self._erased_since is None or not records:
            return records
        try:
            erased = self._erased_since({r["learner_id"] for r in records})
        except Exception as exc:  # cannot tell: keep them spooled rather than write an erased learner's text
            raise Unavailable(f"erasures cannot be checked: {type(exc).__name__}") from exc
        if not erased:
            return records
        kept = [
            r
            for r in records
            if r["learner_id"] not in erased
            or datetime.fromisoformat(r["created_at"]).timestamp() > erased[r["learner_id"]]
        ]
        log.info("%d signals of erased learners dropped", len(records) - len(kept))
        return kept

    def _isolate(self, batch: list[dict[str, Any]]) -> None:
        """Write each record in its own transaction, so a refused one takes no other with it."""
        for record in batch:
            # Twice: a unique-key race with another replica's writer passes the second time, when the existence
            # checks see its rows; a record refused twice is refused for what it holds.
            for attempt in (1, 2):
                try:
                    write_records(self._engine, [record], keep=self._without_erased)
                except Exception as exc:
                    if retryable(exc):
                        raise  # the rest waits in the spool; replaying what was written here is a no-op
                    if attempt == 2:
                        self._reject(record, exc)
                else:
                    self.written += 1
                    break

    def _reject(self, record: dict[str, Any], exc: Exception) -> None:
        self.rejected += 1
        key = record.get("question_id") or record.get("id") if isinstance(record, dict) else None
        log.error("signal %s refused by the database (%s); kept in %s", key, _why(exc), self._rejected)
        Spool(self._rejected).append([record])


def _why(exc: Exception) -> str:
    """The driver's first line, without the statement and its parameters (they hold learners' text)."""
    reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return f"{type(exc).__name__}: {reason[0][:200] if reason else ''}"


Keep = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]


def write_records(engine: Engine, records: list[dict[str, Any]], keep: Keep | None = None) -> None:
    """Insert records in one transaction, skipping any row that already exists (replays are idempotent).

    The transaction first takes the lock of every learner in it, then asks `keep` which records to write
    (the erasure check must see any erasure that committed before the lock was granted; see `locks`).
    Core bulk inserts, parent tables first (learners, conversations, questions, then their children):
    this runs beside the request path, so every millisecond of Python here is one a learner may wait for.
    """
    if not records:
        return
    with engine.begin() as connection:
        lock_learners(connection, {r["learner_id"] for r in records})
        if keep is not None:
            records = keep(records)
        _insert(connection, records)


def _insert(connection: Connection, records: list[dict[str, Any]]) -> None:
    questions: dict[str, dict[str, Any]] = {}
    feedback: dict[str, dict[str, Any]] = {}
    for record in records:  # a replayed spool may hold a record twice
        if record["type"] == "question":
            questions.setdefault(record["question_id"], record)
        else:
            feedback.setdefault(record["id"], record)
    seen: dict[str, datetime] = {}
    for record in records:
        at = datetime.fromisoformat(record["created_at"])
        seen[record["learner_id"]] = max(seen.get(record["learner_id"], at), at)
    known = _existing(connection, LearnerRow.id, set(seen))
    if new_learners := [{"id": k, "first_seen": at, "last_seen": at} for k, at in seen.items() if k not in known]:
        connection.execute(insert(LearnerRow), new_learners)
    if old_learners := [{"key": k, "at": at} for k, at in seen.items() if k in known]:
        connection.execute(
            update(LearnerRow).where(LearnerRow.id == bindparam("key")).values(last_seen=bindparam("at")),
            old_learners,
        )
    known = _existing(connection, QuestionRow.id, set(questions))
    fresh = [r for key, r in questions.items() if key not in known]
    conversations = {r["conversation_id"]: r for r in reversed(fresh)}
    known = _existing(connection, ConversationRow.id, set(conversations))
    if new_conversations := [
        {
            "id": cid,
            "learner_id": r["learner_id"],
            "module_id": r["module_id"],
            "started_at": datetime.fromisoformat(r["created_at"]),
        }
        for cid, r in conversations.items()
        if cid not in known
    ]:
        connection.execute(insert(ConversationRow), new_conversations)
    if fresh:
        connection.execute(insert(QuestionRow), [question_values(r) for r in fresh])
        if passages := [p | {"question_id": r["question_id"]} for r in fresh for p in r["passages"]]:
            connection.execute(insert(PassageRow), passages)
        if calls := [c | {"question_id": r["question_id"]} for r in fresh for c in r["tool_calls"]]:
            connection.execute(insert(ToolCallRow), calls)
    known = _existing(connection, FeedbackRow.id, set(feedback))
    if new_feedback := [
        {k: v for k, v in r.items() if k != "type"} | {"created_at": datetime.fromisoformat(r["created_at"])}
        for key, r in feedback.items()
        if key not in known
    ]:
        connection.execute(insert(FeedbackRow), new_feedback)


def _existing(connection: Connection, column: Any, ids: set[str]) -> set[str]:
    return set(connection.execute(select(column).where(column.in_(ids))).scalars()) if ids else set()


def question_values(record: dict[str, Any]) -> dict[str, Any]:
    """The questions-table values of a record."""
    values = {k: v for k, v in record.items() if k not in ("type", "question_id", "passages", "tool_calls")}
    values["embedding"] = base64.b64decode(record["embedding"]) if record.get("embedding") else None
    values["created_at"] = datetime.fromisoformat(record["created_at"])
    # A record spooled before migration 0003 has no channel: without the key, a batch mixing it with newer records
    # is refused by executemany (every row must name the same columns), then written one by one.
    values.setdefault("channel", None)
    values.setdefault("read_as", None)  # likewise before migration 0004
    values.setdefault("lti_context", None)  # and 0005
    return values | {"id": record["question_id"]}
