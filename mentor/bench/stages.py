"""Where one new question's time goes: the stages of answering it, timed in-process on the functions the service
calls, for one embedding backend per child process (neither pays for the other's imports, threads or memory).

`stage_breakdown(backend=..., ...)` runs `main()` in a child process, which:
1. loads that backend's embedder and indexes the seed corpus in memory (the server, too, searches vectors held
   in memory; Chroma is not on a question's path);
2. builds the chat as the server does (`build_chat`, the LLM engine against the bench's stub LLM) and warms it;
3. for each new question, takes the steps of `ChatService.consult` and `ChatService._answer_with_llm` one at a time
   (the same functions, in the same order), timing each. Inside the reader and `Retriever.search` the embedder,
   BM25 and scope calls are wrapped on this process's own objects; what remains of the search is fusion and passage
   building,
   less the dense dot product, which is re-timed apart on the same vectors (a few microseconds);
4. answers another new question end to end (`ChatService.ask`), which includes everything the steps leave out
   (validation, the conversation, thread hand-offs), and builds its signal record as the writer thread does
   (`question_record`, which embeds the redacted question: from the query cache when the text is the query's).

The medians of each stage over the questions (after a few unmeasured ones) are returned with their sum, the
end-to-end median, the times of the very first question (what warming at start-up left for it), and the
process's figures (model load time, resident memory, whether torch was imported).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mentor.bench.load import percentile
from mentor.bench.procs import rss_mb, run_child

# (key, what the report calls it), in the order a question meets them.
STAGES: tuple[tuple[str, str], ...] = (
    ("read", "read the question (clauses, spelling, the decisions from examples; mentor.understanding)"),
    ("embed", "embed the query"),
    ("dense", "dense search (dot product, top k)"),
    ("bm25", "BM25 (query terms, typo mapping, scores)"),
    ("fusion", "fusion, passages, rest of Retriever.search"),
    ("scope", "scope (weighted coverage, example margin)"),
    ("plan", "planning (calculators) and the engine's question"),
    ("engine", "LLM engine's own work (prompt, citations, Markdown)"),
    ("llm_call", "LLM call (OpenAI SDK, HTTP, the stub)"),
    ("grounding", "grounding check"),
    ("record", "signal record: redaction, JSON (writer thread)"),
    ("record_embed", "signal record: embedding the redacted question (writer thread)"),
)
# Stages on a question's request path; the record is built by the writer thread, after the answer is sent.
REQUEST_PATH = tuple(key for key, _ in STAGES if not key.startswith("record"))
# Questions of each list answered first, unmeasured: the first calls pay lazy set-up (the SDK's connection ...).
STAGE_WARMUP = 3


@dataclass(frozen=True)
class StageSpec:
    """One child process's job: which backend, over which corpus, against which stub, on which questions."""

    backend: str
    corpus_dir: str
    llm_base_url: str
    staged: list[str]  # answered step by step
    end_to_end: list[str]  # answered with ChatService.ask, then turned into a signal record
    warmup: int = STAGE_WARMUP


def stage_breakdown(spec: StageSpec, *, timeout_s: float = 600.0) -> dict:
    """Run one backend's stage measurement in a child process and return its summary."""
    return run_child("mentor.bench.stages", spec, timeout_s=timeout_s, what=f"stage measurement for {spec.backend}")


def main() -> None:
    """Child-process entry point: spec on stdin, summary on stdout."""
    spec = StageSpec(**json.loads(sys.stdin.read()))
    json.dump(asyncio.run(measure(spec)), sys.stdout)


