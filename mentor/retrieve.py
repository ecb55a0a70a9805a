"""Hybrid retrieval, read-only: dense (Chroma) and BM25 rankings fused by reciprocal rank, per module."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import bm25s
import numpy as np
import Stemmer
from chromadb.api.models.Collection import Collection

from mentor.corpus import Chunk
from mentor.embeddings import Embedder
from mentor.errors import InvalidInput, NotFound

MAX_QUERY_CHARS = 4000
TOKEN = re.compile(r"[a-z0-9]+")
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having he her here
    hers him his how i if in into is it its itself just me more most my no nor not now of off on once only or other
    our ours out over own same she should so some such than that the their theirs them then there these they this
    those through to too under until up very was we were what when where which while who whom why will with would
    you your yours explain tell please mean means""".split()
)
_stemmer = Stemmer.Stemmer("english")


def tokenize(text: str) -> list[str]:
    """Lower-case word and number tokens without stop words, Snowball-stemmed ("quantized" -> "quantiz")."""
    return _stemmer.stemWords([t for t in TOKEN.findall(text.lower()) if t not in STOPWORDS])


@dataclass(frozen=True, slots=True)
class Passage:
    """A retrieved chunk with its fused score and the two scores it came from."""

    chunk_id: str
    module_id: str
    module_version: str
    section_id: str
    section_title: str
    position: int
    text: str
    rank: int
    score: float
    dense_similarity: float
    bm25_score: float


@dataclass(frozen=True, slots=True)
class Retrieval:
    """Ranked passages for one query, and how relevant the module is to it at all."""

    passages: list[Passage]
    relevance: float
    in_scope: bool


class Retriever:
    """Searches one module at a time; BM25 lives in memory, vectors in Chroma. Built once per process."""

    def __init__(
        self,
        collection: Collection,
        embedder: Embedder,
        chunks: Sequence[Chunk],
        *,
        rrf_k: int = 60,
        scope_threshold: float = 0.3,
    ) -> None:
        self._collection = collection
        self._embedder = embedder
        self._rrf_k = rrf_k
        self.scope_threshold = scope_threshold
        self._chunks: dict[str, list[Chunk]] = {}
        for chunk in chunks:
            self._chunks.setdefault(chunk.module_id, []).append(chunk)
        self._bm25: dict[str, bm25s.BM25] = {}
        for module_id, module_chunks in self._chunks.items():
            index = bm25s.BM25()
            index.index([tokenize(c.embedding_text) for c in module_chunks], show_progress=False)
            self._bm25[module_id] = index

    @property
    def module_ids(self) -> list[str]:
        """Modules this retriever can search."""
        return list(self._chunks)

    def search(self, query: str, module_id: str, k: int = 4) -> Retrieval:
        """Return the `k` best passages of `module_id` for `query`, with the module's relevance to it."""
        query = validate_query(query)
        chunks = self._chunks.get(module_id)
        if chunks is None:
            raise NotFound(f"unknown module {module_id!r}; known modules: {', '.join(self._chunks) or 'none'}")
        if not 1 <= k <= 50:
            raise InvalidInput(f"k: must be between 1 and 50 (got {k})")
        vector = self._embedder.embed_query(query)
        depth = min(len(chunks), max(4 * k, 20))
        hits = self._collection.query(
            query_embeddings=[vector], n_results=depth, where={"module_id": module_id}, include=["distances"]
        )
        dense = {cid: 1.0 - d for cid, d in zip(hits["ids"][0], hits["distances"][0], strict=True)}
        bm25_scores = self._bm25[module_id].get_scores(tokenize(query))
        fused: dict[str, float] = {}
        for rank, cid in enumerate(dense, start=1):
            fused[cid] = 1.0 / (self._rrf_k + rank)
        order = np.argsort(-bm25_scores, kind="stable")
        for rank, index in enumerate(order[:depth], start=1):
            if bm25_scores[index] <= 0:
                break
            cid = chunks[index].id
            fused[cid] = fused.get(cid, 0.0) + 1.0 / (self._rrf_k + rank)
        by_id = {c.id: (c, float(bm25_scores[i])) for i, c in enumerate(chunks)}
        ranked = sorted(fused.items(), key=lambda item: (-item[1], by_id[item[0]][0].position))[:k]
        passages = [
            Passage(
                chunk_id=cid,
                module_id=module_id,
                module_version=by_id[cid][0].module_version,
                section_id=by_id[cid][0].section_id,
                section_title=by_id[cid][0].section_title,
                position=by_id[cid][0].position,
                text=by_id[cid][0].text,
                rank=rank,
                score=score,
                dense_similarity=dense.get(cid, 0.0),
                bm25_score=by_id[cid][1],
            )
            for rank, (cid, score) in enumerate(ranked, start=1)
        ]
        relevance = max(dense.values(), default=0.0)
        return Retrieval(passages, relevance, relevance >= self.scope_threshold)


def validate_query(query: str) -> str:
    """Strip a query and reject empty or oversize ones with a plain message."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidInput("query: must contain some text")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(f"query: at most {MAX_QUERY_CHARS} characters (got {len(query)})")
    return query.strip()
