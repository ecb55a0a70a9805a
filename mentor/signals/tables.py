"""SQL tables of the learning-signal log (SQLModel). Alembic migrations in `migrations/` create them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Index, LargeBinary, UniqueConstraint
from sqlmodel import Field, SQLModel


class LearnerRow(SQLModel, table=True):
    """A learner, known only by a keyed HMAC of the host app's id."""

    __tablename__ = "learners"

    id: str = Field(primary_key=True, max_length=64, description="HMAC-SHA256 pseudonym, never the raw id")
    first_seen: datetime
    last_seen: datetime


class ConversationRow(SQLModel, table=True):
    """A conversation of one learner about one module."""

    __tablename__ = "conversations"

    id: str = Field(primary_key=True, max_length=32)
    learner_id: str = Field(foreign_key="learners.id", index=True, max_length=64)
    module_id: str = Field(max_length=200)
    started_at: datetime


class QuestionRow(SQLModel, table=True):
    """One question and what the mentor answered; the text is redacted before it is written."""

    __tablename__ = "questions"
    __table_args__ = (
        Index("ix_questions_module_created", "module_id", "created_at"),
        Index("ix_questions_section_created", "primary_section_id", "created_at"),
    )

    id: str = Field(primary_key=True, max_length=32)
    conversation_id: str = Field(foreign_key="conversations.id", index=True, max_length=32)
    learner_id: str = Field(foreign_key="learners.id", index=True, max_length=64)
    module_id: str = Field(max_length=200)
    module_version: str = Field(max_length=64)
    primary_section_id: str | None = Field(default=None, max_length=200)
    section_ids: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    text: str = Field(description="The question with personal details removed")
    read_as: str | None = Field(
        default=None,
        description="The question as mentor read it (spelling corrected, a follow-up joined to the question it "
        "continues), personal details removed; '' when it asked nothing, NULL before it was recorded",
    )
    redactions: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    style: str = Field(max_length=16)
    channel: str | None = Field(
        default=None,
        max_length=16,
        description="chat, stream, openai, cli, replay or demo (`mentor demo-data`): the surface it came through; NULL "
        "before it was recorded",
    )
    lti_context: str | None = Field(
        default=None,
        index=True,
        max_length=64,
        description="The LTI course (context) it was asked in, pseudonymised like the learner (HMAC of issuer and "
        "context id); NULL outside an LTI launch",
    )
    engine: str = Field(max_length=32)
    model: str | None = Field(default=None, max_length=200)
    prompt_version: str | None = Field(default=None, max_length=100)
    out_of_scope: bool = Field(index=True)
    coverage: str | None = Field(
        default=None, index=True, max_length=8, description="full, partial or none; NULL before it was measured"
    )
    grounded: bool = Field(index=True)
    unsupported_sentences: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    untraced_numbers: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    answer: str
    relevance: float
    latency_ms: float
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    fallback_reason: str | None = Field(default=None, max_length=64)
    embedding: bytes | None = Field(default=None, sa_column=Column(LargeBinary, nullable=True))
    created_at: datetime = Field(index=True)


class PassageRow(SQLModel, table=True):
    """A passage retrieved for a question: its rank, score and whether the answer cited it."""

    __tablename__ = "question_passages"

    id: int | None = Field(default=None, primary_key=True)
    question_id: str = Field(foreign_key="questions.id", index=True, max_length=32)
    chunk_id: str = Field(max_length=64)
    section_id: str = Field(index=True, max_length=200)
    rank: int
    score: float
    dense_similarity: float
    cited: bool


class ToolCallRow(SQLModel, table=True):
    """A calculator run for a question: arguments, result or error, duration."""

    __tablename__ = "tool_calls"

    id: int | None = Field(default=None, primary_key=True)
    question_id: str = Field(foreign_key="questions.id", index=True, max_length=32)
    name: str = Field(index=True, max_length=64)
    arguments: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    result: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    error: str | None = None
    duration_ms: float


class FeedbackRow(SQLModel, table=True):
    """A learner's thumbs up or down on an answer, with an optional redacted comment."""

    __tablename__ = "feedback"

    id: str = Field(primary_key=True, max_length=32, description="Set by the writer, so a replay is idempotent")
    question_id: str = Field(foreign_key="questions.id", index=True, max_length=32)
    learner_id: str = Field(foreign_key="learners.id", index=True, max_length=64)
    rating: str = Field(max_length=8)
    comment: str | None = None
    redactions: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    created_at: datetime = Field(index=True)


class LtiRegistrationRow(SQLModel, table=True):
    """A learning platform registered as an LTI 1.3 platform of mentor (by `mentor lti register` or dynamic
    registration). Nothing personal: endpoints and the ids the platform gave mentor."""

    __tablename__ = "lti_registrations"
    __table_args__ = (UniqueConstraint("issuer", "client_id", name="uq_lti_registrations_issuer_client"),)

    id: int | None = Field(default=None, primary_key=True)
    issuer: str = Field(max_length=255, index=True, description="The platform's `iss`")
    client_id: str = Field(max_length=255, description="The id the platform gave mentor: the `aud` of its launches")
    name: str | None = Field(default=None, max_length=200, description="A label for people (e.g. 'Moodle, Physics')")
    auth_login_url: str = Field(max_length=1000, description="The platform's OIDC authorization endpoint")
    auth_token_url: str | None = Field(default=None, max_length=1000, description="The platform's OAuth2 token URL")
    jwks_url: str = Field(max_length=1000, description="Where the platform publishes its public keys")
    deployment_ids: list[str] = Field(
        default_factory=list,
        sa_column=Column(JSON, nullable=False),
        description="The deployments of mentor on this platform that may launch it",
    )
    source: str = Field(max_length=16, description="cli or dynamic: how it was registered")
    created_at: datetime
