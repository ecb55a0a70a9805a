"""Hybrid retrieval, read-only: dense (Chroma) and BM25 rankings fused by reciprocal rank, per module."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import bm25s
import numpy as np
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS as STOP_WORDS

from mentor.corpus import Chunk, Module
from mentor.embeddings import Embedder
from mentor.errors import InvalidInput, NotFound
from mentor.scope import ScopeExamples
from mentor.text import MAX_MESSAGE_CHARS, tokenize
from mentor.text.profile import ModuleProfile
from mentor.text.units import split_units
from mentor.understanding import ModuleWords
from mentor.understanding.lexicon import QUANTITY, WORD, Lexicon
from mentor.understanding.numerals import number_words
from mentor.understanding.spelling import frequency

MAX_QUERY_CHARS = MAX_MESSAGE_CHARS  # a follow-up joined to its question is cut to fit (mentor.consult)
# How much a word says about what is asked, by how rare it is in English (wordfreq's Zipf frequency): "fp16" (0)
# weighs 6, "memory" (4.9) 1.1, "tips" (4.6) 1.4, "run" (5.6) the floor. Coverage is the weighted share of the
# question's words the module uses: a chat or asking word the module lacks ("tips", "exam") costs it little.
RARE = 6.0
MIN_WEIGHT = 0.25
# Popular questions repeat (30% of the bench's mix): their retrieval (BM25, fusion, scope: ~1.7 ms) is kept, as
# their vector is (`BatchingEmbedder`'s query cache).
SEARCH_CACHE_SIZE = 2048


def english_weight(word: str) -> float:
    """How much a word says about what is asked, by how rare it is in English (`RARE`, at least `MIN_WEIGHT`)."""
    return max(MIN_WEIGHT, RARE - frequency(word))


def rarity(text: str) -> dict[str, float]:
    """Each term of `text` (a stem, as `tokenize` makes it) by its word's `english_weight`, capped at 1: a word more
    common in English than Zipf 5 ("does", "work", "stage") weighs less, a rarer one no more than "zero" or "memory"
    (which of those says more is the module's word weights' to say). A stem written two ways weighs its rarer."""
    found: dict[str, float] = {}
    for word in WORD.findall(text.lower()):
        for term in tokenize(word):
            found[term] = max(found.get(term, 0.0), min(1.0, english_weight(word)))
    return found


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
    dense_max: float
    coverage: float


@dataclass(frozen=True, slots=True, eq=False)  # equal only to itself: searches are cached per index
class ModuleIndex:
    """One module's search state: its chunks in reading order, their vectors (row i for chunk i), BM25, vocabulary.

    Built once per module version; a reload that leaves a module unchanged keeps its `ModuleIndex`.
    """

    chunks: tuple[Chunk, ...]
    vectors: np.ndarray
    bm25: bm25s.BM25
    vocab: frozenset[str]
    profile: ModuleProfile  # word weights and boilerplate units, for choosing what to quote
    words: ModuleWords  # its words, spelling and glossary, as the reader reads a question with them
    # The terms of each subject it teaches by a name that names something (`ModuleProfile.subjects`: "tensor
    # parallel", "zero"; not "Why it matters"), for telling a subject asked about from everyday module words.
    subjects: tuple[frozenset[str], ...] = ()

    @classmethod
    def build(
        cls, chunks: Sequence[Chunk], vectors: Mapping[str, np.ndarray], module: Module | None = None
    ) -> ModuleIndex:
        """Index one module's chunks; `vectors` maps every chunk id to its stored embedding; the module's front
        matter gives its glossary and the prerequisites its opening names."""
        tokens = [tokenize(c.embedding_text) for c in chunks]
        bm25 = bm25s.BM25()
        bm25.index(tokens, show_progress=False)
        matrix = np.asarray([vectors[c.id] for c in chunks], dtype=np.float32)
        vocab = frozenset(t for doc in tokens for t in doc)
        glossary = module.glossary if module is not None else ()
        words = ModuleWords.of(
            Lexicon.of([c.embedding_text for c in chunks], glossary),
            [u.text for c in chunks for u in split_units(c.text)],
        )
        prerequisites = module.prerequisites if module is not None else ()
        profile = ModuleProfile.of(chunks, prerequisites=prerequisites, glossary=glossary)
        terms = [(name, frozenset(tokenize(name))) for name in profile.subjects]
        subjects = tuple(
            t for name, t in terms if t and (words.names_something(name) or t <= profile.names)
        )  # fmt: skip
        return cls(tuple(chunks), matrix, bm25, vocab, profile, words, subjects)


def index_modules(
    chunks: Sequence[Chunk],
    vectors: Mapping[str, np.ndarray],
    modules: Mapping[str, Module] | None = None,
) -> dict[str, ModuleIndex]:
    """A `ModuleIndex` per module of `chunks`, in the order modules first appear, with each module's front matter."""
    by_module: dict[str, list[Chunk]] = {}
    for chunk in chunks:
        by_module.setdefault(chunk.module_id, []).append(chunk)
    modules = modules or {}
    return {m: ModuleIndex.build(part, vectors, modules.get(m)) for m, part in by_module.items()}


