"""Database engine construction; the tables and their only writer live in `mentor.signals`."""

from __future__ import annotations

import logging
from pathlib import Path

from sqlalchemy import Engine, create_engine, event, make_url, text

from mentor.errors import NotReady
from mentor.privacy import create_private

log = logging.getLogger(__name__)


def make_engine(url: str) -> Engine:
    """Create the engine once per process; SQLite gets WAL so readers never block the signal writer."""
    if url.startswith("sqlite"):
        _private_sqlite_files(url)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_connection, _record) -> None:  # noqa: ANN001 - DB-API objects are untyped
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            # Deleted rows are overwritten with zeros, not left in free pages: erasure must remove the text.
            cursor.execute("PRAGMA secure_delete=ON")
            cursor.close()

        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20, connect_args={"connect_timeout": 3})


def _private_sqlite_files(url: str) -> None:
    """Create the database file owner-only (mode 600) before SQLite does; its -wal and -shm take the same mode."""
    database = make_url(url).database
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    path = Path(database)
    if not path.parent.is_dir():
        return  # SQLite reports the missing directory itself
    create_private(path)
    for suffix in ("-wal", "-shm"):  # left by an earlier run, perhaps with a wider mode
        if (side := Path(f"{database}{suffix}")).exists():
            create_private(side)


def forget_deleted(engine: Engine) -> None:
    """After personal data is deleted, leave no copy of it in SQLite's write-ahead log.

    The log keeps every page a transaction wrote until a checkpoint copies it into the database, so an erased
    question stays readable in `mentor.db-wal`. TRUNCATE copies the log in (where secure_delete has zeroed the
    rows) and empties the file; it waits (up to the 30 s busy timeout) for readers of older snapshots.
    PostgreSQL is left to its server: dead rows stay in its files until (auto)vacuum reuses them.
    """
    if engine.dialect.name != "sqlite":
        return
    with engine.connect() as connection:
        busy, frames, copied = connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").one()
    if busy:
        log.warning("write-ahead log kept after a deletion (%d of %d pages copied): readers busy", copied, frames)


def ping(engine: Engine) -> None:
    """Raise `NotReady` unless a trivial query succeeds."""
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except Exception as exc:  # any driver error means "not usable now"
        raise NotReady(f"database cannot be used: {type(exc).__name__}") from exc
