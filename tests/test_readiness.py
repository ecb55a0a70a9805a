"""Readiness that matches what the service can do, and a start-up that waits for a Chroma server coming up late.

Outages are real: the Chroma server and PostgreSQL sit behind `tests/proxy.py`, which a test cuts, and the
start-up tests run the `mentor` command as a subprocess against a closed port or a `chroma run` started late.
"""

from __future__ import annotations

import copy
import logging
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, select, text
from sqlmodel import Session

from mentor.api import create_app
from mentor.catalog import make_catalog
from mentor.errors import NotReady
from mentor.index import chroma_client, connect_index
from mentor.runtime import READY_TIMEOUT_S, build_runtime
from mentor.signals.tables import QuestionRow

from .chat_helpers import serve
from .conftest import MODULE_ID, free_port, make_settings
from .proxy import Proxy

PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
QUESTION = {"module_id": MODULE_ID, "message": "why do we need loss scaling with fp16?"}
MENTOR = Path(sys.executable).with_name("mentor")
CHROMA = Path(sys.executable).with_name("chroma")


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def answers(http: httpx.Client) -> bool:
    """A learner's question gets a grounded answer with citations."""
    response = http.post("/v1/chat", json=QUESTION)
    return response.status_code == 200 and bool(response.json()["citations"])


@pytest.fixture
def chroma_proxy(chroma_server):
    """The session's Chroma server behind a proxy this test may cut, without stopping the server others use."""
    proxy = Proxy(port_of(chroma_server))
    proxy.up()
    yield proxy
    proxy.down()


@pytest.fixture
def pg_schema():
    """A fresh schema in the real PostgreSQL; dropped afterwards."""
    schema = f"mentor_ready_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f"CREATE SCHEMA {schema}"))
    yield schema
    with admin.connect() as connection:
        connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
    admin.dispose()


# --- /livez and /readyz -------------------------------------------------------------------------------------


def test_livez_is_a_trivial_alias_of_healthz(client) -> None:
    assert client.get("/livez").json() == client.get("/healthz").json() == {"status": "ok", "detail": {}}
    ready = client.get("/readyz").json()
    assert ready["status"] == "ready" and ready["detail"]["retrieval"].startswith("ok (12 chunks")


def test_readyz_stays_200_naming_the_index_while_chroma_is_down(tmp_path, chroma_proxy, embedder) -> None:
    settings = make_settings(
        tmp_path,
        chroma_url=f"http://127.0.0.1:{chroma_proxy.port}",
        collection="readiness",
        rate_limit_per_minute=100,
        sync_on_start=True,
    )
    runtime = build_runtime(settings, embedder=embedder)
    try:
        with serve(create_app(settings, runtime=runtime)) as url, httpx.Client(base_url=url, timeout=30) as http:
            assert http.get("/readyz").json()["status"] == "ready"
            chroma_proxy.down()
            ready = http.get("/readyz")
            assert ready.status_code == 200, ready.text
            detail = ready.json()["detail"]
            assert ready.json()["status"] == "degraded" and detail["index"].startswith("unavailable")
            assert "modules already loaded" in detail["index"]
            assert detail["database"] == "ok" and detail["retrieval"].startswith("ok")
            assert answers(http)  # the in-memory vectors answer while Chroma is away
            chroma_proxy.up()
            assert http.get("/readyz").json()["status"] == "ready"
    finally:
        runtime.writer.stop()


def test_readyz_stays_200_naming_the_database_while_it_is_down(tmp_path, pg_schema, embedder) -> None:
    proxy = Proxy(5432)
    proxy.up()
    database = f"postgresql+psycopg://postgres@127.0.0.1:{proxy.port}/test?options=-csearch_path%3D{pg_schema}"
    settings = make_settings(tmp_path, database_url=database, rate_limit_per_minute=100, sync_on_start=True)
    runtime = build_runtime(settings, embedder=embedder)
    try:
        with serve(create_app(settings, runtime=runtime)) as url, httpx.Client(base_url=url, timeout=30) as http:
            assert http.get("/readyz").json()["status"] == "ready"
            proxy.down()
            ready = http.get("/readyz")
            assert ready.status_code == 200, ready.text
            detail = ready.json()["detail"]
            assert ready.json()["status"] == "degraded" and detail["index"].startswith("ok")
            assert detail["database"].startswith("unavailable") and "signals are spooled" in detail["database"]
            assert answers(http)
            proxy.up()
            assert runtime.writer.flush(30)  # the question asked during the outage reaches the database
            with Session(runtime.database) as session:
                assert len(session.exec(select(QuestionRow.id)).scalars().all()) == 1
            assert http.get("/readyz").json()["status"] == "ready"
    finally:
        runtime.writer.stop()
        proxy.down()
        runtime.database.dispose()


