"""Response models of the analyst API: the typed contract the dashboard and other clients read.

A count shown as null is hidden: fewer than `min_cohort` distinct learners are behind it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

HIDDEN = "null when fewer than min_cohort distinct learners are behind it."


class SectionCount(BaseModel):
    """Questions about one section in one day or week."""

    bucket: str = Field(description="The UTC day, or the Monday of the UTC week, as YYYY-MM-DD.")
    section_id: str = Field(description="The section the answer drew on most, or '(out of scope)'.")
    questions: int
    learners: int


class HeatmapRow(BaseModel):
    module_id: str | None = Field(
        description="null for a section the served modules no longer have, and for out of scope."
    )
    section_id: str
    title: str
    level: int = Field(description="Heading level (1 the module's title, 2 a section, 3 a subsection).")
    counts: list[int | None] = Field(description=f"Questions per bucket, aligned with `buckets`; {HIDDEN}")
    questions: int | None = Field(description=f"Questions in the whole range; {HIDDEN}")


class Heatmap(BaseModel):
    """Questions per section over time: the module's sections in reading order x every bucket in the span."""

    bucket: Literal["day", "week"]
    buckets: list[str] = Field(description="Every bucket from the first to the last with a question.")
    omitted_buckets: int = Field(description="Older buckets left out to keep the map readable.")
    rows: list[HeatmapRow]


class QuestionGroup(BaseModel):
    """Questions that ask the same thing (cosine of their embeddings), among the most recent ones."""

    example: str = Field(description="The most frequent wording (redacted as logged).")
    examples: list[str] = Field(description="Up to three wordings, most frequent first.")
    questions: int
    learners: int
    sections: list[str] = Field(description="Sections the answers drew on most.")


class SectionFeedback(BaseModel):
    section_id: str
    up: int
    down: int
    learners: int = Field(description="Distinct learners who rated.")


class PromptFeedback(BaseModel):
    prompt_version: str = Field(
        description="The prompt version of the rated answers; '(none)' for the extractive engine."
    )
    up: int
    down: int
    learners: int


class ToolUsage(BaseModel):
    name: str
    calls: int
    learners: int


class FallbackReason(BaseModel):
    """Why an answer came from the extractive engine instead of the language model."""

    reason: str = Field(
        description="timeout, connection, http_<status>, malformed_reply, unknown_tool, malformed_tool_call, "
        "tool_loop, ungrounded or abandoned (the learner left)."
    )
    questions: int
    share: float | None = Field(description="Of all filtered questions.")
    learners: int


class EngineShare(BaseModel):
    engine: str
    questions: int
    share: float
    learners: int


class SignalSummary(BaseModel):
    """Where learners ask, where the module falls short, what is asked most; small groups hidden."""

    questions: int | None = Field(description=f"Questions matching the filters; {HIDDEN}")
    learners: int | None = Field(description=f"Distinct learners behind them; {HIDDEN}")
    min_cohort: int
    min_cohort_setting: str = Field(
        description="The environment variable that sets min_cohort (lowering it shows smaller groups: for a scratch "
        "database only, since a small group can point at one person)."
    )
    bucket: Literal["day", "week"]
    questions_per_section: list[SectionCount] = Field(description="Shown groups only, by bucket then section.")
    heatmap: Heatmap
    out_of_scope_questions: int | None
    out_of_scope_share: float | None
    content_gaps: list[QuestionGroup] = Field(description="Out-of-scope questions grouped by meaning.")
    feedback_by_section: list[SectionFeedback]
    feedback_by_prompt_version: list[PromptFeedback]
    tool_usage: list[ToolUsage]
    grounded_share: float | None = Field(description="Share of answers the grounding check passed.")
    fallback_reasons: list[FallbackReason]
    engine_mix: list[EngineShare]
    most_asked: list[QuestionGroup] = Field(description="In-scope questions grouped by meaning.")
    clustered: int = Field(description="Recent questions the groups by meaning were drawn from (at most 500 each).")
    suppressed_groups: int = Field(description="Groups hidden because fewer than min_cohort learners are in them.")
    suppressed_by_panel: dict[str, int] = Field(description="The same, per panel.")
    note: str


class LoggedPassage(BaseModel):
    """A passage retrieved for a question; its text is looked up in the modules served now."""

    chunk_id: str
    section_id: str
    rank: int
    score: float
    cited: bool
    section_title: str | None = Field(None, description="null when the served modules no longer have the passage.")
    text: str | None = Field(None, description="The passage as served now; null when it changed since.")


class LoggedToolCall(BaseModel):
    name: str
    arguments: dict[str, Any]
    result: dict[str, Any] | None
    error: str | None
    duration_ms: float


class LoggedFeedback(BaseModel):
    rating: str
    comment: str | None
    created_at: str


class LoggedQuestion(BaseModel):
    """One logged question with what the mentor answered, as the question browser and exports see it."""

    question_id: str
    conversation_id: str
    learner: str = Field(description="The learner's pseudonym (a keyed HMAC), never the platform's id.")
    module_id: str
    module_version: str
    section_id: str | None
    section_ids: list[str]
    text: str = Field(description="The question, personal details removed.")
    redactions: list[str]
    style: str
    channel: str | None = Field(
        description="Where it was asked: chat, stream, openai (the OpenAI-compatible route), cli, replay or demo "
        "(synthetic learners written by `mentor demo-data`); null for questions logged before it was recorded."
    )
    engine: str
    model: str | None
    prompt_version: str | None
    out_of_scope: bool
    coverage: Literal["full", "partial", "none"] | None = Field(
        description="How much of the question the module answered; null for questions logged before it was measured."
    )
    grounded: bool
    unsupported_sentences: list[str]
    untraced_numbers: list[str]
    answer: str
    relevance: float
    latency_ms: float
    prompt_tokens: int | None
    completion_tokens: int | None
    fallback_reason: str | None
    created_at: str
    passages: list[LoggedPassage]
    tool_calls: list[LoggedToolCall]
    feedback: list[LoggedFeedback]
    read_as: str | None = Field(
        description="The question as mentor read it: spelling corrected, the module's shorthand spelled out, a "
        "follow-up joined to the question it continues; personal details removed. Beside `text`, it tells a "
        "misreading from a gap in the module. '' when mentor read no question in it ('hi'); null for questions "
        "logged before it was recorded, or left before they were read."
    )
    lti_context: str | None = Field(
        None,
        description="The LTI course the question was asked in, pseudonymised (HMAC of issuer and context id); null "
        "outside LTI launches. Filter by it with `lti_context`.",
    )


class QuestionPage(BaseModel):
    """A page of logged questions, newest first."""

    items: list[LoggedQuestion]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last.")
    total: int = Field(description="Questions matching the filters, over all pages.")
