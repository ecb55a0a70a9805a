"""`mentor serve --workers N`: several processes on one port, under the same shared-state rules as replicas."""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from pathlib import Path

import httpx
import pytest

from mentor.bench.cluster import MENTOR
from mentor.bench.procs import clean_env, free_port, spawn, stop, wait_ready

pytestmark = pytest.mark.slow


def workers_of(pid: int) -> list[int]:
    """The worker processes uvicorn spawned (not multiprocessing's resource tracker)."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    pids = [int(p) for p in path.read_text().split()] if path.exists() else []
    return [p for p in pids if b"resource_tracker" not in Path(f"/proc/{p}/cmdline").read_bytes()]


def test_workers_without_redis_are_refused_in_one_line(tmp_path) -> None:
    env = clean_env(MENTOR_DATA_DIR=str(tmp_path / "data"), MENTOR_PORT=str(free_port()))
    done = subprocess.run([MENTOR, "serve", "--workers", "2"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: 2 workers need MENTOR_REDIS_URL")


def test_two_workers_share_conversations_and_the_rate_limit(tmp_path) -> None:
    port = free_port()
    prefix = f"workers-{uuid.uuid4().hex[:8]}"
    env = clean_env(
        MENTOR_DATA_DIR=str(tmp_path / "data"),
        MENTOR_PORT=str(port),
        MENTOR_REDIS_URL="redis://127.0.0.1:6379/10",
        MENTOR_REDIS_PREFIX=prefix,
        MENTOR_PSEUDONYM_KEY="workers-test-key",
        MENTOR_ANALYST_TOKEN="workers-test-token-of-at-least-32-bytes",
        MENTOR_RATE_LIMIT_PER_MINUTE="12",
    )
    log = tmp_path / "serve.log"
    server = spawn([MENTOR, "serve", "--workers", "2"], env=env, log_path=log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(f"{url}/readyz", server, log)
        workers = workers_of(server.pid)
        assert len(workers) == 2, workers
        # Which worker accepts a connection is the kernel's choice; pausing the other one (SIGSTOP) makes it ours.
        first = ask_on(workers[0], workers, url, {"message": "what is ZeRO?", "learner_id": "w1"})
        assert first.status_code == 200, first.text
        conversation = first.json()["conversation_id"]
        for turn in range(1, 6):
            body = {"message": f"and stage {turn % 3 + 1}?", "learner_id": "w1", "conversation_id": conversation}
            response = ask_on(workers[turn % 2], workers, url, body)
            assert response.status_code == 200, (turn, response.text)  # the other worker began it
        codes = [
            ask_on(workers[n % 2], workers, url, {"message": "what is ZeRO?", "learner_id": "w1"}).status_code
            for n in range(8)
        ]
        assert codes == [200] * 6 + [429] * 2  # 12 a minute across both workers: 6 asked above
        assert "Traceback" not in log.read_text()
    finally:
        stop(server)


def ask_on(worker: int, workers: list[int], url: str, body: dict) -> httpx.Response:
    """POST /v1/chat answered by `worker`: the others are paused, so only it can accept the connection."""
    paused = [pid for pid in workers if pid != worker]
    for pid in paused:
        os.kill(pid, signal.SIGSTOP)
    try:
        with httpx.Client(timeout=60) as client:  # a new connection, accepted now
            return client.post(f"{url}/v1/chat", json=body)
    finally:
        for pid in paused:
            os.kill(pid, signal.SIGCONT)
