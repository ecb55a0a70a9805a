"""Assemble the heavy, long-lived pieces once: embedder, Chroma, the catalog, learner state, database, writer.

Only the edges (`mentor.api` lifespan and `mentor.cli`) call `build_runtime`; everything below receives
the pieces it needs as arguments.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine

from mentor.catalog import Catalog, make_catalog, read_catalog, sync_catalog
from mentor.chat import ChatService
from mentor.chat_model import ChatModel, OpenAIChatModel
from mentor.conversation_files import FileConversationStore
from mentor.conversations import ConversationStore, MemoryConversationStore
from mentor.corpus import Module
from mentor.db import make_engine, ping
from mentor.embeddings import Embedder, make_embedder
from mentor.engines.extractive import ExtractiveEngine
from mentor.engines.llm import LLMEngine
from mentor.errors import ConfigError, NotReady
from mentor.index import Index, IngestReport, connect_index, describe_unreachable, index_status, is_unreachable
from mentor.metrics import Metrics, ObservedSink, process_metrics
from mentor.privacy import load_or_create_secret
from mentor.prompts import load_prompt
from mentor.record import SignalSink
from mentor.retrieve import Retriever
from mentor.settings import Settings
from mentor.signals.schema import migrate, schema_behind
from mentor.signals.writer import SignalWriter
from mentor.throttle import RateLimiter, limits_of, memory_limiter

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


@dataclass(frozen=True, slots=True)
class LearnerState:
    """Conversations and rate limits: in this process's memory, or in Redis where replicas and workers share them."""

    conversations: ConversationStore
    limiter: RateLimiter
    redis: Any = None  # mentor.redis_state.RedisClients when shared (imported only then)

    def status(self) -> str:
        """For the readiness report: "ok (...)" or what is wrong."""
        if self.redis is None:
            return "ok (in this process's memory)"
        try:
            self.redis.sync.ping()
        except Exception as exc:
            return f"unavailable: {type(exc).__name__}"
        return "ok (Redis)"

    @classmethod
    def build(cls, settings: Settings) -> LearnerState:
        """Redis when `redis_url` is set, otherwise this process's memory."""
        if settings.redis_url:
            from mentor.redis_state import RedisConversationStore, connect_redis, redis_limiter

            clients = connect_redis(settings.redis_url)
            return cls(
                RedisConversationStore(
                    clients,
                    prefix=settings.redis_prefix,
                    ttl_s=settings.conversation_ttl_s,
                    max_conversation_bytes=settings.max_conversation_kb * 1024,
                ),
                redis_limiter(clients, prefix=settings.redis_prefix, limits=limits_of(settings)),
                clients,
            )
        return cls.in_memory(settings)

    @classmethod
    def between_commands(cls, settings: Settings) -> LearnerState:
        """For commands that answer one question and exit (`mentor ask`): Redis when `redis_url` is set, otherwise
        conversations as files in the data directory, so that the next command can continue one."""
        if settings.redis_url:
            return cls.build(settings)
        conversations = FileConversationStore(
            settings.data_dir / "conversations",
            ttl_s=settings.conversation_ttl_s,
            max_conversation_bytes=settings.max_conversation_kb * 1024,
        )
        return cls(conversations, memory_limiter(limits_of(settings)))

    @classmethod
    def in_memory(cls, settings: Settings) -> LearnerState:
        """State of this process alone: the embedded default, and replays that must not touch learners' state."""
        return cls(
            MemoryConversationStore(
                ttl_s=settings.conversation_ttl_s,
                max_conversations=settings.max_conversations,
                max_bytes=settings.max_conversation_store_mb * 1024 * 1024,
                max_conversation_bytes=settings.max_conversation_kb * 1024,
            ),
            memory_limiter(limits_of(settings)),
        )


