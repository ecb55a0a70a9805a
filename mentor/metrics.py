"""Prometheus metrics: HTTP requests by route template, and what the mentor does with the questions it is asked.

One `Metrics` per process (`process_metrics`): Prometheus counters live in the process that counts them, so a
second set would register the same names twice, or, in multiprocess mode, overwrite the same file entries.
`build_runtime` hands it to the parts that observe (signal writer, LLM engine, embedder) and wraps the chat's
signal sink in `ObservedSink`, so every answered question is counted at the one point it is logged.

Several workers (`mentor serve --workers N`) use prometheus_client's multiprocess mode: `metrics_for_workers`
gives them a fresh PROMETHEUS_MULTIPROC_DIR (the variable must be set before prometheus_client is imported, so it
is prometheus_client's own contract rather than a mentor setting), each worker writes its values to files there,
and a scrape of any worker reads them all. Gauges are summed over live workers; a worker that exited is dropped
at the next scrape.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    multiprocess,
)
from prometheus_client.exposition import choose_encoder

from mentor.record import ABANDONED, AnsweredQuestion, SignalSink

log = logging.getLogger(__name__)

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
UNMATCHED = "unmatched"  # the route label of a path no route serves (its raw path may hold a learner id)
# Seconds: from a cached search (a few ms) to an LLM answer with tool rounds (its 20 s time-out, several times).
SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0)
# Texts per forward pass: a lone query (1) up to MENTOR_EMBED_BATCH_SIZE's ceiling (4096).
BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)
LIVE_GAUGE_FILE = re.compile(r"gauge_live\w*?_(\d+)\.db")
STALE_DIRECTORY = re.compile(r"mentor-metrics-(\d+)-\w+")  # named after the `mentor serve` that made it


class Metrics:
    """Every metric mentor exports, registered in `registry`, and one method per thing observed."""

    def __init__(self, registry: CollectorRegistry, *, multiprocess_dir: str | None = None) -> None:
        self.registry = registry
        self.multiprocess_dir = multiprocess_dir
        r = registry
        self.http_requests = Counter(
            "mentor_http_requests", "HTTP requests answered.", ["method", "route", "status"], registry=r
        )
        self.http_seconds = Histogram(
            "mentor_http_request_duration_seconds",
            "Time from a request's arrival to the end of its response (a stream's whole length).",
            ["method", "route", "status"],
            buckets=SECONDS,
            registry=r,
        )
        self.questions = Counter(
            "mentor_questions", "Questions asked, by module and engine.", ["module", "engine"], registry=r
        )
        self.out_of_scope = Counter(
            "mentor_questions_out_of_scope", "Questions the module does not cover (redirected).", ["module"], registry=r
        )
        self.coverage = Counter(
            "mentor_answers_coverage",
            "Answers by how much of the question the module covers.",
            ["module", "coverage"],
            registry=r,
        )
        self.grounding = Counter(
            "mentor_answers_grounding",
            "Answers by grounding verdict (true: every sentence and number traced).",
            ["module", "grounded"],
            registry=r,
        )
        self.fallbacks = Counter(
            "mentor_answers_fallback",
            "LLM answers replaced by the extractive engine, by reason.",
            ["reason"],
            registry=r,
        )
        self.abandoned = Counter(
            "mentor_streams_abandoned",
            "Streamed answers the client left before their end (still logged).",
            ["module"],
            registry=r,
        )
        self.answer_seconds = Histogram(
            "mentor_answer_duration_seconds",
            "Time to answer a question, from its arrival to its grounding verdict.",
            ["engine"],
            buckets=SECONDS,
            registry=r,
        )
        self.calculator_calls = Counter(
            "mentor_calculator_calls",
            "Calculator runs made for answers, by calculator and outcome.",
            ["name", "outcome"],
            registry=r,
        )
        self.llm_seconds = Histogram(
            "mentor_llm_request_duration_seconds",
            "Time of one LLM turn (a streamed turn to its last chunk).",
            ["model", "mode"],
            buckets=SECONDS,
            registry=r,
        )
        self.llm_errors = Counter(
            "mentor_llm_errors", "LLM turns that failed, by reason.", ["model", "reason"], registry=r
        )
        self.embedding_batch = Histogram(
            "mentor_embedding_batch_size",
            "Texts per embedding forward pass (queries batched together, or ingest).",
            buckets=BATCH_SIZES,
            registry=r,
        )
        self.signal_queue = Gauge(
            "mentor_signal_queue_depth",
            "Signals waiting for the signal writer.",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.signal_spool = Gauge(
            "mentor_signal_spool_bytes",
            "Bytes of signals spooled on disk while the database is away.",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.signals_written = Counter("mentor_signals_written", "Signal records written to the database.", registry=r)
        self.signals_spooled = Counter(
            "mentor_signals_spooled", "Signal records put in the spool (database away).", registry=r
        )
        self.signals_rejected = Counter(
            "mentor_signals_rejected",
            "Signal records set aside: refused by the database, or not buildable.",
            ["reason"],
            registry=r,
        )

    @classmethod
    def for_this_process(cls) -> Metrics:
        """Multiprocess mode when PROMETHEUS_MULTIPROC_DIR is set; else this process's own registry, with its CPU,
        memory and garbage-collector metrics (which multiprocess mode cannot aggregate)."""
        directory = os.environ.get(MULTIPROC_ENV)
        registry = CollectorRegistry()
        if not directory:
            for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
                registry.register(collector)
        return cls(registry, multiprocess_dir=directory)

    # -- what is observed ------------------------------------------------------------------------------------------

    def request(self, method: str, route: str | None, status: int, seconds: float) -> None:
        """One HTTP response; `route` is the route's template (None: no route serves the path)."""
        labels = (method, route or UNMATCHED, str(status))
        self.http_requests.labels(*labels).inc()
        self.http_seconds.labels(*labels).observe(seconds)

    def answered(self, item: AnsweredQuestion) -> None:
        """One question, answered or abandoned, as the chat hands it to the signals log."""
        answer, module = item.answer, item.module_id
        self.questions.labels(module, answer.engine).inc()
        for call in answer.tool_calls:
            self.calculator_calls.labels(call.name, "error" if call.error else "ok").inc()
        if answer.fallback_reason == ABANDONED:  # no verdict: the answer was cut short
            self.abandoned.labels(module).inc()
            return
        if answer.out_of_scope:
            self.out_of_scope.labels(module).inc()
        self.coverage.labels(module, answer.coverage).inc()
        self.grounding.labels(module, str(item.grounding.grounded).lower()).inc()
        if answer.fallback_reason:
            self.fallbacks.labels(answer.fallback_reason).inc()
        self.answer_seconds.labels(answer.engine).observe(item.latency_ms / 1000)

    def llm_turn(self, model: str, mode: str, seconds: float) -> None:
        """One LLM turn that ended with a completion; `mode` is stream or complete."""
        self.llm_seconds.labels(model, mode).observe(seconds)

    def llm_error(self, model: str, reason: str) -> None:
        """One LLM turn that failed (`UpstreamError.reason`: timeout, http_503, tool_loop...)."""
        self.llm_errors.labels(model, reason).inc()

    def embedding_batch_size(self, size: int) -> None:
        """One forward pass of the embedding model over `size` texts."""
        self.embedding_batch.observe(size)

    def signal_writer(self, *, queue_depth: int, spool_bytes: int) -> None:
        """The signal writer's backlog now."""
        self.signal_queue.set(queue_depth)
        self.signal_spool.set(spool_bytes)

    def signals(self, *, written: int = 0, spooled: int = 0, rejected: int = 0, unbuildable: int = 0) -> None:
        """Signal records that went somewhere: the database, the spool, the rejected file, or nowhere."""
        if written:
            self.signals_written.inc(written)
        if spooled:
            self.signals_spooled.inc(spooled)
        if rejected:
            self.signals_rejected.labels("refused").inc(rejected)
        if unbuildable:
            self.signals_rejected.labels("unbuildable").inc(unbuildable)

    # -- the scrape ------------------------------------------------------------------------------------------------

    def exposition(self, accept: str = "") -> tuple[bytes, str]:
        """The body and its content type, in the format the scraper's Accept header asks for (Prometheus text
        0.0.4 by default, or OpenMetrics): this process's metrics, or every worker's in multiprocess mode."""
        encode, content_type = choose_encoder(accept)
        if self.multiprocess_dir is None:
            return encode(self.registry), content_type
        forget_exited_workers(self.multiprocess_dir)
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=self.multiprocess_dir)
        return encode(registry), content_type


