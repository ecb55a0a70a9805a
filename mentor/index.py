"""The only writer of Chroma: open the collection, and bring it in line with the corpus incrementally."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import chromadb
from chromadb.api.models.Collection import Collection
from chromadb.config import Settings as ChromaSettings

from mentor.corpus import Chunk
from mentor.embeddings import Embedder
from mentor.errors import InvalidInput, NotReady
from mentor.settings import Settings

log = logging.getLogger(__name__)

# Chroma's default embedding function downloads a model, and its telemetry phones home: both are off.
CHROMA_SETTINGS = ChromaSettings(anonymized_telemetry=False, allow_reset=False)


@dataclass(frozen=True, slots=True)
class IngestReport:
    """What one ingest changed in the index."""

    added: int
    updated: int
    removed: int
    unchanged: int
    embedded: int

    def __str__(self) -> str:
        return (
            f"added {self.added}, updated {self.updated}, removed {self.removed}, "
            f"unchanged {self.unchanged} ({self.embedded} embeddings computed)"
        )


def chroma_client(settings: Settings) -> chromadb.api.ClientAPI:
    """An HTTP client when `chroma_url` is set, otherwise an embedded store under `data_dir`."""
    if settings.chroma_url:
        url = urlsplit(settings.chroma_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise InvalidInput(f"MENTOR_CHROMA_URL must look like http://host:8000 (got {settings.chroma_url!r})")
        try:
            return chromadb.HttpClient(
                host=url.hostname,
                port=url.port or (443 if url.scheme == "https" else 8000),
                ssl=url.scheme == "https",
                settings=CHROMA_SETTINGS,
            )
        except Exception as exc:  # chromadb raises plain ValueError/ConnectionError variants here
            raise NotReady(f"Chroma server at {settings.chroma_url} cannot be reached ({exc})") from exc
    settings.chroma_path.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(settings.chroma_path), settings=CHROMA_SETTINGS)


def open_collection(client: chromadb.api.ClientAPI, name: str, embedder: Embedder) -> Collection:
    """Get or create the chunk collection; rebuild it when it was made with another embedding model."""
    metadata = {"embedding_model": embedder.name}
    collection = client.get_or_create_collection(
        name, embedding_function=None, configuration={"hnsw": {"space": "cosine"}}, metadata=metadata
    )
    built_with = (collection.metadata or {}).get("embedding_model")
    if built_with != embedder.name:
        # Vectors from two models are not comparable: start over rather than mix them.
        log.warning("collection %s was built with %r, not %r: rebuilding it", name, built_with, embedder.name)
        client.delete_collection(name)
        collection = client.create_collection(
            name, embedding_function=None, configuration={"hnsw": {"space": "cosine"}}, metadata=metadata
        )
    return collection


def build_index(
    collection: Collection,
    chunks: Sequence[Chunk],
    embedder: Embedder,
    *,
    progress: Callable[[int], None] | None = None,
    on_plan: Callable[[int], None] | None = None,
) -> IngestReport:
    """Make the collection hold exactly `chunks`: embed only new ones, update moved ones, delete stale ones.

    Chunk ids are content hashes, so an id already in the index has the right vector; only its
    metadata (module version, position) can be out of date.
    """
    existing = collection.get(include=["metadatas"])
    current = dict(zip(existing["ids"], existing["metadatas"] or [], strict=True))
    wanted = {chunk.id: chunk for chunk in chunks}
    new = [chunk for chunk in chunks if chunk.id not in current]
    moved = [c for c in chunks if c.id in current and _differs(current[c.id], c.metadata)]
    stale = [chunk_id for chunk_id in current if chunk_id not in wanted]
    if on_plan is not None:
        on_plan(len(new))
    if stale:
        collection.delete(ids=stale)
    if moved:
        collection.update(ids=[c.id for c in moved], metadatas=[c.metadata for c in moved])
    if new:
        vectors = embedder.embed_documents([c.embedding_text for c in new], progress=progress)
        batch = 1000  # keeps each request to a Chroma server well under its payload limit
        for start in range(0, len(new), batch):
            part = new[start : start + batch]
            collection.upsert(
                ids=[c.id for c in part],
                embeddings=vectors[start : start + batch],
                documents=[c.text for c in part],
                metadatas=[c.metadata for c in part],
            )
    report = IngestReport(
        added=len(new),
        updated=len(moved),
        removed=len(stale),
        unchanged=len(wanted) - len(new) - len(moved),
        embedded=len(new),
    )
    log.info("index %s: %s", collection.name, report)
    return report


def _differs(stored: dict | None, wanted: dict) -> bool:
    return any((stored or {}).get(key) != value for key, value in wanted.items())