@dataclass
class Runtime:
    """Everything a request needs that is expensive to build."""

    settings: Settings
    embedder: Embedder
    index: Index
    database: Engine  # the signals database (SQLAlchemy's engine; "engine" names the answer engines)
    ingest_report: IngestReport | None  # None when this process served what `mentor ingest` published
    chat: ChatService
    writer: SignalWriter
    analyst_token: str
    state: LearnerState
    metrics: Metrics | None = None  # what /metrics reports (this process's; None: nothing is counted)

    @property
    def catalog(self) -> Catalog:
        """The modules served now (a shared index may swap in a newer catalog at any time)."""
        return self.chat.catalog

    @property
    def modules(self) -> dict[str, Module]:
        return self.chat.catalog.modules

    @property
    def retriever(self) -> Retriever:
        return self.chat.catalog.retriever

    def module(self, module_id: str | None) -> Module:
        """Resolve a module id; it may be omitted only while the corpus holds a single module."""
        return self.chat.module(module_id)

    def refresh(self) -> bool:
        """Serve what the shared index publishes now, if it changed; True when a new catalog was swapped in."""
        catalog = read_catalog(self.settings, self.embedder, self.index, self.chat.catalog)
        if catalog is None:
            return False
        self.chat.use(catalog)
        log.info("serving %s (catalog %s)", catalog.describe(), catalog.stamp)
        return True

    def readiness(self, timeout_s: float = READY_TIMEOUT_S) -> Readiness:
        """Check what a question needs and report the rest.

        A question needs only the catalog in memory: the module vectors and BM25 live there, so answers go
        on while the Chroma server is down, and signals go to the spool while the database is. Those two are
        reported as degraded, never as not ready: a 503 there would take every replica out of a load balancer
        while each of them could still answer.
        """
        pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="readiness")
        probes = {
            "learner_state": (
                pool.submit(self.state.status),
                "questions are answered without conversation memory or rate limits; erasure refused",
            ),
            "index": (pool.submit(index_status, self.index.chunks), "answers use the modules already loaded"),
            "database": (
                pool.submit(_database_status, self.database, self.settings.migrate_database),
                "signals are spooled until it is back",
            ),
        }
        # Do not wait for a probe stuck on a hung server: the report says so, and the clients' time-outs end it.
        pool.shutdown(wait=False)
        catalog = self.catalog
        detail = {
            "retrieval": f"ok ({catalog.describe()} in memory)"
            if catalog.modules
            else "no module loaded: nothing can be answered (run `mentor ingest`)"
        }
        deadline = time.monotonic() + timeout_s
        for name, (probe, consequence) in probes.items():
            try:
                state = probe.result(timeout=max(0.0, deadline - time.monotonic()))
            except FutureTimeout:
                state = f"unavailable: no answer within {timeout_s:g} s"
            detail[name] = state if state.startswith("ok") else f"{state}; {consequence}"
        return Readiness(answerable=bool(catalog.modules), detail=detail)


def build_runtime(
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    chat_model: ChatModel | None = None,
    progress: Callable[[int], None] | None = None,
    on_plan: Callable[[int], None] | None = None,
    metrics: Metrics | None = None,
    state: LearnerState | None = None,
) -> Runtime:
    """Open the index and the database and assemble the chat.

    A process that owns its index (the embedded default, or `sync_on_start`) brings it in line with the corpus,
    embedding only what changed; a replica of a shared index serves what `mentor ingest` published, or nothing
    yet (readiness says so, and `refresh` picks the modules up when they appear). A Chroma server that is not
    up yet is waited for (`chroma_wait_s`); one that stays away, or goes away during the sync, is a `NotReady`
    with one plain sentence. Shared secrets are checked first, so a misconfigured replica stops at once.
    `state` holds conversations and rate limits (`LearnerState.build(settings)` when not given).
    """
    analyst = analyst_token(settings)
    key = pseudonym_secret(settings)
    # Owner-only: the data directory holds the index, the signals database, the spool and the keys.
    settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    metrics = metrics or process_metrics()
    embedder = embedder or make_embedder(settings, on_batch=metrics.embedding_batch_size)
    index = connect_index(settings, embedder, owner=settings.sync_index, wait_s=settings.chroma_wait_s)
    report = None
    try:
        if settings.sync_index:
            catalog, report = sync_catalog(settings, embedder, index, progress=progress, on_plan=on_plan)
        else:
            catalog = read_catalog(settings, embedder, index, None)
    except NotReady as exc:
        if settings.sync_index or not settings.chroma_url:
            raise
        log.warning("the shared index is not complete yet (%s): serving once `mentor ingest` has run", exc.message)
        catalog = None
    except Exception as exc:
        if not is_unreachable(exc):
            raise
        # Reached a moment ago, so not a server still starting: report it in one line rather than retry.
        raise NotReady(
            f"Chroma server at {settings.chroma_url} went away during start-up ({describe_unreachable(exc)})"
        ) from exc
    catalog = catalog or make_catalog(settings, embedder, {}, {}, {})
    database = make_engine(settings.database)
    if settings.migrate_database:
        try:
            migrate(database)
        except Exception as exc:  # the writer spools until the database is back, then migrates it
            log.warning("signals database not reachable at start (%s); signals will be spooled", type(exc).__name__)
    state = state or LearnerState.build(settings)
    writer = SignalWriter(
        database,
        settings.data_dir / "spool" / f"{process_name()}.jsonl",
        embed=embedder.embed_query,
        erased_since=state.conversations.erased_since,
        migrate=settings.migrate_database,
        metrics=metrics,
    )
    chat = build_chat(
        settings,
        catalog,
        embedder,
        sink=ObservedSink(metrics, writer),  # every question is counted where it is logged
        chat_model=chat_model,
        state=state,
        pseudonym_key=key,
        metrics=metrics,
    )
    return Runtime(
        settings=settings,
        embedder=embedder,
        index=index,
        database=database,
        ingest_report=report,
        chat=chat,
        writer=writer,
        analyst_token=analyst,
        state=state,
        metrics=metrics,
    )


