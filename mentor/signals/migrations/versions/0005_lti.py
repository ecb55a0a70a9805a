"""LTI 1.3: the registered platforms, and questions.lti_context (the course a question was asked in, pseudonymised)

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-07

lti_registrations holds what `mentor lti register` and dynamic registration record: issuer, client id, endpoints and
deployment ids, nothing personal. questions.lti_context is an HMAC of (issuer, context id), like the learner's
pseudonym; indexed, because an instructor's analyst view filters every query by it. Rows written before it, and
questions asked outside an LTI launch, have NULL.
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lti_registrations",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("issuer", sqlmodel.sql.sqltypes.AutoString(length=255), nullable=False),
        sa.Column("client_id", sqlmodel.sql.sqltypes.AutoString(length=255), nullable=False),
        sa.Column("name", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True),
        sa.Column("auth_login_url", sqlmodel.sql.sqltypes.AutoString(length=1000), nullable=False),
        sa.Column("auth_token_url", sqlmodel.sql.sqltypes.AutoString(length=1000), nullable=True),
        sa.Column("jwks_url", sqlmodel.sql.sqltypes.AutoString(length=1000), nullable=False),
        sa.Column("deployment_ids", sa.JSON(), nullable=False),
        sa.Column("source", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.UniqueConstraint("issuer", "client_id", name="uq_lti_registrations_issuer_client"),
    )
    op.create_index("ix_lti_registrations_issuer", "lti_registrations", ["issuer"])
    with op.batch_alter_table("questions") as batch:
        batch.add_column(sa.Column("lti_context", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True))
        batch.create_index("ix_questions_lti_context", ["lti_context"])


def downgrade() -> None:
    with op.batch_alter_table("questions") as batch:
        batch.drop_index("ix_questions_lti_context")
        batch.drop_column("lti_context")
    op.drop_index("ix_lti_registrations_issuer", table_name="lti_registrations")
    op.drop_table("lti_registrations")
