"""questions.channel: the surface each question came through (chat, stream, openai, cli, replay)

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03

Rows written before it have no value (NULL: not recorded), not a guessed "chat". No index: nothing filters on it
yet, and the column is read with the rows it belongs to.
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("questions") as batch:
        batch.add_column(sa.Column("channel", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("questions") as batch:
        batch.drop_column("channel")
