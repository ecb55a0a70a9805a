"""Ingest and retrieval measurements, in-process, with mentor's real corpus loader, index writer and retriever."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mentor.bench.load import percentile
from mentor.corpus import Chunk, Module, chunk_corpus, load_corpus
from mentor.embeddings import Embedder
from mentor.index import Index, build_index, chroma_client, load_vectors, open_index
from mentor.retrieve import Retriever, index_modules
from mentor.settings import Settings


def bench_settings(*, data_dir: Path, corpus_dir: Path, backend: str | None = None) -> Settings:
    """mentor's defaults, not this shell's MENTOR_* variables: the servers under test get a clean environment too.
    `backend` names the embedding backend (default: mentor's default)."""
    settings = Settings.model_construct(data_dir=data_dir, corpus_dir=corpus_dir)
    return settings.model_copy(update={"embedding_backend": backend}) if backend else settings


@dataclass
class Ingested:
    """An index built for the benchmark, kept open for the retrieval measurement."""

    settings: Settings
    index: Index
    chunks: list[Chunk]
    figures: dict


def ingest(settings: Settings, embedder: Embedder) -> Ingested:
    """Index a corpus into an empty data dir, then re-ingest it unchanged (which must embed nothing)."""
    marks: list[float] = []  # when embedding started, then after each batch (build_index's callbacks)
    started = time.perf_counter()
    modules, chunks = load_chunks(settings)
    chunked = time.perf_counter()
    index = open_index(chroma_client(settings), settings.collection, embedder)
    report = build_index(
        index,
        modules,
        chunks,
        embedder,
        on_plan=lambda _n: marks.append(time.perf_counter()),
        progress=lambda _n: marks.append(time.perf_counter()),
    )
    indexed = time.perf_counter()
    again = build_index(index, *load_chunks(settings), embedder)
    reingested = time.perf_counter()
    embed_s = marks[-1] - marks[0]
    figures = {
        "modules": len({c.module_id for c in chunks}),
        "chunks": len(chunks),
        "load_and_chunk_s": chunked - started,
        # Everything a changed corpus costs: reading, chunking, embedding, writing to Chroma.
        "ingest_s": indexed - started,
        "embed_s": embed_s,
        "embeddings": report.embedded,
        "embeddings_per_s": report.embedded / embed_s if embed_s > 0 else None,
        "reingest_s": reingested - indexed,
        "reingest_embeddings": again.embedded,
    }
    return Ingested(settings, index, chunks, figures)


def load_chunks(settings: Settings) -> tuple[list[Module], list[Chunk]]:
    modules = load_corpus(settings.corpus_dir)
    return modules, chunk_corpus(modules, chunk_size=settings.chunk_size, chunk_overlap=settings.chunk_overlap)


def retrieval_latency(
    index: Ingested, module_id: str, questions: Sequence[str], *, cached: Embedder, uncached: Embedder, passes: int
) -> dict:
    """`Retriever.search` latency for one module of this index: with the query embedding computed (cold) and
    taken from mentor's query cache (warm), which isolates the Chroma + BM25 + fusion cost."""
    settings = index.settings
    started = time.perf_counter()
    warm = make_retriever(index, cached)
    build_s = time.perf_counter() - started
    cold = make_retriever(index, uncached)
    for question in questions:  # fill the query cache; not measured
        warm.search(question, module_id, settings.top_k)
    timings: dict[str, list[float]] = {"cold": [], "warm": []}
    for _ in range(passes):
        for name, retriever in (("cold", cold), ("warm", warm)):
            for question in questions:
                began = time.perf_counter()
                retriever.search(question, module_id, settings.top_k)
                timings[name].append((time.perf_counter() - began) * 1000)
    result = {"modules": index.figures["modules"], "chunks": index.figures["chunks"], "retriever_build_s": build_s}
    for name, values in timings.items():
        values.sort()
        result |= {f"{name}_p50_ms": percentile(values, 50), f"{name}_p95_ms": percentile(values, 95)}
    return result


def make_retriever(index: Ingested, embedder: Embedder) -> Retriever:
    settings = index.settings
    vectors = load_vectors(index.index.chunks, [c.id for c in index.chunks])
    return Retriever(
        embedder,
        index_modules(index.chunks, vectors),
        rrf_k=settings.rrf_k,
        scope_threshold=settings.scope_threshold,
        scope_weight=settings.scope_weight,
        cache_size=0,  # what is measured is the search itself, question after question
    )
