"""Routes the learning app calls on a learner's behalf: modules and search."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from mentor.api.deps import RuntimeDep, per_client
from mentor.api.schemas import ErrorResponse, ModuleInfo, PassageOut, SearchResponse, SectionInfo, StarterInfo
from mentor.starters import starters
from mentor.text import MAX_MESSAGE_CHARS
from mentor.throttle import SEARCH

router = APIRouter(prefix="/v1", tags=["learner"])


@router.get("/modules", response_model=list[ModuleInfo])
def list_modules(runtime: RuntimeDep) -> list[ModuleInfo]:
    """Modules the mentor can answer about, with their sections and the questions an empty box offers."""
    return [
        ModuleInfo(
            id=m.id,
            title=m.title,
            version=m.version,
            prerequisites=list(m.prerequisites),
            sections=[SectionInfo(id=s.id, title=s.title) for s in m.sections],
            starters=[StarterInfo(question=s.question, section_id=s.section_id) for s in starters(m)],
        )
        for m in runtime.modules.values()
    ]


@router.get(
    "/search",
    response_model=SearchResponse,
    responses={
        404: {"model": ErrorResponse, "description": "Unknown module."},
        422: {"model": ErrorResponse, "description": "Empty or over-long query, k outside 1-50, module_id missing."},
        429: {"model": ErrorResponse, "description": "Too many searches from this address; see Retry-After."},
        503: {"model": ErrorResponse, "description": "The index cannot be used right now; see Retry-After."},
    },
    dependencies=[per_client(SEARCH)],  # each search runs the embedder
)
def search(
    runtime: RuntimeDep,
    q: Annotated[str, Query(description=f"The learner's question or keywords (1-{MAX_MESSAGE_CHARS} characters).")],
    module_id: Annotated[str | None, Query(description="Module to search; optional with a single module.")] = None,
    k: Annotated[int | None, Query(description="Passages to return (1-50); default MENTOR_TOP_K.")] = None,
) -> SearchResponse:
    """Hybrid search of one module's passages."""
    module = runtime.module(module_id)
    result = runtime.retriever.search(q, module.id, runtime.settings.top_k if k is None else k)
    return SearchResponse(
        module_id=module.id,
        query=q.strip(),
        relevance=result.relevance,
        in_scope=result.in_scope,
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
            for p in result.passages
        ],
    )
