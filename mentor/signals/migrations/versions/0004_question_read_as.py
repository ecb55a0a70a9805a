"""questions.read_as: the question as mentor read it (spelling corrected, a follow-up joined to what it continues)

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-06

Beside the learner's words, it tells a module gap from a misreading. Redacted like the text. Rows written before it
have no value (NULL: not recorded); a question read as asking nothing ("hi") has "".
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("questions") as batch:
        batch.add_column(sa.Column("read_as", sqlmodel.sql.sqltypes.AutoString(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("questions") as batch:
        batch.drop_column("read_as")
