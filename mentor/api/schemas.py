"""HTTP request and response models, named for their role."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class ErrorResponse(BaseModel):
    """Every 4xx/5xx body: a machine code and a plain message."""

    error: str
    message: str


class SectionInfo(BaseModel):
    id: str
    title: str


class ModuleInfo(BaseModel):
    id: str
    title: str
    version: str
    prerequisites: list[str]
    sections: list[SectionInfo]


class PassageOut(BaseModel):
    chunk_id: str
    section_id: str
    section_title: str
    text: str
    score: float = Field(description="Reciprocal-rank-fusion score of the dense and BM25 rankings.")
    dense_similarity: float = Field(description="Cosine similarity of the question and the chunk.")
    bm25_score: float


class SearchResponse(BaseModel):
    module_id: str
    query: str
    relevance: float = Field(description="Best cosine similarity in the module: the scope signal.")
    in_scope: bool = Field(description="relevance >= the calibrated scope threshold.")
    passages: list[PassageOut]


class Health(BaseModel):
    status: str
    detail: dict[str, str] = {}


class ChatRequest(BaseModel):
    """A learner's question from the "Ask the mentor" box."""

    model_config = {"extra": "forbid"}

    module_id: str | None = Field(None, max_length=200, description="Module being read; optional with one module.")
    message: str = Field(min_length=1, max_length=4000, description="The question, 1-4000 characters.")
    conversation_id: str | None = Field(None, max_length=64, description="Continue this conversation.")
    learner_id: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="The host app's learner id (pseudonymised before anything is stored).",
    )
    style: Literal["explain", "hint", "brief"] = Field("explain", description="explain, hint or brief.")


class CitationOut(BaseModel):
    n: int
    chunk_id: str
    section_id: str
    section_title: str
    quote: str


class ToolCallOut(BaseModel):
    name: str
    arguments: dict[str, Any]
    result: dict[str, Any] | None
    explanation: str


class GroundingOut(BaseModel):
    grounded: bool
    unsupported_sentences: list[str]
    untraced_numbers: list[str]


class ChatResponse(BaseModel):
    question_id: str
    conversation_id: str
    answer: str = Field(description="Markdown with [n] citation markers.")
    citations: list[CitationOut]
    tool_calls: list[ToolCallOut]
    out_of_scope: bool
    grounding: GroundingOut
    engine: str
    model: str | None
    prompt_version: str | None
    module_version: str
    latency_ms: float
    fallback_reason: str | None = None


class ToolInfo(BaseModel):
    name: str
    description: str
    parameters: dict[str, Any] = Field(description="JSON schema of the arguments object.")


class ToolRun(BaseModel):
    name: str
    arguments: dict[str, Any]
    result: dict[str, Any]
    explanation: str


class FeedbackRequest(BaseModel):
    """A thumbs up or down from the learner who asked."""

    model_config = {"extra": "forbid"}

    rating: Literal["up", "down"]
    comment: str | None = Field(None, max_length=2000)
    learner_id: str | None = Field(None, min_length=1, max_length=200, description="Same id as when asking.")
