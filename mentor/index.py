"""The only writer of Chroma: open the collection, and bring it in line with the corpus incrementally."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import chromadb
import httpx
from chromadb.api.models.Collection import Collection
from chromadb.config import Settings as ChromaSettings

from mentor.corpus import Chunk
from mentor.embeddings import Embedder
from mentor.errors import InvalidInput, NotReady
from mentor.settings import Settings

log = logging.getLogger(__name__)

# Start-up waits this long (retrying with backoff) for a Chroma server that is still starting: a compose
# stack starts its services together and a fresh `chroma run` needs a few seconds before it answers.
CHROMA_WAIT_S = 60.0
FIRST_RETRY_S = 0.5
MAX_RETRY_S = 10.0
# chromadb's HTTP client never times out (timeout=None): a Chroma server that accepts a connection and then
# hangs would block start-up, and every readiness probe, forever. 60 s for a read is Chroma's own query limit.
CHROMA_TIMEOUT = httpx.Timeout(60.0, connect=3.0)


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
            client = chromadb.HttpClient(
                host=url.hostname,
                port=url.port or (443 if url.scheme == "https" else 8000),
                ssl=url.scheme == "https",
                settings=chroma_settings(),
            )
        except Exception as exc:  # chromadb raises plain ValueError/ConnectionError variants here
            raise NotReady(f"Chroma server at {settings.chroma_url} cannot be reached ({exc})") from exc
        session = getattr(getattr(client, "_server", None), "_session", None)
        if isinstance(session, httpx.Client):  # chromadb offers no public way to set it
            session.timeout = CHROMA_TIMEOUT
        return client
    settings.chroma_path.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(settings.chroma_path), settings=chroma_settings())


def chroma_settings() -> ChromaSettings:
    """Chroma client settings: its telemetry phones home and reset is a footgun, so both are off.

    A fresh object per client: chromadb's HttpClient writes the host and port into the settings it is given,
    so a shared object made every later client for another server fail with a misleading "cannot be reached".
    """
    return ChromaSettings(anonymized_telemetry=False, allow_reset=False)


def connect_collection(
    settings: Settings,
    embedder: Embedder,
    *,
    wait_s: float = CHROMA_WAIT_S,
    sleep: Callable[[float], None] = time.sleep,
) -> Collection:
    """Open the chunk collection, retrying with exponential backoff for up to `wait_s` while Chroma is unreachable.

    Each retry is one log line; when the budget is spent, `NotReady` carries one plain sentence (the CLI prints
    it as one line) instead of a traceback per attempt.
    """
    deadline = time.monotonic() + wait_s
    delay = FIRST_RETRY_S
    attempt = 1
    while True:
        try:
            return open_collection(chroma_client(settings), settings.collection, embedder)
        except Exception as exc:
            if not is_unreachable(exc):
                raise
            reason = describe_unreachable(exc)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise NotReady(
                    f"Chroma server at {settings.chroma_url} is not reachable after {attempt} attempts in "
                    f"{wait_s:g} s ({reason}); start it or correct MENTOR_CHROMA_URL"
                ) from exc
            pause = min(delay, remaining)
            log.warning(
                "Chroma server at %s is not reachable yet (%s); attempt %d, next in %.1f s",
                settings.chroma_url,
                reason,
                attempt,
                pause,
            )
            sleep(pause)
            delay = min(delay * 2, MAX_RETRY_S)
            attempt += 1


def is_unreachable(exc: BaseException) -> bool:
    """True for failures that end when a Chroma server finishes starting: no connection, time-out, 5xx."""
    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code >= 500
    # chroma_client wraps the constructor's connection failure in NotReady; a bad URL is InvalidInput.
    return isinstance(exc, NotReady | httpx.TransportError)


def describe_unreachable(exc: BaseException) -> str:
    """The root cause of an unreachable Chroma in a few words, on one line."""
    cause = exc.__cause__ if isinstance(exc, NotReady) and exc.__cause__ is not None else exc
    text = " ".join(str(cause).split()) or type(cause).__name__
    return text if len(text) <= 120 else text[:117] + "..."


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


def index_status(collection: Collection) -> str:
    """The index for a readiness report: "ok (N chunks)", "empty", or "unavailable: <reason>"."""
    try:
        count = collection.count()
    except Exception as exc:  # whatever the failure, the report names it and the caller goes on
        return f"unavailable: {describe_unreachable(exc)}"
    return f"ok ({count} chunks)" if count else "empty"


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
