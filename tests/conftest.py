"""Shared fixtures: one real embedder per test session, real Chroma, real databases."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "corpus"
INDEXES = ROOT / "tests/data/corpus_indexes"  # a second module with another table, pointers and names
INDEXES_ID = "T01.databases.03"
MODULE_ID = "P10.llm-systems-frontier.02"
# Every rate limit out of the way: many tests ask, search and fail tokens from one client address within a minute
# (the limits have their own tests, tests/test_throttle.py).
UNLIMITED = {
    "rate_limit_per_minute": 10_000,
    "rate_limit_per_client_per_minute": 10_000,
    "rate_limit_search_per_minute": 10_000,
    "rate_limit_tools_per_minute": 10_000,
    "rate_limit_bad_tokens_per_minute": 10_000,
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def embedder():
    """The packaged all-MiniLM-L6-v2 on the default backend (ONNX Runtime), loaded once for the whole session."""
    from mentor.embeddings import make_embedder
    from mentor.settings import Settings

    return make_embedder(Settings())


@pytest.fixture
def corpus_copy(tmp_path: Path) -> Path:
    """A private copy of the real corpus that a test may edit."""
    target = tmp_path / "corpus"
    shutil.copytree(CORPUS, target)
    return target


def make_settings(tmp_path: Path, **overrides):
    from mentor.settings import Settings

    values = {"data_dir": tmp_path / "data", "corpus_dir": CORPUS} | overrides
    if values.get("redis_url") or str(values.get("database_url") or "sqlite").startswith("postgresql"):
        # A shared configuration refuses to start without the secrets every replica must agree on.
        secrets = {"pseudonym_key": "test-pseudonym-key", "analyst_token": "test-analyst-token-of-at-least-32-bytes"}
        values = secrets | values
    return Settings(**values)


@pytest.fixture(scope="session")
def runtime(tmp_path_factory, embedder):
    """A runtime over the real corpus with an embedded Chroma store in a temporary directory."""
    from mentor.runtime import build_runtime

    settings = make_settings(tmp_path_factory.mktemp("runtime"), **UNLIMITED)
    return build_runtime(settings, embedder=embedder)


@pytest.fixture(scope="session")
def indexes(tmp_path_factory, embedder):
    """A runtime over the second test module (`INDEXES`), every rate limit out of the way, built once."""
    from mentor.runtime import build_runtime

    settings = make_settings(tmp_path_factory.mktemp("indexes"), corpus_dir=INDEXES, **UNLIMITED)
    return build_runtime(settings, embedder=embedder)


@pytest.fixture(scope="session")
def client(runtime):
    """An HTTP client for an app sharing the session runtime."""
    from fastapi.testclient import TestClient

    from mentor.api import create_app

    with TestClient(create_app(runtime.settings, runtime=runtime)) as test_client:
        yield test_client


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory) -> Iterator[str]:
    """A real `chroma run` server on a free localhost port, for the session."""
    port = free_port()
    path = tmp_path_factory.mktemp("chroma-server")
    chroma = Path(sys.executable).with_name("chroma")
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    process = subprocess.Popen(
        [str(chroma), "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    import httpx

    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/api/v2/heartbeat", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    else:
        process.kill()
        pytest.fail("chroma server did not start within 60 s")
    yield url
    process.terminate()
    process.wait(timeout=10)
