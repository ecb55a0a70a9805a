"""What a process serves, as one snapshot: the modules, their search indexes, and the published digests they
came from.

Built at start, either by syncing the corpus into the index (the embedded default, or `mentor ingest`) or by
reading what `mentor ingest` published (a replica), and on a shared index rebuilt when the published modules
change. The chat swaps snapshots whole, so each question is answered from one consistent catalog; a module whose
digest did not change keeps its search index.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mentor.corpus import Module, Pointer, chunk_corpus, load_corpus, parse_module
from mentor.embeddings import Embedder, embed_cached
from mentor.front_matter import unknown_module
from mentor.index import (
    Index,
    IngestReport,
    build_index,
    load_vectors,
    publication,
    published,
    read_chunks,
    read_sources,
)
from mentor.retrieve import ModuleIndex, Retriever, index_modules
from mentor.safety import module_urls
from mentor.scope import ScopeExamples
from mentor.settings import Settings
from mentor.text import split_units
from mentor.understanding import Decisions, Reader

log = logging.getLogger(__name__)
# A question this close to the topic a module sends learners elsewhere for is told where to go: the golden dev
# questions reach at most 0.55 against "why decode is memory-bound" (int4 for decoding, token generation), the
# questions asking why decode is memory-bound 0.68 to 0.86.
POINTER_FLOOR = 0.6


@dataclass(frozen=True, slots=True)
class Catalog:
    """The modules served now, their retriever, each module's published digest and the links its text holds."""

    modules: dict[str, Module]
    retriever: Retriever
    digests: dict[str, str]
    urls: dict[str, frozenset[str]]
    reader: Reader  # reads each question once, with its module's words (`ModuleIndex.words`)
    planted: frozenset[str] = frozenset()  # module sentences that read as instructions: never quoted nor obeyed
    # Each module's pointers to other modules, with the vector of the topic each is for.
    pointers: Mapping[str, tuple[tuple[Pointer, np.ndarray], ...]] = field(default_factory=dict)

    def pointed(self, module_id: str, vector: np.ndarray) -> tuple[Pointer, ...]:
        """The pointers of a module whose topic a question (its vector) is about (`POINTER_FLOOR`)."""
        return tuple(p for p, topic in self.pointers.get(module_id, ()) if float(vector @ topic) >= POINTER_FLOOR)

    @property
    def stamp(self) -> str:
        """One digest for the whole catalog: equal stamps, equal content."""
        joined = " ".join(f"{module_id}={digest}" for module_id, digest in sorted(self.digests.items()))
        return hashlib.sha256(joined.encode()).hexdigest()[:16]

    @property
    def chunk_count(self) -> int:
        return sum(len(index.chunks) for index in self.retriever.modules.values())

    def module(self, module_id: str) -> Module:
        if module_id not in self.modules:
            raise unknown_module(module_id, list(self.modules))
        return self.modules[module_id]

    def describe(self) -> str:
        count = len(self.modules)
        return f"{self.chunk_count} chunks of {count} module{'s' if count != 1 else ''}"


def make_catalog(
    settings: Settings,
    embedder: Embedder,
    modules: Mapping[str, Module],
    indexes: Mapping[str, ModuleIndex],
    digests: Mapping[str, str],
    examples: ScopeExamples | None = None,
) -> Catalog:
    """A catalog of `modules`; the scope examples are loaded (embedded) unless a previous catalog's are given."""
    # Fitting the reader's classifiers is most of a warm start (~3-5 s on 2 cores): said before, timed after.
    log.info("building the reader from its labelled examples…")
    started = time.perf_counter()
    decisions = Decisions.load(
        embedder,
        words={m: index.words for m, index in indexes.items()},
        lacking_examples=settings.lacking_examples,
        follow_up_examples=settings.follow_up_examples,
        cache_dir=settings.model_cache_dir,
    )
    retriever = Retriever(
        embedder,
        indexes,
        rrf_k=settings.rrf_k,
        scope_threshold=settings.scope_threshold,
        scope_weight=settings.scope_weight,
        examples=examples if examples is not None else scope_examples(settings, embedder, indexes),
        example_weight=settings.scope_example_weight,
        topicality=decisions.lacking.topicality,
        cache_size=settings.cache_entries,
    )
    urls = {m.id: module_urls(m.body) for m in modules.values()}
    reader = Reader(embedder, decisions, cache_size=settings.cache_entries)
    units = sorted({u.text for index in indexes.values() for c in index.chunks for u in split_units(c.text)})
    planted = reader.planted(units, cache_dir=settings.model_cache_dir)
    pointers = {m.id: _pointer_vectors(m.pointers, embedder, settings.model_cache_dir) for m in modules.values()}
    log.info("reader built in %.1f s", time.perf_counter() - started)
    return Catalog(dict(modules), retriever, dict(digests), urls, reader, planted, pointers)


