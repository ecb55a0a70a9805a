"""Three `mentor serve` replicas on one Redis, one PostgreSQL database and one Chroma server, driven round-robin:
a learner cannot tell which replica answered (the deployment of docker-compose.yml, run natively)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from mentor.bench.cluster import Cluster
from mentor.privacy import pseudonym

from .proxy import Proxy

pytestmark = pytest.mark.slow
LIMIT = 5


@pytest.fixture(scope="module")
def database_proxy() -> Iterator[Proxy]:
    """Between the replicas and PostgreSQL, so a test can take the database away from them."""
    proxy = Proxy(5432)
    proxy.up()
    yield proxy
    proxy.down()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, database_proxy) -> Iterator[Cluster]:
    cluster = Cluster.start(
        tmp_path_factory.mktemp("cluster"),
        replicas=3,
        redis_db=9,
        database_port=database_proxy.port,
        extra_env={"MENTOR_RATE_LIMIT_PER_MINUTE": str(LIMIT)},
    )
    yield cluster
    cluster.close()


def ask(replica, message: str, learner: str, conversation: str | None = None) -> httpx.Response:
    body = {"message": message, "learner_id": learner, "conversation_id": conversation}
    return httpx.post(f"{replica.url}/v1/chat", json=body, timeout=60)


def rows(cluster: Cluster, sql: str, **params) -> list:
    engine = create_engine(cluster.database_url)
    try:
        with engine.connect() as connection:
            return list(connection.execute(text(sql), params))
    finally:
        engine.dispose()


def learner() -> str:
    return f"learner-{uuid.uuid4().hex[:8]}"


def test_a_conversation_hopping_replicas_resolves_every_follow_up(cluster) -> None:
    who = learner()
    turns = ["what does ZeRO stage 1 shard?", "and stage 2?", "and stage 3?", "what does it cost?", "why?"]
    first = ask(cluster.replicas[0], turns[0], who)
    assert first.status_code == 200, first.text
    conversation = first.json()["conversation_id"]
    for n, question in enumerate(turns[1:], start=1):
        replica = cluster.replicas[n % 3]
        response = ask(replica, question, who, conversation)
        assert response.status_code == 200, (replica.url, response.text)
        body = response.json()
        assert body["conversation_id"] == conversation
        # The follow-up was read with the earlier turns, which only the shared store held for this replica.
        assert body["retrieval_query"] != question


def test_the_rate_limit_holds_across_replicas_to_the_exact_count(cluster) -> None:
    who = learner()
    codes = [ask(cluster.replicas[n % 3], "what is ZeRO?", who) for n in range(LIMIT + 7)]
    assert [r.status_code for r in codes] == [200] * LIMIT + [429] * 7
    assert all(1 <= int(r.headers["Retry-After"]) <= 61 for r in codes[LIMIT:])


def test_feedback_on_another_replica_is_accepted_from_the_asker_only(cluster) -> None:
    who = learner()
    question = ask(cluster.replicas[0], "why does fp16 need loss scaling?", who).json()["question_id"]
    url = f"{cluster.replicas[1].url}/v1/questions/{question}/feedback"
    assert httpx.post(url, json={"rating": "up", "learner_id": learner()}, timeout=30).status_code == 404
    accepted = httpx.post(url, json={"rating": "up", "learner_id": who}, timeout=30)
    assert accepted.status_code == 201, accepted.text


def test_erasure_on_one_replica_reaches_every_replica_and_the_database(cluster) -> None:
    who = learner()
    key = pseudonym(who, cluster.env["MENTOR_PSEUDONYM_KEY"].encode())
    first = ask(cluster.replicas[0], "what is pipeline parallelism?", who).json()
    conversation = first["conversation_id"]
    assert ask(cluster.replicas[1], "and its bubble?", who, conversation).status_code == 200
    erased = httpx.delete(f"{cluster.replicas[2].url}/v1/learners/{who}", headers=cluster.analyst, timeout=30)
    assert erased.status_code == 204, erased.text
    for replica in cluster.replicas:
        assert ask(replica, "and after that?", who, conversation).status_code == 404, replica.url
    time.sleep(2)  # any replica's writer that still held a record of theirs has had its turn
    assert rows(cluster, "SELECT id FROM questions WHERE learner_id = :key", key=key) == []
    assert rows(cluster, "SELECT id FROM learners WHERE id = :key", key=key) == []


def test_a_module_re_ingested_is_served_by_every_replica_without_restart(cluster) -> None:
    module = next((Path(cluster.env["MENTOR_CORPUS_DIR"])).glob("*.md"))
    marker = f"zebraquartz{uuid.uuid4().hex[:6]}"
    source = module.read_text()
    anchor = "Loss falls as a power law"
    assert anchor in source
    module.write_text(source.replace(anchor, f"The {marker} rule says so. {anchor}", 1))
    cluster.job("ingest")
    published = time.monotonic()
    pending = set(range(len(cluster.replicas)))
    delays: dict[int, float] = {}
    while pending and time.monotonic() - published < 15:
        for n in sorted(pending):
            found = httpx.get(f"{cluster.replicas[n].url}/v1/search", params={"q": marker, "k": 1}, timeout=10).json()
            if marker in found["passages"][0]["text"]:
                delays[n] = time.monotonic() - published
                pending.discard(n)
        time.sleep(0.1)
    assert not pending, f"replicas {sorted(pending)} still serve the old text after 15 s"
    print(f"\nchange propagation: {', '.join(f'{d:.2f} s' for d in delays.values())} after the ingest ended")
    assert max(delays.values()) < 5.0  # one reload interval (1 s) and the read of one module


def spool_lines(cluster: Cluster, pid: int) -> int:
    files = list((Path(cluster.env["MENTOR_DATA_DIR"]) / "spool").glob(f"*-{pid}.jsonl"))
    return sum(len(f.read_text().splitlines()) for f in files)


def test_a_replica_killed_with_spooled_records_loses_and_duplicates_nothing(cluster, database_proxy) -> None:
    victim = cluster.replicas[0]
    asked: list[str] = []
    database_proxy.down()
    try:
        for n in range(6):
            response = ask(victim, f"question {n}: what does tensor parallelism split?", learner())
            assert response.status_code == 200, response.text  # answering goes on without the database
            asked.append(response.json()["question_id"])
        assert victim.process is not None
        pid = victim.process.pid
        deadline = time.monotonic() + 30
        while spool_lines(cluster, pid) < len(asked) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert spool_lines(cluster, pid) == len(asked)
        cluster.kill(victim)
    finally:
        database_proxy.up()
    cluster.launch(victim)  # a new process: the old spool is an orphan, adopted by whoever finds it first
    deadline = time.monotonic() + 60
    stored: list = []
    while time.monotonic() < deadline:
        stored = rows(cluster, "SELECT id FROM questions WHERE id = ANY(:ids)", ids=asked)
        if len(stored) == len(asked):
            break
        time.sleep(0.5)
    assert sorted(r.id for r in stored) == sorted(asked)
    assert not list((Path(cluster.env["MENTOR_DATA_DIR"]) / "spool").glob(f"*-{pid}.jsonl"))  # adopted, removed