def test_readyz_answers_within_its_budget_when_chroma_hangs(tmp_path, chroma_proxy, embedder) -> None:
    settings = make_settings(
        tmp_path, chroma_url=f"http://127.0.0.1:{chroma_proxy.port}", collection="readiness_hang", sync_on_start=True
    )
    runtime = build_runtime(settings, embedder=embedder)
    chroma_proxy.down()
    # In the proxy's place, a server that accepts connections and never replies.
    hung = socket.socket()
    hung.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    hung.bind(("127.0.0.1", chroma_proxy.port))
    hung.listen(8)
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.extend(iter(lambda: hung.accept()[0], None)), daemon=True).start()
    try:
        with serve(create_app(settings, runtime=runtime)) as url, httpx.Client(base_url=url, timeout=30) as http:
            started = time.monotonic()
            ready = http.get("/readyz")
            took = time.monotonic() - started
            assert ready.status_code == 200 and ready.json()["status"] == "degraded"
            assert ready.json()["detail"]["index"].startswith(f"unavailable: no answer within {READY_TIMEOUT_S:g} s")
            assert took < READY_TIMEOUT_S + 1.5, took
            assert answers(http)
    finally:
        runtime.writer.stop()
        hung.close()
        for sock in accepted:  # the stuck probe gets its EOF and ends
            sock.close()


def test_readyz_is_503_only_when_no_question_can_be_answered(runtime) -> None:
    from fastapi.testclient import TestClient

    empty = replace(runtime, chat=copy.copy(runtime.chat))
    empty.chat.use(make_catalog(runtime.settings, runtime.embedder, {}, {}, {}))
    with TestClient(create_app(runtime.settings, runtime=empty)) as test_client:
        response = test_client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["status"] == "not ready"
    assert response.json()["detail"]["retrieval"].startswith("no module loaded")


# --- start-up with a Chroma server that is not (yet) there --------------------------------------------------


def test_clients_for_two_chroma_servers_in_one_process(tmp_path, chroma_server, chroma_proxy) -> None:
    # chromadb writes host and port into the settings object it is given: one shared object broke the second.
    direct = chroma_client(make_settings(tmp_path, chroma_url=chroma_server))
    proxied = chroma_client(make_settings(tmp_path, chroma_url=f"http://127.0.0.1:{chroma_proxy.port}"))
    assert direct.heartbeat() and proxied.heartbeat()


def test_connect_retries_with_growing_pauses_then_fails_in_one_sentence(tmp_path, embedder, caplog) -> None:
    settings = make_settings(tmp_path, chroma_url=f"http://127.0.0.1:{free_port()}")
    pauses: list[float] = []

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        time.sleep(seconds)

    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="mentor.index"), pytest.raises(NotReady) as raised:
        connect_index(settings, embedder, owner=True, wait_s=2.0, sleep=sleep)
    took = time.monotonic() - started
    assert pauses[:2] == [0.5, 1.0] and sum(pauses) <= 2.0  # doubling, the last pause trimmed to the budget
    assert 2.0 <= took < 3.5, took  # the budget, plus one last attempt
    assert "\n" not in raised.value.message and f"after {len(pauses) + 1} attempts" in raised.value.message
    retries = [r for r in caplog.records if r.name == "mentor.index"]
    assert len(retries) == len(pauses) and all(r.exc_info is None for r in retries)
    assert all("not reachable yet" in r.getMessage() and "\n" not in r.getMessage() for r in retries)


def test_chroma_lost_during_the_index_sync_is_one_plain_error(tmp_path, chroma_proxy, embedder) -> None:
    settings = make_settings(
        tmp_path, chroma_url=f"http://127.0.0.1:{chroma_proxy.port}", collection="lost_mid_sync", sync_on_start=True
    )
    # on_plan runs after the index was read and before the new chunks are written: cut Chroma right there.
    with pytest.raises(NotReady) as raised:
        build_runtime(settings, embedder=embedder, on_plan=lambda _new: chroma_proxy.down())
    assert raised.value.message.startswith(f"Chroma server at {settings.chroma_url} went away during start-up")
    assert "\n" not in raised.value.message


