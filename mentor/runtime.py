"""Assemble the heavy, long-lived pieces once: embedder, Chroma, the synced index, retriever, database.

Only the edges (`mentor.api` lifespan and `mentor.cli`) call `build_runtime`; everything below receives
the pieces it needs as arguments.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

from chromadb.api.models.Collection import Collection
from sqlalchemy import Engine

from mentor.chat import ChatService
from mentor.chat_model import ChatModel, OpenAIChatModel
from mentor.conversations import MemoryConversationStore, MemoryRateLimiter
from mentor.corpus import Chunk, Module, chunk_corpus, load_corpus
from mentor.db import make_engine, ping
from mentor.embeddings import Embedder, SentenceTransformerEmbedder
from mentor.engines.extractive import ExtractiveEngine
from mentor.engines.llm import LLMEngine
from mentor.errors import NotReady
from mentor.index import (
    IngestReport,
    build_index,
    connect_collection,
    describe_unreachable,
    index_status,
    is_unreachable,
)
from mentor.privacy import load_or_create_secret
from mentor.prompts import load_prompt
from mentor.record import SignalSink
from mentor.retrieve import Retriever
from mentor.settings import Settings
from mentor.signals.schema import migrate
from mentor.signals.writer import SignalWriter

log = logging.getLogger(__name__)
# A load balancer's readiness probe gives up after a few seconds: answer within that, even when a dependency hangs.
READY_TIMEOUT_S = 2.0


@dataclass(frozen=True, slots=True)
class Readiness:
    """Whether questions can be answered now, and the state of each part (degraded parts named)."""

    answerable: bool
    detail: dict[str, str] = field(default_factory=dict)

    @property
    def status(self) -> str:
        """One of ready, degraded (answering, but a part is down) or not ready (no question can be answered)."""
        if not self.answerable:
            return "not ready"
        return "ready" if all(value.startswith("ok") for value in self.detail.values()) else "degraded"


@dataclass
class Runtime:
    """Everything a request needs that is expensive to build."""

    settings: Settings
    embedder: Embedder
    collection: Collection
    modules: dict[str, Module]
    chunks: list[Chunk]
    retriever: Retriever
    database: Engine  # the signals database (SQLAlchemy's engine; "engine" names the answer engines)
    ingest_report: IngestReport
    chat: ChatService
    writer: SignalWriter
    analyst_token: str

    def module(self, module_id: str | None) -> Module:
        """Resolve a module id; it may be omitted only while the corpus holds a single module."""
        return self.chat.module(module_id)

    def readiness(self, timeout_s: float = READY_TIMEOUT_S) -> Readiness:
        """Check what a question needs and report the rest.

        A question needs only what start-up loaded: the module vectors and BM25 live in memory, so answers go
        on while the Chroma server is down, and signals go to the spool while the database is. Those two are
        reported as degraded, never as not ready: a 503 there would take every replica out of a load balancer
        while each of them could still answer.
        """
        pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="readiness")
        probes = {
            "index": (pool.submit(index_status, self.collection), "answers use the vectors loaded at start"),
            "database": (pool.submit(_database_status, self.database), "signals are spooled until it is back"),
        }
        # Do not wait for a probe stuck on a hung server: the report says so, and the clients' time-outs end it.
        pool.shutdown(wait=False)
        modules = self.retriever.module_ids
        loaded = f"{len(self.chunks)} chunks of {len(modules)} module{'s' if len(modules) != 1 else ''}"
        detail = {"retrieval": f"ok ({loaded} in memory)" if modules else "no module loaded: nothing can be answered"}
        deadline = time.monotonic() + timeout_s
        for name, (probe, consequence) in probes.items():
            try:
                state = probe.result(timeout=max(0.0, deadline - time.monotonic()))
            except FutureTimeout:
                state = f"unavailable: no answer within {timeout_s:g} s"
            detail[name] = state if state.startswith("ok") else f"{state}; {consequence}"
        return Readiness(answerable=bool(modules), detail=detail)


def build_runtime(
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    chat_model: ChatModel | None = None,
    progress: Callable[[int], None] | None = None,
    on_plan: Callable[[int], None] | None = None,
) -> Runtime:
    """Load the corpus, bring the index in line with it (embedding only what changed), open the database.

    A Chroma server that is not up yet is waited for (the `chroma_wait_s` setting); one that stays away, or
    goes away during the sync, is a `NotReady` with one plain sentence.
    """
    # Owner-only: the data directory holds the index, the signals database, the spool and the keys.
    settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    modules = load_corpus(settings.corpus_dir)
    chunks = chunk_corpus(modules, chunk_size=settings.chunk_size, chunk_overlap=settings.chunk_overlap)
    embedder = embedder or SentenceTransformerEmbedder(settings.embedding_model, batch_size=settings.embed_batch_size)
    collection = connect_collection(settings, embedder, wait_s=settings.chroma_wait_s)
    try:
        report = build_index(collection, chunks, embedder, progress=progress, on_plan=on_plan)
        retriever = Retriever(
            collection,
            embedder,
            chunks,
            rrf_k=settings.rrf_k,
            scope_threshold=settings.scope_threshold,
            scope_weight=settings.scope_weight,
        )
    except Exception as exc:
        if not is_unreachable(exc):
            raise
        # Reached a moment ago, so not a server still starting: report it in one line rather than retry.
        raise NotReady(
            f"Chroma server at {settings.chroma_url} went away during start-up ({describe_unreachable(exc)})"
        ) from exc
    by_id = {m.id: m for m in modules}
    engine = make_engine(settings.database)
    try:
        migrate(engine)
    except Exception as exc:  # the writer spools until the database is back, then migrates it
        log.warning("signals database not reachable at start (%s); signals will be spooled", type(exc).__name__)
    writer = SignalWriter(engine, settings.data_dir / "signals.spool", embed=embedder.embed_query)
    chat = build_chat(settings, by_id, retriever, embedder, sink=writer, chat_model=chat_model)
    return Runtime(
        settings=settings,
        embedder=embedder,
        collection=collection,
        modules=by_id,
        chunks=chunks,
        retriever=retriever,
        database=engine,
        ingest_report=report,
        chat=chat,
        writer=writer,
        analyst_token=analyst_token(settings),
    )


def _database_status(engine: Engine) -> str:
    try:
        ping(engine)
    except NotReady as exc:
        return f"unavailable ({exc.message})"
    return "ok"


def analyst_token(settings: Settings) -> str:
    """The configured analyst token, or the one generated on first start and kept in the data directory."""
    if settings.analyst_token:
        return settings.analyst_token.get_secret_value()
    path = settings.data_dir / "analyst.token"
    token = load_or_create_secret(path)
    log.info("analyst token (no MENTOR_ANALYST_TOKEN set) is kept in %s", path.resolve())
    return token


def build_chat(
    settings: Settings,
    modules: dict[str, Module],
    retriever: Retriever,
    embedder: Embedder,
    *,
    sink: SignalSink,
    chat_model: ChatModel | None = None,
) -> ChatService:
    """The chat service: the LLM engine when one is configured (or given), the extractive engine always.

    Every answered question goes to `sink`: the signal writer, or `NO_SINK` where nothing is to be logged.
    """
    if chat_model is None and settings.llm_enabled:
        chat_model = OpenAIChatModel(
            base_url=settings.llm_base_url,
            api_key=settings.llm_api_key.get_secret_value() if settings.llm_api_key else None,
            model=settings.llm_model,
            timeout_s=settings.llm_timeout_s,
        )
    llm = None
    if chat_model is not None:
        llm = LLMEngine(
            chat_model,
            load_prompt(settings.prompts_dir),
            max_tool_rounds=settings.llm_max_tool_rounds,
            history_chars=settings.llm_history_tokens * 4,
        )
    key = (
        settings.pseudonym_key.get_secret_value()
        if settings.pseudonym_key
        else load_or_create_secret(settings.data_dir / "pseudonym.key")
    )
    return ChatService(
        modules=modules,
        retriever=retriever,
        extractive=ExtractiveEngine(embedder),
        llm=llm,
        conversations=MemoryConversationStore(
            ttl_s=settings.conversation_ttl_s, max_conversations=settings.max_conversations
        ),
        limiter=MemoryRateLimiter(settings.rate_limit_per_minute),
        pseudonym_key=key.encode("utf-8"),
        top_k=settings.top_k,
        sink=sink,
    )
