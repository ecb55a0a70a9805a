"""HTTP request and response models, named for their role."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from mentor.answer import ToolCall
from mentor.record import AnsweredQuestion
from mentor.text import MAX_MESSAGE_CHARS
from mentor.tools.registry import title_of
from mentor.understanding import Reading


class ErrorResponse(BaseModel):
    """Every 4xx/5xx body: a machine code and a plain message."""

    error: str
    message: str


class SectionInfo(BaseModel):
    id: str
    title: str


class StarterInfo(BaseModel):
    question: str = Field(description="A question to start with, made from one of the module's section headings.")
    section_id: str = Field(description="The section whose heading it came from.")


class ModuleInfo(BaseModel):
    id: str
    title: str
    version: str
    prerequisites: list[str]
    sections: list[SectionInfo]
    starters: list[StarterInfo] = Field(
        [], description="Up to three questions an empty box offers, from the headings that name the module's topics."
    )


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
    message: str = Field(
        min_length=1, max_length=MAX_MESSAGE_CHARS, description=f"The question, 1-{MAX_MESSAGE_CHARS} characters."
    )
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
    title: str = Field("", description='The calculator\'s title, e.g. "ZeRO memory per GPU".')
    arguments: dict[str, Any]
    result: dict[str, Any] | None
    explanation: str

    @classmethod
    def of(cls, call: ToolCall, *, hint: bool) -> ToolCallOut:
        """A calculator run as learners see it; a hint names the calculator but withholds its result (the log keeps
        the whole run). The answer and the stream's tool_call events both come through here."""
        return cls(
            name=call.name,
            title=title_of(call.name),
            arguments=call.arguments,
            result=None if hint else call.result,
            explanation="" if hint else call.explanation,
        )


class GroundingOut(BaseModel):
    grounded: bool
    unsupported_sentences: list[str]
    untraced_numbers: list[str]


class PartOut(BaseModel):
    text: str = Field(description="The part as the learner wrote it.")
    kind: str = Field(description="The kind of answer it wants: definition, explanation, comparison, choice, "
                      "verdict, calculation, procedure, sources, overview or repeat.")  # fmt: skip
    lacking: list[str] = Field(description="Concepts it names that the module does not cover.")


class ReadingOut(BaseModel):
    """The message as mentor read it, once, before answering (mentor.understanding)."""

    question: str = Field(description="The question as read: orders and chat left out, spelling corrected toward "
                          "the module, its shorthand spelled out; empty when the message asks nothing.")  # fmt: skip
    kind: str
    parts: list[PartOut]
    continues: bool = Field(description="Whether it continues the conversation's previous question.")
    instructed: bool = Field(description="Whether it held an instruction to the mentor (left out, never obeyed).")
    lacking: list[str]
    corrections: list[list[str]] = Field(description="Words corrected: [as written, as read].")
    figure: str = Field("", description="What a figure the learner wrote is to the question: 'states' (the "
                        "answer to check), 'suffices' (a budget asked about) or 'other'; empty for none.")  # fmt: skip

    @classmethod
    def of(cls, reading: Reading) -> ReadingOut:
        return cls.model_validate(reading.summary())


class ChatResponse(BaseModel):
    """The answer to one question: the one shape of /v1/chat, the stream's `done` event and `mentor ask --json`."""

    question_id: str
    conversation_id: str
    answer: str = Field(description="Markdown with [n] citation markers.")
    citations: list[CitationOut]
    tool_calls: list[ToolCallOut]
    out_of_scope: bool
    coverage: Literal["full", "partial", "none"] = Field(
        description="How much of the question the module answers: all of it, part of it (the answer opens with "
        "one sentence naming what the module does not cover), or none (a redirect)."
    )
    grounding: GroundingOut
    engine: str
    model: str | None
    prompt_version: str | None
    module_version: str
    latency_ms: float
    fallback_reason: str | None = None
    retrieval_query: str = Field(
        "",
        description="The question as retrieval saw it: instructions and personal details dropped, a follow-up "
        "joined to the question it follows.",
    )
    passages: list[PassageOut] = Field(
        [], description="The passages the answer stood on, best first: the contexts eval suites measure."
    )
    reading: ReadingOut | None = Field(None, description="The message as read (None if the client left first).")

    @classmethod
    def of(cls, answered: AnsweredQuestion) -> ChatResponse:
        """The public view of an answered question."""
        answer = answered.answer
        hint = answered.style == "hint"
        return cls(
            question_id=answered.question_id,
            conversation_id=answered.conversation_id,
            answer=answer.text,
            citations=[
                CitationOut(
                    n=c.n, chunk_id=c.chunk_id, section_id=c.section_id, section_title=c.section_title, quote=c.quote
                )
                for c in answer.citations
            ],
            tool_calls=[ToolCallOut.of(c, hint=hint) for c in answer.tool_calls if c.error is None],
            out_of_scope=answer.out_of_scope,
            coverage=answer.coverage,
            grounding=GroundingOut(
                grounded=answered.grounding.grounded,
                unsupported_sentences=list(answered.grounding.unsupported_sentences),
                untraced_numbers=list(answered.grounding.untraced_numbers),
            ),
            engine=answer.engine,
            model=answer.model,
            prompt_version=answer.prompt_version,
            module_version=answered.module_version,
            latency_ms=round(answered.latency_ms, 2),
            fallback_reason=answer.fallback_reason,
            retrieval_query=answered.retrieval_query,
            passages=[
                PassageOut(
                    chunk_id=p.chunk_id,
                    section_id=p.section_id,
                    section_title=p.section_title,
                    text=p.text,
                    score=p.score,
                    dense_similarity=p.dense_similarity,
                    bm25_score=p.bm25_score,
                )
                for p in answered.passages
            ],  # fmt: skip
            reading=ReadingOut.of(answered.reading) if answered.reading is not None else None,
        )

    def public(self) -> dict[str, Any]:
        """As JSON-ready data."""
        return self.model_dump(mode="json")


class ToolInfo(BaseModel):
    name: str
    title: str = Field(description="A short human title for the calculator.")
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