def mentor_env(tmp_path: Path, **values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MENTOR_")}
    return env | {"MENTOR_DATA_DIR": str(tmp_path / "data"), "HF_HUB_OFFLINE": "1"} | values


@pytest.mark.slow
@pytest.mark.parametrize("command", ["ingest", "serve"])
def test_start_up_without_chroma_ends_in_one_line_after_its_retries(tmp_path, command) -> None:
    env = mentor_env(
        tmp_path,
        MENTOR_CHROMA_URL=f"http://127.0.0.1:{free_port()}",
        MENTOR_CHROMA_WAIT_S="3",
        MENTOR_PORT=str(free_port()),
    )
    started = time.monotonic()
    done = subprocess.run([str(MENTOR), command], env=env, capture_output=True, text=True, timeout=120)
    took = time.monotonic() - started
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    retries = [line for line in lines if "is not reachable yet" in line]
    assert len(retries) >= 2, done.stderr
    assert lines[-1].startswith("error: Chroma server at http://127.0.0.1:") and "attempts in 3 s" in lines[-1]
    assert took < 60, took  # the budget set in MENTOR_CHROMA_WAIT_S, not the 60 s default


@pytest.mark.slow
def test_start_up_waits_for_a_chroma_server_that_starts_late(tmp_path) -> None:
    chroma_port, api_port = free_port(), free_port()
    env = mentor_env(
        tmp_path,
        MENTOR_CHROMA_URL=f"http://127.0.0.1:{chroma_port}",
        MENTOR_PORT=str(api_port),
        MENTOR_SYNC_ON_START="true",  # one process that owns the server's index
    )
    log_path = tmp_path / "mentor.log"
    chroma = None
    with open(log_path, "w") as log_file:
        mentor = subprocess.Popen([str(MENTOR), "serve"], env=env, stdout=log_file, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while "is not reachable yet" not in log_path.read_text():
            assert mentor.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.1)
        time.sleep(2)  # mentor is waiting; only now does the Chroma server start
        chroma = subprocess.Popen(
            [str(CHROMA), "run", "--path", str(tmp_path / "chroma"), "--host", "127.0.0.1", "--port", str(chroma_port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=os.environ | {"ANONYMIZED_TELEMETRY": "False"},
        )
        url = f"http://127.0.0.1:{api_port}"
        deadline = time.monotonic() + 90
        while True:
            assert mentor.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, log_path.read_text()
            try:
                if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        with httpx.Client(base_url=url, timeout=60) as http:
            assert http.get("/readyz").json()["status"] == "ready"
            assert answers(http)
        assert "Traceback" not in log_path.read_text()
    finally:
        for process in (mentor, chroma):
            if process is not None:
                process.terminate()
                process.wait(timeout=30)


def test_readyz_stays_200_naming_redis_while_it_is_down_and_questions_are_answered(runtime, tmp_path) -> None:
    from mentor.record import NO_SINK
    from mentor.runtime import LearnerState, build_chat

    settings = make_settings(tmp_path, redis_url=f"redis://127.0.0.1:{free_port()}/0", rate_limit_per_minute=100)
    state = LearnerState.build(settings)
    chat = build_chat(settings, runtime.catalog, runtime.embedder, sink=NO_SINK, state=state)
    shared = replace(runtime, settings=settings, state=state, chat=chat)
    with serve(create_app(settings, runtime=shared)) as url, httpx.Client(base_url=url, timeout=30) as http:
        ready = http.get("/readyz")
        assert ready.status_code == 200 and ready.json()["status"] == "degraded", ready.text
        assert ready.json()["detail"]["learner_state"].startswith("unavailable")
        assert "without conversation memory" in ready.json()["detail"]["learner_state"]
        answered = http.post("/v1/chat", json={"message": "what is ZeRO?", "learner_id": "r"})
        assert answered.status_code == 200, answered.text
        erased = http.delete("/v1/learners/r", headers={"Authorization": f"Bearer {shared.analyst_token}"})
        assert erased.status_code == 503, erased.text  # an erasure is complete or visibly refused