class ObservedSink:
    """A signal sink that counts each question, then passes it on; counting never costs the signal."""

    def __init__(self, metrics: Metrics, then: SignalSink) -> None:
        self.metrics = metrics
        self.then = then

    def submit(self, item: AnsweredQuestion) -> None:
        try:
            self.metrics.answered(item)
        except Exception:
            log.exception("metrics: could not count question %s", item.question_id)
        self.then.submit(item)


_lock = threading.Lock()
_process_metrics: Metrics | None = None


def process_metrics() -> Metrics:
    """This process's one `Metrics`, made on first use."""
    global _process_metrics
    with _lock:
        if _process_metrics is None:
            _process_metrics = Metrics.for_this_process()
        return _process_metrics


def forget_exited_workers(directory: str) -> None:
    """Drop the gauges of workers that are gone (a restarted or crashed worker), as gunicorn's child_exit hook
    would: uvicorn's supervisor has no such hook, so the scrape does it. Their counters stay, as they must."""
    for path in Path(directory).glob("gauge_live*_*.db"):
        match = LIVE_GAUGE_FILE.fullmatch(path.name)
        if match and not alive(int(match[1])):
            multiprocess.mark_process_dead(int(match[1]), directory)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


@contextmanager
def metrics_for_workers() -> Iterator[str]:
    """Around `uvicorn.run(workers=N)`: a fresh PROMETHEUS_MULTIPROC_DIR the workers inherit, removed afterwards
    (or, if this process is killed, by the next `mentor serve --workers`).

        A directory the operator set is used as it is (and kept): prometheus_client asks that it be emptied between
        runs, which is then the operator's to do.
    """
    given = os.environ.get(MULTIPROC_ENV)
    if given:
        yield given
        return
    # A server that was killed (SIGKILL, a power cut) could not remove its directory: the next one does.
    for stale in Path(tempfile.gettempdir()).glob("mentor-metrics-*"):
        match = STALE_DIRECTORY.fullmatch(stale.name)
        if match and not alive(int(match[1])):
            shutil.rmtree(stale, ignore_errors=True)
    directory = tempfile.mkdtemp(prefix=f"mentor-metrics-{os.getpid()}-")
    os.environ[MULTIPROC_ENV] = directory
    try:
        yield directory
    finally:
        os.environ.pop(MULTIPROC_ENV, None)
        shutil.rmtree(directory, ignore_errors=True)
