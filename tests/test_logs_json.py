"""The log lines of a real `mentor serve`: JSON objects (MENTOR_LOG_FORMAT=json) or timestamped plain lines, for
mentor's loggers and uvicorn's alike, every line of a request naming its id, and no learner's words or ids."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from mentor.bench.cluster import MENTOR
from mentor.bench.procs import ROOT, clean_env, free_port, stop, wait_ready
from mentor.stub_llm import Reply, StubLLM

from .conftest import MODULE_ID

pytestmark = pytest.mark.slow

GENERATED_ID = re.compile(r"[0-9a-f]{32}")
SECRET_WORDS = "Zelda Quokkason"  # a learner's name in the question, as learners write them
LEARNER = "sam.leak@example.com"


@contextmanager
def mentor_serve(tmp_path: Path, **env: str) -> Iterator[str]:
    """`mentor serve` in a subprocess, its stdout and stderr kept apart in tmp_path; yields its URL."""
    port = free_port()
    environment = clean_env(
        MENTOR_DATA_DIR=str(tmp_path / "data"),
        MENTOR_PORT=str(port),
        MENTOR_ANALYST_TOKEN="log-test-token-of-at-least-32-bytes",
        **env,
    )
    with open(tmp_path / "stdout.log", "wb") as stdout, open(tmp_path / "stderr.log", "wb") as stderr:
        server = subprocess.Popen([MENTOR, "serve"], env=environment, cwd=ROOT, stdout=stdout, stderr=stderr)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(f"{url}/readyz", server, tmp_path / "stderr.log")
        yield url
    finally:
        stop(server)


def test_json_lines_name_their_request_and_hold_no_question_text(tmp_path) -> None:
    # The LLM fails, so mentor.chat logs a warning in the middle of each question's request.
    json_logs = {"MENTOR_LOG_FORMAT": "json", "MENTOR_LLM_MODEL": "stub-model"}
    with (
        StubLLM(default=Reply(status=503)) as llm,
        mentor_serve(tmp_path, MENTOR_LLM_BASE_URL=llm.url, **json_logs) as url,
    ):
        question = {
            "module_id": MODULE_ID,
            "message": f"Hi, I'm {SECRET_WORDS}: what does ZeRO stage 2 shard?",
            "learner_id": LEARNER,
        }
        asked = httpx.post(f"{url}/v1/chat", json=question, headers={"X-Request-ID": "trace-42.a:b"}, timeout=60)
        assert asked.status_code == 200 and asked.json()["fallback_reason"] == "http_503"
        assert asked.headers["x-request-id"] == "trace-42.a:b"
        streamed = httpx.post(f"{url}/v1/chat/stream", json=question, headers={"X-Request-ID": "stream-7"}, timeout=60)
        assert streamed.status_code == 200 and streamed.headers["x-request-id"] == "stream-7"
        refused = httpx.get(f"{url}/v1/modules", headers={"X-Request-ID": "two words"})
        assert GENERATED_ID.fullmatch(refused.headers["x-request-id"])  # replaced: not a plain token
        made_up = httpx.get(f"{url}/v1/learners/typo@example.com/x")
        assert made_up.status_code == 404 and GENERATED_ID.fullmatch(made_up.headers["x-request-id"])
    stderr = (tmp_path / "stderr.log").read_text()
    stdout = (tmp_path / "stdout.log").read_text()
    lines = [json.loads(line) for line in (stderr + stdout).splitlines()]  # every line is one JSON object
    for line in lines:
        assert {"timestamp", "level", "logger", "message", "request_id"} <= set(line), line
        assert datetime.fromisoformat(line["timestamp"]).tzinfo is not None
    by_logger = {line["logger"] for line in lines}
    assert {"uvicorn.error", "uvicorn.access", "mentor.api.app", "mentor.respond"} <= by_logger
    started = next(line for line in lines if line["message"].startswith("Uvicorn running on"))
    assert started["level"] == "INFO" and started["request_id"] is None  # not a request's line

    def of(request_id: str) -> list[dict]:
        return [line for line in lines if line["request_id"] == request_id]

    for request_id, route in (("trace-42.a:b", "/v1/chat"), ("stream-7", "/v1/chat/stream")):
        lines_of_request = of(request_id)
        warning = next(line for line in lines_of_request if line["logger"] == "mentor.respond")
        assert warning["level"] == "WARNING" and "http_503" in warning["message"]
        access = next(line for line in lines_of_request if line["logger"] == "uvicorn.access")
        assert (access["method"], access["route"], access["status"]) == ("POST", route, 200)
    assert of(refused.headers["x-request-id"])[0]["route"] == "/v1/modules"
    assert of(made_up.headers["x-request-id"])[0]["route"] == "…"
    assert not of("two words")
    for leak in ("Quokkason", "Zelda", "sam.leak", "example.com", "typo"):
        assert leak not in stderr + stdout, leak


def test_plain_lines_are_timestamped_for_uvicorn_too(tmp_path) -> None:
    with mentor_serve(tmp_path) as url:
        assert httpx.get(f"{url}/v1/search", params={"q": "ZeRO"}, headers={"X-Request-ID": "plain-1"}).is_success
    stderr = (tmp_path / "stderr.log").read_text().splitlines()
    stdout = (tmp_path / "stdout.log").read_text().splitlines()
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ "
    assert all(re.match(stamp, line) for line in stderr + stdout), [
        line for line in stderr + stdout if not re.match(stamp, line)
    ]
    assert any(re.match(stamp + r"uvicorn\.error: Uvicorn running on ", line) for line in stderr)
    assert any(re.match(stamp + r"mentor\.api\.app: mentor ready", line) for line in stderr)
    (access,) = [line for line in stdout if "plain-1" in line]
    assert re.match(stamp + r'uvicorn\.access \[plain-1\]: 127\.0\.0\.1:\d+ - "GET /v1/search HTTP/1\.1" 200$', access)


def test_a_set_up_made_under_a_swapped_stderr_keeps_logging_once_it_is_closed(capsys) -> None:
    """The CLI run in-process (a test runner, CliRunner) sets logging up while sys.stderr is a stand-in."""
    import io
    import logging
    import sys

    from mentor.logs import configure_logging
    from mentor.settings import Settings

    root = logging.getLogger()
    saved = root.handlers[:], root.level
    real, stand_in = sys.stderr, io.StringIO()
    try:
        sys.stderr = stand_in
        configure_logging(Settings())
        sys.stderr = real
        stand_in.close()  # the harness is done with it
        logging.getLogger("mentor.test").warning("a line after the harness closed its stream")
    finally:
        sys.stderr = real
        root.handlers[:], _ = saved
        root.setLevel(saved[1])
    err = capsys.readouterr().err
    assert "Logging error" not in err and "a line after the harness closed its stream" in err
