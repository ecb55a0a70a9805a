"""questions.coverage: how much of each question the module answers

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-03

Rows written before it have no value (NULL: not measured), not a guessed "full".
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("questions") as batch:
        batch.add_column(sa.Column("coverage", sqlmodel.sql.sqltypes.AutoString(length=8), nullable=True))
        batch.create_index("ix_questions_coverage", ["coverage"])


def downgrade() -> None:
    with op.batch_alter_table("questions") as batch:
        batch.drop_index("ix_questions_coverage")
        batch.drop_column("coverage")
