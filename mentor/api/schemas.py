"""HTTP request and response models, named for their role."""

from __future__ import annotations

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
