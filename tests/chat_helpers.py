"""Helpers shared by the tests: apps over real HTTP, SSE parsing with a real client, timing a scan, and asking the
runtime in-process as the generated probes do."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import uvicorn
from httpx_sse import connect_sse

from mentor.answer import ChatInput

from .conftest import MODULE_ID, free_port


@contextmanager
def serve(app) -> Iterator[str]:
    """Run an ASGI app with uvicorn on a free localhost port, in a thread; yield its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def stream_events(base_url: str, body: dict) -> list[tuple[str, dict]]:
    """POST /v1/chat/stream and parse every server-sent event with httpx-sse."""
    with (
        httpx.Client(base_url=base_url, timeout=30) as client,
        connect_sse(client, "POST", "/v1/chat/stream", json=body) as source,
    ):
        assert source.response.headers["content-type"].startswith("text/event-stream")
        return [(event.event, json.loads(event.data)) for event in source.iter_sse()]


def elapsed_s(call, *args, runs: int = 3) -> float:
    """The best of `runs` timings: a quadratic pattern is slow every time, a stall of a busy machine once (a
    4,000-character scan that takes 1 ms once took 570 ms during a full `make test`)."""
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        call(*args)
        best = min(best, time.perf_counter() - started)
    return best


def grows_linearly(call, text_of, size: int = 4000) -> tuple[bool, str]:
    """Whether `call` on `text_of(size)` takes at most ~twice the linear share of its time on `text_of(size // 4)`.

    Both timings are taken in the same test, best of three, so a busy machine slows both: a linear scan grows
    about 4x from a quarter of the text to all of it, a quadratic one 16x. The 2 ms allowance keeps timer noise
    on microsecond calls from counting; the quadratic patterns this guards against took 88-656 ms.
    """
    quarter, full = elapsed_s(call, text_of(size // 4)), elapsed_s(call, text_of(size))
    return (
        full <= 8 * quarter + 0.002,
        f"{full * 1000:.1f} ms on {size} characters, {quarter * 1000:.1f} ms on a quarter",
    )


def ask_module(runtime, message: str, conversation_id: str | None = None):
    """Ask the runtime's chat about the test module in-process; the `AnsweredQuestion`."""
    return asyncio.run(
        runtime.chat.ask(ChatInput(message=message, module_id=MODULE_ID, conversation_id=conversation_id))
    )


def cited_sections(answered) -> frozenset[str]:
    """The sections an answer cites."""
    return frozenset(c.section_id for c in answered.answer.citations)


def answered_alike(answered, bare) -> bool:
    """Answered, citing a section the `bare` question's answer cites (or that answer cites none)."""
    cited = cited_sections(bare)
    return not answered.answer.out_of_scope and (bool(cited_sections(answered) & cited) or not cited)
