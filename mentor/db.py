"""Database engine construction; the tables and their only writer live in `mentor.signals`."""

from __future__ import annotations

from sqlalchemy import Engine, create_engine, event, text

from mentor.errors import NotReady


def make_engine(url: str) -> Engine:
    """Create the engine once per process; SQLite gets WAL so readers never block the signal writer."""
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_connection, _record) -> None:  # noqa: ANN001 - DB-API objects are untyped
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20, connect_args={"connect_timeout": 3})


def ping(engine: Engine) -> None:
    """Raise `NotReady` unless a trivial query succeeds."""
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except Exception as exc:  # any driver error means "not usable now"
        raise NotReady(f"database cannot be used: {type(exc).__name__}") from exc
