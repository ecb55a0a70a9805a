"""/v1/chat/stream as sse-starlette serves it, read raw over real HTTP: event ids, keep-alive pings, and a client
that leaves mid-answer (the answer stops, the question is still logged)."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from datetime import UTC, datetime

import httpx
import pytest

from mentor.api import create_app
from mentor.metrics import ObservedSink
from mentor.stub_llm import Reply, StubLLM

from .chat_helpers import serve
from .conftest import MODULE_ID, make_settings
from .test_chat_llm import grounded_zero_answer
from .test_metrics import moved, scrape

PING_S = 0.1


@pytest.fixture
def slow_llm(tmp_path, runtime):
    """An app over real HTTP whose LLM (a stub) streams slowly, pinging every PING_S; signals go to the session's
    database, counted on the way as build_runtime wires it."""
    from mentor.runtime import build_chat

    with StubLLM() as stub:
        settings = make_settings(
            tmp_path,
            llm_base_url=stub.url,
            llm_model="stub-model",
            llm_timeout_s=30.0,
            sse_ping_s=PING_S,
            rate_limit_per_minute=10_000,
        )
        sink = ObservedSink(runtime.metrics, runtime.writer)
        chat = build_chat(settings, runtime.catalog, runtime.embedder, sink=sink, metrics=runtime.metrics)
        with serve(create_app(settings, runtime=replace(runtime, settings=settings, chat=chat))) as url:
            yield stub, url


def blocks(text: str) -> list[dict[str, str]]:
    """The stream's blocks, each as its fields ("" holds a comment), in order."""
    parsed = []
    for block in text.strip().split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            name, _, field = line.partition(": ")
            fields[name] = field
        parsed.append(fields)
    return parsed


def test_events_carry_ids_and_a_quiet_stream_is_pinged(slow_llm, runtime) -> None:
    stub, url = slow_llm
    stub.set_script(lambda request: replace(grounded_zero_answer(request), token_delay_s=4 * PING_S))
    body = {"module_id": MODULE_ID, "message": "what does ZeRO shard?", "learner_id": "pinged"}
    with httpx.stream("POST", f"{url}/v1/chat/stream", json=body, headers={"X-Request-ID": "sse-1"}, timeout=60) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        assert r.headers["cache-control"] == "no-store" and r.headers["x-accel-buffering"] == "no"
        assert r.headers["x-request-id"] == "sse-1"
        text = r.read().decode()
    parsed = blocks(text)
    pings = [b for b in parsed if set(b) == {""}]
    events = [b for b in parsed if "event" in b]
    assert len(pings) >= 3 and all(p[""].startswith("ping") for p in pings)  # words 0.4 s apart, a ping each 0.1 s
    assert len(pings) + len(events) == len(parsed)  # nothing else: comments and events only
    assert [e["id"] for e in events] == [str(n) for n in range(1, len(events) + 1)]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "meta" and kinds[-1] == "done" and set(kinds[1:-1]) == {"delta"}
    data = [json.loads(e["data"]) for e in events]
    done = data[-1]
    assert data[0]["question_id"] == done["question_id"] and done["engine"] == "llm" and done["grounding"]["grounded"]
    assert "".join(d["text"] for d in data[1:-1]) == done["answer"]


def test_a_client_that_leaves_stops_the_answer_and_the_question_is_still_logged(slow_llm, runtime) -> None:
    stub, url = slow_llm
    words = [f"word{n}" for n in range(60)]
    stub.set_script([Reply(content=" ".join(words) + " [1].", token_delay_s=0.2)])  # 12 s to stream in full
    before = scrape(url)
    since = datetime.now(UTC).isoformat()
    body = {"module_id": MODULE_ID, "message": "what does ZeRO shard?", "learner_id": "leaver"}
    seen: list[dict] = []
    with httpx.Client(timeout=60) as client, client.stream("POST", f"{url}/v1/chat/stream", json=body) as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                seen.append(json.loads(line.removeprefix("data: ")))
            if len(seen) == 4:  # meta and three words: then the learner closes the tab
                break
    left = time.monotonic()
    question_id = seen[0]["question_id"]
    auth = {"Authorization": f"Bearer {runtime.analyst_token}"}
    row = None
    while row is None and time.monotonic() - left < 8:  # well before the 12 s the whole answer would take
        page = httpx.get(f"{url}/v1/signals/questions", params={"since": since, "limit": 500}, headers=auth).json()
        row = next((item for item in page["items"] if item["question_id"] == question_id), None)
        time.sleep(0.2)
    assert row is not None, "the abandoned question was not logged"
    assert row["fallback_reason"] == "abandoned" and row["engine"] == "llm" and row["model"] == "stub-model"
    assert not row["grounded"] and row["coverage"] is None and row["passages"]
    # What it had been sent, and no more: the model's stream was cut, not read to its end.
    assert row["answer"].startswith("word0 word1") and "word59" not in row["answer"]
    assert len(row["answer"].split()) < 30
    time.sleep(1)
    after = scrape(url)
    assert moved(before, after, "mentor_streams_abandoned_total", module=MODULE_ID) == 1
    assert moved(before, after, "mentor_questions_total", module=MODULE_ID, engine="llm") == 1
    assert moved(before, after, "mentor_answers_grounding_total", module=MODULE_ID, grounded="false") == 0