class Retriever:
    """Searches one module at a time over its `ModuleIndex`: BM25 and the chunk vectors live in memory.

    A module holds tens of chunks, so an exact dot product over its vectors is cheaper than a Chroma query per
    question (12% of the service's CPU in the profile) and never misses a neighbour.
    """

    def __init__(
        self,
        embedder: Embedder,
        modules: Mapping[str, ModuleIndex],
        *,
        rrf_k: int = 60,
        scope_threshold: float = 0.45,
        scope_weight: float = 0.5,
        examples: ScopeExamples | None = None,
        example_weight: float = 0.0,
        topicality: Callable[[str], float] = lambda word: 1.0,
        cache_size: int = SEARCH_CACHE_SIZE,
    ) -> None:
        self.embedder = embedder
        self.topicality = topicality  # how surely a word the module lacks names a topic (the reader's decision)
        self._rrf_k = rrf_k
        self.scope_threshold = scope_threshold
        self.scope_weight = scope_weight
        self.examples = examples or ScopeExamples()
        self.example_weight = example_weight
        self.modules: dict[str, ModuleIndex] = dict(modules)
        # Keyed by the question as asked and the module's index searched: a module re-indexed since misses.
        self._cached_search = functools.lru_cache(maxsize=cache_size)(self._search)

    def coverage(self, query: str, module_id: str) -> float:
        """The share of what `query` asks about that the module uses: its words weighted by how rare they are in
        English (`RARE`), a word the module lacks also by how surely it names a topic (`topicality`: "solve" and
        "quantities" ask, "fp8" names), numbers and quantities left out (arguments: "13B", "2k", "80GB" say nothing
        of what is asked, whether or not the module writes them). 0.5 for a query of numbers and stop words."""
        words = self.modules[module_id].words
        known = total = 0.0
        for word in WORD.findall(query.lower()):
            if len(word) < 2 or word in STOP_WORDS or QUANTITY.fullmatch(word):
                continue
            weight = english_weight(word)
            if words.knows(word):
                known += weight
            elif word in number_words():  # "seventy billion": an argument, like "70B" ("zero" is the module's ZeRO)
                continue
            else:
                weight *= self.topicality(word)
            total += weight
        return known / total if total else 0.5

    @property
    def module_ids(self) -> list[str]:
        """Modules this retriever can search."""
        return list(self.modules)

    def search(
        self, query: str, module_id: str, k: int = 4, *, mode: str = "hybrid", vector: np.ndarray | None = None
    ) -> Retrieval:
        """Return the `k` best passages of `module_id` for `query`, with the module's relevance to it.

        `query` as the reader read it, with its `vector` (the chat's); without a vector (the search route, the CLI)
        the query is read here the same way: spelling corrected toward the module, its glossary spelled out.
        `mode` "dense" or "bm25" ranks by one retriever alone (for evaluation); "hybrid" fuses both.
        """
        if mode not in ("hybrid", "dense", "bm25"):
            raise InvalidInput(f"mode: must be hybrid, dense or bm25 (got {mode!r})")
        query = validate_query(query)
        index = self.modules.get(module_id)
        if index is None:
            raise NotFound(f"unknown module {module_id!r}; known modules: {', '.join(self.modules) or 'none'}")
        if not 1 <= k <= 50:
            raise InvalidInput(f"k: must be between 1 and 50 (got {k})")
        if vector is None:
            query = index.words.read(query)[0]
            vector = self.embedder.embed_query(query)
        return self._cached_search(query, index, module_id, k, mode, Vector(vector))

    def _search(self, query: str, module: ModuleIndex, module_id: str, k: int, mode: str, wrapped: Vector) -> Retrieval:
        chunks = module.chunks
        vector = wrapped.array
        depth = min(len(chunks), max(4 * k, 20))
        similarities = module.vectors @ vector
        top = np.argsort(-similarities, kind="stable")[:depth]
        dense = {chunks[i].id: float(similarities[i]) for i in top}
        terms = tokenize(query)
        coverage = self.coverage(query, module_id)
        # A question of stop words only ("what is it?") has no terms: BM25 has nothing to say about it.
        bm25_scores = module.bm25.get_scores(terms) if terms else np.zeros(len(chunks))
        fused: dict[str, float] = {}
        if mode != "bm25":
            for rank, cid in enumerate(dense, start=1):
                fused[cid] = 1.0 / (self._rrf_k + rank)
        if mode != "dense":
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
        dense_max = max(dense.values(), default=0.0)
        margin = self.examples.margin(module_id, vector) if self.example_weight else 0.0
        relevance = self.scope_weight * dense_max + (1 - self.scope_weight) * coverage + self.example_weight * margin
        return Retrieval(passages, relevance, relevance >= self.scope_threshold, dense_max, coverage)


@dataclass(frozen=True, slots=True, eq=False)
class Vector:
    """A query vector as a search-cache key, by its values: one text is searched with more than one vector (a part
    read with the one before it searches its text with the two pooled), and a search made with one vector is no
    answer for another. A repeated question hits: its vector comes from the embedder's cache."""

    array: np.ndarray
    key: bytes = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", self.array.tobytes())

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vector) and self.key == other.key


def validate_query(query: str) -> str:
    """Strip a query and reject empty or oversize ones with a plain message."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidInput("query: must contain some text")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(f"query: at most {MAX_QUERY_CHARS} characters (got {len(query)})")
    return query.strip()
