"""Bring the signals database to the latest schema with Alembic (from empty, or from any earlier version)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

MIGRATIONS = Path(__file__).with_name("migrations")


def alembic_config(engine: Engine) -> Config:
    """An Alembic config bound to `engine` (no alembic.ini: the package carries its migrations)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["engine"] = engine
    return config


def migrate(engine: Engine) -> None:
    """Upgrade the database to head; safe to call on every start."""
    config = alembic_config(engine)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


def schema_behind(engine: Engine) -> str | None:
    """None when the database is at the latest schema; otherwise what it is at, for a one-line message.

    Replicas of a shared database do not migrate it (`mentor db upgrade` does, once); they check with this.
    """
    head = ScriptDirectory.from_config(alembic_config(engine)).get_current_head()
    with engine.connect() as connection:
        current = MigrationContext.configure(connection).get_current_revision()
    if current == head:
        return None
    return f"schema at {current or 'nothing'}, code expects {head}: run `mentor db upgrade`"
