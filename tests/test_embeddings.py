"""The query embedder under sustained concurrent load: batching stays, and no caller waits for others' work."""

from __future__ import annotations

import random
import threading
import time
import uuid

import numpy as np

from mentor.embedders_onnx import OnnxEmbedder
from mentor.settings import Settings

THREADS = 8
DURATION_S = 4.0


class CountingEmbedder(OnnxEmbedder):
    """The real (default) embedder, counting the forward passes each thread runs."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.local = threading.local()

    def _encode(self, texts: list[str], *, threads: int | None = None) -> np.ndarray:
        self.local.passes += 1
        return super()._encode(texts, threads=threads)


def test_no_query_waits_for_the_others_under_sustained_load() -> None:
    """Eight threads ask new (uncached) questions, a few milliseconds apart, for four seconds.

    The thread that starts a batch used to keep running batches until the queue was empty, which under steady
    load is never: its one call lasted the whole run (about 100x the median here). Now a caller that leads runs
    batches only until its own query is answered: with eight callers and batches of 64, one pass. Counted in
    passes, not milliseconds, so a busy machine (a batch landing on a descheduled core) cannot fail it, and the
    old behaviour cannot pass it.
    """
    counting = CountingEmbedder(cache_dir=Settings().model_cache_dir)  # the cached export: loads in a second
    counting.local.passes = 0
    counting.embed_query("warm the model up before counting anything")
    deadline = time.monotonic() + DURATION_S
    run = uuid.uuid4().hex  # the cache must never answer
    led: list[list[int]] = [[] for _ in range(THREADS)]  # forward passes each call ran itself
    failures: list[BaseException] = []

    def ask(seat: int) -> None:
        rng = random.Random(seat)
        n = 0
        counting.local.passes = 0
        try:
            while time.monotonic() < deadline:
                text = f"how much optimizer state does ZeRO stage {seat} keep, question {n} of run {run}"
                before = counting.local.passes
                vector = counting.embed_query(text)
                led[seat].append(counting.local.passes - before)
                assert vector.shape == (counting.dim,)
                n += 1
                # The rest of a request (retrieval, answer) happens between two embeddings: arrivals land while
                # a batch is running, which is what kept the old leader draining.
                time.sleep(rng.uniform(0.005, 0.03))
        except BaseException as exc:  # reported below; a thread's exception would otherwise vanish
            failures.append(exc)

    threads = [threading.Thread(target=ask, args=(seat,)) for seat in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=DURATION_S + 30)
    assert not failures, failures
    calls = [len(seat) for seat in led]
    assert min(calls) >= 5, f"a thread was starved: calls per thread {calls}"
    passes = sorted(x for seat in led for x in seat)
    assert passes[-1] <= 1, f"a call ran {passes[-1]} forward passes (others' queries); calls {calls}"
    # Batching stays: the calls were served by fewer passes than calls.
    assert sum(passes) < sum(calls), f"{sum(passes)} passes for {sum(calls)} calls"


def embed_together(embedder, texts: list[str], *, timeout_s: float = 60) -> dict[int, np.ndarray]:
    """Each text's vector, asked by one thread per text, all released at once; {index: vector} of those answered."""
    got: dict[int, np.ndarray] = {}
    barrier = threading.Barrier(len(texts))

    def ask(i: int) -> None:
        barrier.wait()
        got[i] = embedder.embed_query(texts[i])

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(texts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout_s)
    return got


def test_queries_asked_together_get_their_own_vectors(embedder) -> None:
    """Each caller of a shared batch gets the vector of its own text, equal to embedding it alone."""
    texts = [f"what does pipeline stage {i} hold, {uuid.uuid4().hex}" for i in range(12)]
    alone = embedder.embed_documents(texts)
    got = embed_together(embedder, texts)
    assert sorted(got) == list(range(len(texts)))
    for i, text in enumerate(texts):
        assert float(got[i] @ alone[i]) > 0.999, text


class PoisonedEmbedder(OnnxEmbedder):
    """The real (default) embedder, except that a forward pass over a batch holding "poison" fails (a model error)."""

    def _encode(self, texts: list[str], *, threads: int | None = None) -> np.ndarray:
        if any("poison" in text for text in texts):
            raise RuntimeError("forward pass failed")
        return super()._encode(texts, threads=threads)


def test_a_failed_batch_wakes_every_caller_with_the_error_and_the_next_one_leads(embedder) -> None:
    """Callers sharing a failed forward pass all get its error; nobody hangs; later queries still work."""
    poisoned = PoisonedEmbedder(cache_dir=Settings().model_cache_dir)  # the cached export: loads in a second
    texts = [f"poison {uuid.uuid4().hex}"] + [f"what does ZeRO stage {i} shard, {uuid.uuid4().hex}" for i in range(9)]
    outcomes: dict[int, object] = {}
    barrier = threading.Barrier(len(texts))

    def ask(i: int) -> None:
        barrier.wait()
        try:
            outcomes[i] = poisoned.embed_query(texts[i])
        except RuntimeError as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(texts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads), "a caller never woke up"
    assert isinstance(outcomes[0], RuntimeError)
    assert all(isinstance(outcomes[i], RuntimeError | np.ndarray) for i in range(1, len(texts)))
    # The error was not cached and leadership was handed back: every other text embeds now.
    for text in texts[1:]:
        assert poisoned.embed_query(text).shape == (embedder.dim,)