def ingest_corpus(
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    progress: Callable[[int], None] | None = None,
    on_plan: Callable[[int], None] | None = None,
) -> tuple[Catalog, IngestReport]:
    """The one-off ingest job: bring the index in line with the corpus and publish its modules (no database)."""
    embedder = embedder or make_embedder(settings)
    if not settings.chroma_url:
        settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    index = connect_index(settings, embedder, owner=True, wait_s=settings.chroma_wait_s)
    return sync_catalog(settings, embedder, index, progress=progress, on_plan=on_plan)


def prepare_for_workers(settings: Settings, workers: int) -> None:
    """Before `workers` processes start on one machine: check they can agree, and run the one-off jobs once."""
    if not settings.redis_url:
        raise ConfigError(
            f"{workers} workers need MENTOR_REDIS_URL: conversations, rate limits and erasures must be shared "
            "between them (one worker keeps them in memory)"
        )
    analyst_token(settings)
    pseudonym_secret(settings)
    if settings.sync_index:
        catalog, report = ingest_corpus(settings)
        log.info("index: %s (%s)", catalog.describe(), report)
    if settings.migrate_database:
        settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        migrate(make_engine(settings.database))


def process_name() -> str:
    """This process's name among replicas sharing a directory: host and pid (a restart adopts the old spool)."""
    host = re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname())[:64] or "host"
    return f"{host}-{os.getpid()}"


def _database_status(engine: Engine, owned: bool) -> str:
    try:
        ping(engine)
        behind = None if owned else schema_behind(engine)
    except NotReady as exc:
        return f"unavailable ({exc.message})"
    except Exception as exc:
        return f"unavailable ({type(exc).__name__})"
    return f"behind ({behind})" if behind else "ok"


def analyst_token(settings: Settings) -> str:
    """The configured analyst token, or (one process only) the one generated on first start in the data directory."""
    if settings.analyst_token:
        return settings.analyst_token.get_secret_value()
    require_shared_secret(settings, "MENTOR_ANALYST_TOKEN")
    path = settings.data_dir / "analyst.token"
    token = load_or_create_secret(path)
    log.info("analyst token (no MENTOR_ANALYST_TOKEN set) is kept in %s", path.resolve())
    return token


def pseudonym_secret(settings: Settings) -> bytes:
    """The configured pseudonym key, or (one process only) the one generated on first start in the data directory."""
    if settings.pseudonym_key:
        return settings.pseudonym_key.get_secret_value().encode("utf-8")
    require_shared_secret(settings, "MENTOR_PSEUDONYM_KEY")
    return load_or_create_secret(settings.data_dir / "pseudonym.key").encode("utf-8")


def require_shared_secret(settings: Settings, name: str) -> None:
    """Refuse to make up a secret that replicas must agree on: each would make its own."""
    if settings.shared:
        raise ConfigError(
            f"{name} must be set when Redis or PostgreSQL is configured: every replica must use the same one "
            f"(generate one with: python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )


def build_chat(
    settings: Settings,
    catalog: Catalog,
    embedder: Embedder,
    *,
    sink: SignalSink,
    chat_model: ChatModel | None = None,
    state: LearnerState | None = None,
    pseudonym_key: bytes | None = None,
    metrics: Metrics | None = None,
) -> ChatService:
    """The chat service: the LLM engine when one is configured (or given), the extractive engine always.

    Every answered question goes to `sink`: the signal writer, or `NO_SINK` where nothing is to be logged.
    `state` holds conversations and rate limits (built from the settings when not given). `metrics`, when given,
    times the LLM's turns and counts its errors.
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
            metrics=metrics,
        )
    state = state or LearnerState.build(settings)
    return ChatService(
        catalog=catalog,
        extractive=ExtractiveEngine(embedder, cache_dir=settings.model_cache_dir),
        llm=llm,
        conversations=state.conversations,
        limiter=state.limiter,
        pseudonym_key=pseudonym_key or pseudonym_secret(settings),
        top_k=settings.top_k,
        sink=sink,
    )
