"""/metrics through real HTTP, read with prometheus_client's own parser: requests by route template, the questions,
the LLM, the signal writer, and the workers of `mentor serve --workers N` counted together."""

from __future__ import annotations

import os
import signal
import time
import uuid
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mentor.api import create_app
from mentor.bench.cluster import MENTOR
from mentor.bench.procs import clean_env, free_port, spawn, stop, wait_ready
from mentor.metrics import ObservedSink
from mentor.runtime import build_chat
from mentor.stub_llm import Reply, StubLLM

from .chat_helpers import serve
from .conftest import MODULE_ID, make_settings
from .test_chat_llm import grounded_zero_answer
from .test_workers import ask_on, workers_of

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    """Every sample of a scrape, keyed by its name and labels."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scrape(url: str, **headers: str) -> Samples:
    response = httpx.get(f"{url}/metrics", headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return parse(response.text)


def value(samples: Samples, metric: str, /, **labels: str) -> float:
    return samples.get((metric, tuple(sorted(labels.items()))), 0.0)


def moved(before: Samples, after: Samples, metric: str, /, **labels: str) -> float:
    return value(after, metric, **labels) - value(before, metric, **labels)


def chat(url: str, message: str, **extra) -> dict:
    response = httpx.post(f"{url}/v1/chat", json={"module_id": MODULE_ID, "message": message, **extra}, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def test_requests_and_questions_are_counted_by_route_template_module_and_engine(runtime) -> None:
    with serve(create_app(runtime.settings, runtime=runtime)) as url:
        assert runtime.writer.flush()
        before = scrape(url)
        sized = chat(url, "int4 70B — how big?", learner_id="metrics-sized@example.com")
        painted = chat(url, "who painted the mona lisa", learner_id="metrics-sized@example.com")
        assert httpx.post(f"{url}/v1/chat", json={}).status_code == 422
        assert httpx.get(f"{url}/v1/learners/typo@example.com/x").status_code == 404
        assert httpx.delete(f"{url}/v1/learners/erase.me@example.com").status_code == 401
        assert runtime.writer.flush()
        time.sleep(0.5)  # the writer reports its counts after each pass of its loop
        response = httpx.get(f"{url}/metrics")
        after = parse(response.text)
    # The calculator answer is covered and grounded; the painting is out of the module's scope.
    assert [t["name"] for t in sized["tool_calls"]] == ["quantized_size"]
    assert sized["coverage"] == "full" and sized["grounding"]["grounded"] and not sized["out_of_scope"]
    assert painted["out_of_scope"] and painted["coverage"] == "none"
    module = {"module": MODULE_ID}
    assert moved(before, after, "mentor_questions_total", engine="extractive", **module) == 2
    assert moved(before, after, "mentor_questions_out_of_scope_total", **module) == 1
    assert moved(before, after, "mentor_answers_coverage_total", coverage="full", **module) == 1
    assert moved(before, after, "mentor_answers_coverage_total", coverage="none", **module) == 1
    grounded = moved(before, after, "mentor_answers_grounding_total", grounded="true", **module)
    ungrounded = moved(before, after, "mentor_answers_grounding_total", grounded="false", **module)
    assert grounded + ungrounded == 2 and grounded == 1 + painted["grounding"]["grounded"]
    assert moved(before, after, "mentor_calculator_calls_total", name="quantized_size", outcome="ok") == 1
    assert moved(before, after, "mentor_answer_duration_seconds_count", engine="extractive") == 2
    assert moved(before, after, "mentor_signals_written_total") == 2
    assert value(after, "mentor_signal_queue_depth") == 0 and value(after, "mentor_signal_spool_bytes") == 0
    # HTTP: by route template and status, never by raw path (a path can hold a learner id).
    chat_ok = {"method": "POST", "route": "/v1/chat", "status": "200"}
    assert moved(before, after, "mentor_http_requests_total", **chat_ok) == 2
    assert moved(before, after, "mentor_http_request_duration_seconds_count", **chat_ok) == 2
    assert moved(before, after, "mentor_http_requests_total", method="POST", route="/v1/chat", status="422") == 1
    assert moved(before, after, "mentor_http_requests_total", method="GET", route="unmatched", status="404") == 1
    erase = {"method": "DELETE", "route": "/v1/learners/{learner_id}", "status": "401"}
    assert moved(before, after, "mentor_http_requests_total", **erase) == 1
    assert moved(before, after, "mentor_http_requests_total", method="GET", route="/metrics", status="200") == 1
    for leak in ("example.com", "typo", "erase.me", "mona lisa", "70B"):
        assert leak not in response.text, leak


def test_llm_turns_errors_and_fallbacks_are_counted(tmp_path, runtime) -> None:
    """The chat wired as build_runtime wires it (an observed sink, the LLM engine given the metrics)."""
    with StubLLM() as stub:
        settings = make_settings(tmp_path, llm_base_url=stub.url, llm_model="stub-model", llm_timeout_s=2.0)
        sink = ObservedSink(runtime.metrics, runtime.writer)
        chat_service = build_chat(settings, runtime.catalog, runtime.embedder, sink=sink, metrics=runtime.metrics)
        app = create_app(settings, runtime=replace(runtime, settings=settings, chat=chat_service))
        with serve(app) as url:
            before = scrape(url)
            stub.set_script([Reply(status=503)])
            failed = chat(url, "what does ZeRO stage 2 shard?", learner_id="metrics-llm")
            stub.set_script(grounded_zero_answer)
            streamed = httpx.post(
                f"{url}/v1/chat/stream", json={"module_id": MODULE_ID, "message": "what does ZeRO shard?"}
            )
            after = scrape(url)
    assert streamed.status_code == 200 and '"engine": "llm"' in streamed.text.split("event: done")[-1]
    assert failed["engine"] == "extractive" and failed["fallback_reason"] == "http_503"
    assert moved(before, after, "mentor_llm_errors_total", model="stub-model", reason="http_503") == 1
    assert moved(before, after, "mentor_answers_fallback_total", reason="http_503") == 1
    # The failed turn was asked in one piece (/v1/chat); the streamed one ended with a completion.
    stream = {"model": "stub-model", "mode": "stream"}
    assert moved(before, after, "mentor_llm_request_duration_seconds_count", **stream) == 1
    assert moved(before, after, "mentor_llm_request_duration_seconds_count", model="stub-model", mode="complete") == 0
    assert moved(before, after, "mentor_questions_total", module=MODULE_ID, engine="extractive") == 1
    assert moved(before, after, "mentor_questions_total", module=MODULE_ID, engine="llm") == 1


def test_metrics_can_require_a_token_or_be_turned_off(tmp_path, runtime) -> None:
    secret = "scrape-secret-of-at-least-32-bytes"
    guarded = make_settings(tmp_path, metrics_token=secret)
    with serve(create_app(guarded, runtime=runtime)) as url:
        refused = httpx.get(f"{url}/metrics")
        assert refused.status_code == 401 and refused.json()["error"] == "unauthorized"
        assert refused.headers["www-authenticate"] == "Bearer"
        assert (
            httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {runtime.analyst_token}"}).status_code == 401
        )
        assert "mentor_http_requests_total" in str(scrape(url, Authorization=f"Bearer {secret}"))
        openmetrics = httpx.get(
            f"{url}/metrics",
            headers={"Authorization": f"Bearer {secret}", "Accept": "application/openmetrics-text; version=1.0.0"},
        )
        assert openmetrics.headers["content-type"].startswith("application/openmetrics-text")
        assert openmetrics.text.rstrip().endswith("# EOF")
    with serve(create_app(make_settings(tmp_path, metrics=False), runtime=runtime)) as url:
        assert httpx.get(f"{url}/metrics").status_code == 404
    # An operator endpoint, not part of the API the schema documents.
    assert "/metrics" not in create_app(guarded, runtime=runtime).openapi()["paths"]


@pytest.mark.slow
def test_two_workers_report_the_same_totals_and_a_dead_workers_gauges_go(tmp_path) -> None:
    port = free_port()
    env = clean_env(
        MENTOR_DATA_DIR=str(tmp_path / "data"),
        MENTOR_PORT=str(port),
        MENTOR_REDIS_URL="redis://127.0.0.1:6379/10",
        MENTOR_REDIS_PREFIX=f"metrics-{uuid.uuid4().hex[:8]}",
        MENTOR_PSEUDONYM_KEY="metrics-test-key",
        MENTOR_ANALYST_TOKEN="metrics-test-token-of-at-least-32-bytes",
    )
    log = tmp_path / "serve.log"
    server = spawn([MENTOR, "serve", "--workers", "2"], env=env, log_path=log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(f"{url}/readyz", server, log)
        wait_started(log, server, 2)  # /readyz answers as soon as one of them serves
        workers = workers_of(server.pid)
        assert len(workers) == 2, workers
        directory = Path(worker_env(workers[0])["PROMETHEUS_MULTIPROC_DIR"])
        assert worker_env(workers[1])["PROMETHEUS_MULTIPROC_DIR"] == str(directory) and directory.is_dir()
        questions = ["what does ZeRO stage 1 shard?", "int4 70B — how big?", "what is tensor parallelism?"]
        for n, question in enumerate(questions):  # worker 0, 1, 0: each answers some
            response = ask_on(workers[n % 2], workers, url, {"message": question, "learner_id": f"m{n}"})
            assert response.status_code == 200, response.text
        # A response is counted after its last byte, and a paused worker counts nothing: give each a moment.
        time.sleep(1)
        scrapes = [parse(metrics_on(worker, workers, url).text) for worker in workers]
        for samples in scrapes:  # either worker reports both workers' questions
            assert value(samples, "mentor_questions_total", module=MODULE_ID, engine="extractive") == 3
            assert value(samples, "mentor_calculator_calls_total", name="quantized_size", outcome="ok") == 1
            assert value(samples, "mentor_http_requests_total", method="POST", route="/v1/chat", status="200") == 3
            assert value(samples, "mentor_embedding_batch_size_count") >= 3  # each new question embedded once
            assert ("mentor_signal_queue_depth", ()) in samples  # one gauge, summed over the live workers
        # A worker that dies takes its gauges with it; its counts stay in the totals.
        killed = workers[0]
        assert (directory / f"gauge_livesum_{killed}.db").exists()
        os.kill(killed, signal.SIGKILL)
        # uvicorn starts a new worker; once it serves, it reads the killed worker's counts from the directory.
        wait_started(log, server, 3)
        survivors = workers_of(server.pid)
        new = next(pid for pid in survivors if pid not in workers)
        after = parse(metrics_on(new, survivors, url).text)
        assert value(after, "mentor_questions_total", module=MODULE_ID, engine="extractive") == 3
        assert not (directory / f"gauge_livesum_{killed}.db").exists()
    finally:
        stop(server)
    assert not directory.exists(), "the Prometheus directory outlived the server"
    assert "Traceback" not in log.read_text()


def wait_started(log: Path, server, count: int, timeout_s: float = 240) -> None:
    """Until `count` workers have started in all (uvicorn logs each start once)."""
    deadline = time.monotonic() + timeout_s
    while log.read_text().count("Application startup complete") < count:
        assert time.monotonic() < deadline and server.poll() is None, f"{count} worker starts expected"
        time.sleep(0.5)


def worker_env(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def metrics_on(worker: int, workers: list[int], url: str) -> httpx.Response:
    """GET /metrics answered by `worker` (the others paused, as in ask_on)."""
    paused = [pid for pid in workers if pid != worker]
    for pid in paused:
        os.kill(pid, signal.SIGSTOP)
    try:
        with httpx.Client(timeout=30) as client:
            return client.get(f"{url}/metrics")
    finally:
        for pid in paused:
            os.kill(pid, signal.SIGCONT)
