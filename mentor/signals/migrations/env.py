"""Alembic environment: migrations run with the connection mentor hands over (see mentor.signals.schema)."""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

import mentor.signals.tables  # noqa: F401  (registers the tables on SQLModel.metadata)

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=SQLModel.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