class Clock:
    """Exclusive time per stage: time spent in a nested stage counts for it alone, not for the one around it."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = defaultdict(float)
        self._open: list[list[Any]] = []  # [name, time spent in nested stages]

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        self._open.append([name, 0.0])
        try:
            yield
        finally:
            _, nested = self._open.pop()
            elapsed = time.perf_counter() - started
            self.totals[name] += elapsed - nested
            if self._open:
                self._open[-1][1] += elapsed

    @property
    def current(self) -> str | None:
        return self._open[-1][0] if self._open else None

    def timed(self, fn: Callable[..., Any], name: str | Callable[[], str]) -> Callable[..., Any]:
        """`fn`, with each call counted for `name` (or for what `name()` says when called)."""

        def call(*args: Any, **kwargs: Any) -> Any:
            with self.stage(name() if callable(name) else name):
                return fn(*args, **kwargs)

        return call

    def timed_async(self, fn: Callable[..., Any], name: str) -> Callable[..., Any]:
        async def call(*args: Any, **kwargs: Any) -> Any:
            with self.stage(name):
                return await fn(*args, **kwargs)

        return call


class TimedEmbedder:
    """The embedder, with `embed_query` counted for a stage; remembers the last query vector."""

    def __init__(self, embedder: Any, clock: Clock, name: str) -> None:
        self._embedder = embedder
        self._clock = clock
        self._name = name
        self.last: np.ndarray | None = None
        self.last_text = ""

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_queries([text])[0]

    def embed_queries(self, texts: Any) -> np.ndarray:
        with self._clock.stage(self._name):
            vectors = self._embedder.embed_queries(texts)
        self.last, self.last_text = vectors[-1], texts[-1]
        return vectors

    def __getattr__(self, name: str) -> Any:  # name, dim, embed_documents ...: the embedder's own
        return getattr(self._embedder, name)


class Collected:
    """A signal sink that keeps what it is given (the writer would turn it into a record on its thread)."""

    def __init__(self) -> None:
        self.items: list[Any] = []

    def submit(self, item: Any) -> None:
        self.items.append(item)


async def measure(spec: StageSpec) -> dict:
    """Build the chat for `spec.backend`, then time the stages of each new question (see the module docstring)."""
    import mentor.consult as consult_module
    from mentor.answer import ChatInput
    from mentor.catalog import make_catalog
    from mentor.chat import asked
    from mentor.chat_model import OpenAIChatModel
    from mentor.citations import ground
    from mentor.consult import consult
    from mentor.corpus import chunk_corpus, load_corpus
    from mentor.embeddings import make_embedder
    from mentor.retrieve import index_modules
    from mentor.runtime import LearnerState, build_chat
    from mentor.settings import Settings
    from mentor.signals.records import question_record

    started = time.perf_counter()
    settings = Settings.model_construct(
        data_dir=Path(tempfile.mkdtemp(prefix="mentor-stages-")),
        corpus_dir=Path(spec.corpus_dir),
        embedding_backend=spec.backend,
        llm_base_url=spec.llm_base_url,
        llm_model="stub",
        rate_limit_per_client_per_minute=10_000,  # every question is this process's
    )
    embedder = make_embedder(settings)
    embedder.embed_query("warm up")
    load_s = time.perf_counter() - started
    modules = load_corpus(settings.corpus_dir)
    chunks = chunk_corpus(modules, chunk_size=settings.chunk_size, chunk_overlap=settings.chunk_overlap)
    vectors = embedder.embed_documents([c.embedding_text for c in chunks])
    indexes = index_modules(chunks, {c.id: v for c, v in zip(chunks, vectors, strict=True)}, {m.id: m for m in modules})
    catalog = make_catalog(settings, embedder, {m.id: m for m in modules}, indexes, {})
    clock = Clock()
    chat_model = OpenAIChatModel(
        base_url=settings.llm_base_url, api_key=None, model="stub", timeout_s=settings.llm_timeout_s
    )
    chat_model.complete = clock.timed_async(chat_model.complete, "llm_call")  # type: ignore[method-assign]
    sink = Collected()
    chat = build_chat(
        settings,
        catalog,
        embedder,
        sink=sink,
        chat_model=chat_model,
        state=LearnerState.in_memory(settings),
        pseudonym_key=b"bench-stages",
    )
    assert chat.llm is not None
    chat.warm()
    ready_s = time.perf_counter() - started

    # The wrappers count on this process's own retriever: the service code is not changed to be measured.
    retriever = catalog.retriever
    query_embedder = TimedEmbedder(embedder, clock, "embed")
    retriever.embedder = query_embedder
    catalog.reader.embedder = query_embedder
    retriever.coverage = clock.timed(retriever.coverage, "scope")  # type: ignore[method-assign]
    retriever.search = clock.timed(retriever.search, "fusion")  # type: ignore[method-assign]
    plan = clock.timed(consult_module.plan_tools, "plan")
    consult_module.plan_tools = plan  # type: ignore[attr-defined]
    retriever.examples = _TimedExamples(retriever.examples, clock)
    for index in retriever.modules.values():
        index.bm25.get_scores = clock.timed(index.bm25.get_scores, "bm25")
    record_embedder = TimedEmbedder(embedder, clock, "record_embed")

    async def staged(message: str) -> dict[str, float]:
        """The steps of ChatService.consult and _answer_with_llm, in order, for one new question."""
        clock.totals.clear()
        module = catalog.module(next(iter(catalog.modules)))
        with clock.stage("read"):  # the reading, its searches and its plan (mentor.consult), less what is wrapped
            grounds = consult(
                message, (), module_id=module.id, reader=catalog.reader, retriever=retriever, top_k=chat.top_k
            )
            question = asked(catalog, module, grounds, message, "explain", ())
        if not grounds.answerable:
            raise RuntimeError(f"a bench question is out of the module's scope: {message!r}")
        depth = chat.top_k + 2
        answer = None
        with clock.stage("engine"):
            async for event in chat.llm.run(question, stream=False):
                answer = event
        with clock.stage("grounding"):
            grounding = ground(answer, question)
        if not grounding.grounded:
            raise RuntimeError("the stub's answer failed the grounding check: the LLM path was not measured")
        # The dense ranking again, alone, on the same vectors: it is inline numpy in Retriever.search.
        index = retriever.modules[module.id]
        began = time.perf_counter()
        similarities = index.vectors @ grounds.reading.vector
        np.argsort(-similarities, kind="stable")[: min(len(index.chunks), max(4 * depth, 20))]
        dense_s = time.perf_counter() - began
        times = dict(clock.totals)
        times["dense"] = dense_s
        times["fusion"] = max(times["fusion"] - dense_s, 0.0)
        return times

    async def end_to_end(message: str, n: int) -> dict[str, float]:
        """ChatService.ask for one new question, then its signal record as the writer builds it."""
        began = time.perf_counter()
        answered = await chat.ask(ChatInput(message=message, learner_id=f"bench-stages-{n}"))
        total_s = time.perf_counter() - began
        if answered.answer.engine != "llm" or answered.answer.fallback_reason or answered.answer.out_of_scope:
            raise RuntimeError(f"not answered by the LLM engine: {answered.answer.engine}")
        clock.totals.clear()
        record_embedder.last_text = ""
        with clock.stage("record"):
            question_record(sink.items.pop(), embed=record_embedder.embed_query)
        # The record takes the reading's vector; the writer embeds only a question read without one, and the query
        # cache answers it only when that text is the one retrieval embedded (its key: spaces collapsed, lower case).
        embedded = record_embedder.last_text
        missed = bool(embedded) and _key(embedded) != _key(query_embedder.last_text)
        return {"end_to_end": total_s, "record_embed_missed": float(missed), **clock.totals}

    samples: dict[str, list[float]] = defaultdict(list)
    misses: list[float] = []
    first_ms: dict[str, float] = {}
    for n, (first, second) in enumerate(zip(spec.staged, spec.end_to_end, strict=True)):
        times = await staged(first) | await end_to_end(second, n)
        if n == 0:  # what the first question after start-up pays, warm() notwithstanding
            first_ms = {key: value * 1000 for key, value in times.items() if key != "record_embed_missed"}
            first_ms["sum"] = sum(times.get(key, 0.0) for key in REQUEST_PATH) * 1000
        if n < spec.warmup:
            continue
        for key, _ in STAGES:
            samples[key].append(times.get(key, 0.0) * 1000)
        samples["end_to_end"].append(times["end_to_end"] * 1000)
        samples["sum"].append(sum(times.get(key, 0.0) for key in REQUEST_PATH) * 1000)
        misses.append(times["record_embed_missed"])
    return {
        "backend": spec.backend,
        "embedder": type(embedder).__name__,
        "questions": len(samples["sum"]),
        "median_ms": {key: statistics.median(values) for key, values in samples.items()},
        "p90_ms": {key: percentile(sorted(values), 90) for key, values in samples.items()},
        "first_ms": first_ms,
        "record_embed_miss_share": statistics.fmean(misses) if misses else None,
        "model_load_s": load_s,
        "ready_s": ready_s,
        "rss_mb": rss_mb(os.getpid()),
        "torch_imported": "torch" in sys.modules,
    }


def _key(text: str) -> str:
    return " ".join(text.split()).lower()


class _TimedExamples:
    """Scope examples whose `margin` is counted as scope."""

    def __init__(self, examples: Any, clock: Clock) -> None:
        self._examples = examples
        self.margin = clock.timed(examples.margin, "scope")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._examples, name)