def _pointer_vectors(
    pointers: tuple[Pointer, ...], embedder: Embedder, cache_dir: Path | None
) -> tuple[tuple[Pointer, np.ndarray], ...]:
    if not pointers:
        return ()
    vectors = embed_cached(embedder, [p.topic for p in pointers], cache_dir, kind="pointers")
    return tuple(zip(pointers, vectors, strict=True))


def scope_examples(settings: Settings, embedder: Embedder, indexes: Mapping[str, ModuleIndex]) -> ScopeExamples:
    """The labelled example questions scope weighs, embedded as their module reads them; none when their weight
    is 0."""
    if not settings.scope_example_weight:
        return ScopeExamples()

    def read(module_id: str, text: str) -> str:
        index = indexes.get(module_id)
        return index.words.read(text)[0] if index is not None else text

    return ScopeExamples.load(settings.scope_examples, embedder, read=read, cache_dir=settings.model_cache_dir)


def sync_catalog(
    settings: Settings,
    embedder: Embedder,
    index: Index,
    *,
    progress: Callable[[int], None] | None = None,
    on_plan: Callable[[int], None] | None = None,
) -> tuple[Catalog, IngestReport]:
    """Bring the index in line with the corpus directory (embedding only what changed) and serve the result."""
    modules = load_corpus(settings.corpus_dir)
    chunks = chunk_corpus(modules, chunk_size=settings.chunk_size, chunk_overlap=settings.chunk_overlap)
    report = build_index(index, modules, chunks, embedder, progress=progress, on_plan=on_plan)
    vectors = load_vectors(index.chunks, [c.id for c in chunks])
    digests = {p.module_id: p.digest for p in publication(modules, chunks)}
    indexes = index_modules(chunks, vectors, {m.id: m for m in modules})
    catalog = make_catalog(settings, embedder, {m.id: m for m in modules}, indexes, digests)
    return catalog, report


def read_catalog(settings: Settings, embedder: Embedder, index: Index, previous: Catalog | None) -> Catalog | None:
    """The catalog the index publishes, or None when it is what `previous` already serves.

    Only changed modules are read and indexed again. A read that finds chunks missing (an ingest under way) raises
    `NotReady`, and the caller keeps serving `previous`.
    """
    records = published(index)
    digests = {p.module_id: p.digest for p in records}
    if previous is not None and digests == previous.digests:
        return None
    keep = {p.module_id for p in records if previous is not None and previous.digests.get(p.module_id) == p.digest}
    changed = [p for p in records if p.module_id not in keep]
    sources = read_sources(index, [p.module_id for p in changed])
    chunks, vectors = read_chunks(index, [cid for p in changed for cid in p.chunk_ids])
    parsed = {m: parse_module(source, Path(f"{m}.md")) for m, source in sources.items()}
    fresh = index_modules(chunks, vectors, parsed)
    modules: dict[str, Module] = {}
    indexes: dict[str, ModuleIndex] = {}
    for record in records:
        if record.module_id in keep:
            assert previous is not None
            modules[record.module_id] = previous.modules[record.module_id]
            indexes[record.module_id] = previous.retriever.modules[record.module_id]
        elif record.module_id in fresh:  # a module with no chunks has nothing to answer from
            modules[record.module_id] = parsed[record.module_id]
            indexes[record.module_id] = fresh[record.module_id]
    if changed:
        log.info("index publishes %d modules; read %s", len(records), ", ".join(p.module_id for p in changed))
    return make_catalog(
        settings, embedder, modules, indexes, digests, previous.retriever.examples if previous else None
    )
