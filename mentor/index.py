"""The only writer of Chroma: open the index, bring it in line with the corpus incrementally, publish the modules.

The index is two collections: the chunks with their vectors, and one record per module holding its Markdown
source and the ids of its chunks. `mentor ingest` (or the embedded default at start) writes both; replicas read
them, and poll the module records to serve a re-ingested module without a restart.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import chromadb
import httpx
import numpy as np
from chromadb.api.models.Collection import Collection
from chromadb.config import Settings as ChromaSettings

from mentor.corpus import Chunk, Module
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
WRITE_BATCH = 1000  # records per request: keeps each request to a Chroma server well under its payload limit


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


@dataclass(frozen=True, slots=True)
class Index:
    """The two collections: chunks (text, metadata, vector) and the published modules (source, chunk ids)."""

    chunks: Collection
    modules: Collection


@dataclass(frozen=True, slots=True)
class Published:
    """A module record as replicas poll it: `digest` changes whenever its source or its chunking does."""

    module_id: str
    version: str
    digest: str
    chunk_ids: tuple[str, ...]


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


def connect_index(
    settings: Settings,
    embedder: Embedder,
    *,
    owner: bool,
    wait_s: float = CHROMA_WAIT_S,
    sleep: Callable[[float], None] = time.sleep,
) -> Index:
    """Open the index, retrying with exponential backoff for up to `wait_s` while Chroma is unreachable.

    Only an `owner` (the ingest job, or the embedded default) may rebuild a collection made with another
    embedding model; a replica refuses to serve it. Each retry is one log line; when the budget is spent,
    `NotReady` carries one plain sentence (the CLI prints it as one line) instead of a traceback per attempt.
    """
    deadline = time.monotonic() + wait_s
    delay = FIRST_RETRY_S
    attempt = 1
    while True:
        try:
            return open_index(chroma_client(settings), settings.collection, embedder, owner=owner)
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


def open_index(client: chromadb.api.ClientAPI, name: str, embedder: Embedder, *, owner: bool = True) -> Index:
    """Get or create both collections of the index named `name`."""
    chunks = open_collection(client, name, embedder, owner=owner)
    modules = open_collection(client, f"{name}_modules", embedder, owner=owner)
    return Index(chunks, modules)


def open_collection(client: chromadb.api.ClientAPI, name: str, embedder: Embedder, *, owner: bool = True) -> Collection:
    """Get or create a collection; its owner rebuilds it when it was made with another embedding model."""
    metadata = {"embedding_model": embedder.name}
    collection = client.get_or_create_collection(
        name, embedding_function=None, configuration={"hnsw": {"space": "cosine"}}, metadata=metadata
    )
    built_with = (collection.metadata or {}).get("embedding_model")
    if built_with != embedder.name:
        if not owner:
            raise NotReady(
                f"the index {name!r} was built with {built_with!r}, not {embedder.name!r}: run `mentor ingest` "
                "with this MENTOR_EMBEDDING_MODEL and MENTOR_EMBEDDING_BACKEND"
            )
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
    index: Index,
    modules: Sequence[Module],
    chunks: Sequence[Chunk],
    embedder: Embedder,
    *,
    progress: Callable[[int], None] | None = None,
    on_plan: Callable[[int], None] | None = None,
) -> IngestReport:
    """Make the index hold exactly `chunks` and `modules`: embed only new chunks, update moved ones, publish the
    modules, and only then delete stale chunks, so a replica reading at any moment finds every chunk its module
    record names (the old record's until the new one is published).

    Chunk ids are content hashes, so an id already in the index has the right vector; only its
    metadata (module version, position) can be out of date.
    """
    started = time.perf_counter()
    collection = index.chunks
    existing = collection.get(include=["metadatas"])
    current = dict(zip(existing["ids"], existing["metadatas"] or [], strict=True))
    wanted = {chunk.id: chunk for chunk in chunks}
    new = [chunk for chunk in chunks if chunk.id not in current]
    moved = [c for c in chunks if c.id in current and _differs(current[c.id], c.metadata)]
    stale = [chunk_id for chunk_id in current if chunk_id not in wanted]
    if on_plan is not None:
        on_plan(len(new))
    if moved:
        collection.update(ids=[c.id for c in moved], metadatas=[c.metadata for c in moved])
    if new:
        count = f"{len(modules)} module{'s' if len(modules) != 1 else ''}"
        log.info("indexing: embedding %d new chunks of %s…", len(new), count)
        vectors = embedder.embed_documents([c.embedding_text for c in new], progress=progress)
        for start in range(0, len(new), WRITE_BATCH):
            part = new[start : start + WRITE_BATCH]
            collection.upsert(
                ids=[c.id for c in part],
                embeddings=vectors[start : start + WRITE_BATCH],
                documents=[c.text for c in part],
                metadatas=[c.metadata for c in part],
            )
    publish_modules(index, modules, chunks, dim=embedder.dim)
    if stale:
        collection.delete(ids=stale)
    report = IngestReport(
        added=len(new),
        updated=len(moved),
        removed=len(stale),
        unchanged=len(wanted) - len(new) - len(moved),
        embedded=len(new),
    )
    log.info("index %s: %s in %.1f s", collection.name, report, time.perf_counter() - started)
    return report


def publish_modules(index: Index, modules: Sequence[Module], chunks: Sequence[Chunk], *, dim: int) -> list[Published]:
    """Write each changed module's record (source, chunk ids, and the mean of its chunk vectors as its vector);
    delete the records of modules no longer in the corpus. Returns what is published."""
    records = publication(modules, chunks)
    stored = {p.module_id: p.digest for p in published(index)}
    changed = [(m, r) for m, r in zip(modules, records, strict=True) if stored.get(m.id) != r.digest]
    if changed:
        vectors = load_vectors(index.chunks, [cid for _, r in changed for cid in r.chunk_ids])
        for start in range(0, len(changed), WRITE_BATCH):
            part = changed[start : start + WRITE_BATCH]
            index.modules.upsert(
                ids=[m.id for m, _ in part],
                embeddings=[_mean_direction([vectors[cid] for cid in r.chunk_ids], dim) for _, r in part],
                documents=[m.source for m, _ in part],
                metadatas=[
                    {"version": r.version, "digest": r.digest, "chunk_ids": " ".join(r.chunk_ids)} for _, r in part
                ],
            )
    gone = [module_id for module_id in stored if module_id not in {m.id for m in modules}]
    if gone:
        index.modules.delete(ids=gone)
    return records


def publication(modules: Sequence[Module], chunks: Sequence[Chunk]) -> list[Published]:
    """The records `modules` cut into `chunks` are published as (no I/O: what the owner serves is what it wrote)."""
    by_module: dict[str, list[str]] = {}
    for chunk in chunks:
        by_module.setdefault(chunk.module_id, []).append(chunk.id)
    return [
        Published(m.id, m.version, module_digest(m.source, by_module.get(m.id, ())), tuple(by_module.get(m.id, ())))
        for m in modules
    ]


def published(index: Index) -> list[Published]:
    """The published module records (metadata only: what a replica polls)."""
    stored = index.modules.get(include=["metadatas"])
    return sorted(
        (
            Published(module_id, str(meta["version"]), str(meta["digest"]), tuple(str(meta["chunk_ids"]).split()))
            for module_id, meta in zip(stored["ids"], stored["metadatas"] or [], strict=True)
        ),
        key=lambda p: p.module_id,
    )


def read_sources(index: Index, module_ids: Iterable[str]) -> dict[str, str]:
    """The Markdown sources of published modules."""
    ids = list(module_ids)
    if not ids:  # Chroma refuses an empty id list
        return {}
    stored = index.modules.get(ids=ids, include=["documents"])
    return dict(zip(stored["ids"], stored["documents"] or [], strict=True))


def read_chunks(index: Index, chunk_ids: Sequence[str]) -> tuple[list[Chunk], dict[str, np.ndarray]]:
    """The chunks (in the order of `chunk_ids`) and their vectors; `NotReady` when any is missing."""
    found: dict[str, tuple[str, dict, np.ndarray]] = {}
    for start in range(0, len(chunk_ids), WRITE_BATCH):
        part = list(chunk_ids[start : start + WRITE_BATCH])
        stored = index.chunks.get(ids=part, include=["documents", "metadatas", "embeddings"])
        for cid, text, meta, vector in zip(
            stored["ids"], stored["documents"], stored["metadatas"], stored["embeddings"], strict=True
        ):
            found[cid] = (text, meta, np.asarray(vector, dtype=np.float32))
    missing = [cid for cid in chunk_ids if cid not in found]
    if missing:
        raise NotReady(f"the index is missing {len(missing)} chunks its module records name; run `mentor ingest`")
    chunks = [
        Chunk(
            id=cid,
            module_id=str(found[cid][1]["module_id"]),
            module_version=str(found[cid][1]["module_version"]),
            section_id=str(found[cid][1]["section_id"]),
            section_title=str(found[cid][1]["section_title"]),
            position=int(found[cid][1]["position"]),
            text=found[cid][0],
        )
        for cid in chunk_ids
    ]
    return chunks, {cid: found[cid][2] for cid in chunk_ids}


def load_vectors(collection: Collection, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
    """Stored vectors by chunk id; `NotReady` when any is missing (an ingest is needed, or under way)."""
    vectors: dict[str, np.ndarray] = {}
    for start in range(0, len(chunk_ids), WRITE_BATCH):
        stored = collection.get(ids=list(chunk_ids[start : start + WRITE_BATCH]), include=["embeddings"])
        for cid, vector in zip(stored["ids"], stored["embeddings"], strict=True):
            vectors[cid] = np.asarray(vector, dtype=np.float32)
    missing = [cid for cid in chunk_ids if cid not in vectors]
    if missing:
        raise NotReady(f"the index is missing {len(missing)} chunks of the corpus; run `mentor ingest`")
    return vectors


def module_digest(source: str, chunk_ids: Iterable[str]) -> str:
    """What identifies a published module's content: its source and how it was cut."""
    digest = hashlib.sha256(source.encode("utf-8"))
    digest.update(" ".join(chunk_ids).encode("ascii"))
    return digest.hexdigest()[:24]


def _mean_direction(vectors: list[np.ndarray], dim: int) -> list[float]:
    mean = np.mean(vectors, axis=0) if vectors else np.zeros(dim, dtype=np.float32)
    norm = float(np.linalg.norm(mean)) or 1.0
    return (mean / norm).astype(np.float32).tolist()


def _differs(stored: dict | None, wanted: dict) -> bool:
    return any((stored or {}).get(key) != value for key, value in wanted.items())
