"""The load generator: bounded async httpx loops, run in its own process so its CPU is not the server's.

`measure(spec)` starts `main()` in a child process, which reads the spec as JSON on stdin, sends the warm-up
requests, then `repetitions` batches of `requests`, and prints one summary per batch as JSON. The server's CPU
time is read from /proc around each batch, so warm-up is excluded from it as well.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx

from mentor.bench.procs import cpu_seconds, run_child
from mentor.bench.questions import QUESTIONS, question_for

REQUEST_TIMEOUT_S = 60.0
# What the stub is sent when measured alone: about the size of mentor's real prompt (system rules, four
# passages, the question), so parsing and echo costs are comparable.
STUB_SYSTEM = "You are the mentor for a study module. Answer only from the numbered passages and cite them. " * 20
STUB_PASSAGE = "Adam keeps momentum + variance + an fp32 master copy, about 12 bytes/param of optimizer state. " * 9


@dataclass(frozen=True)
class LoadSpec:
    """One measured run: which endpoint, which server process to bill CPU to, how hard and how long."""

    kind: str  # "mentor", "mentor_stream", "baseline" or "stub"
    base_url: str
    pid: int
    concurrency: int
    requests: int
    repetitions: int
    warmup: int
    # What is asked (mentor.bench.questions): "repeat" (the curated questions in turn), "new" (every question new
    # to every cache) or "mix" (popular questions repeat, most are new). `first_index` is the first new question
    # of this run: runs sent to one server get disjoint ranges, so no new question is ever sent to it twice.
    workload: str = "repeat"
    first_index: int = 0


@dataclass(frozen=True)
class Sample:
    """One request: did it succeed, how long it took, when the first text arrived (streams), what answered."""

    ok: bool
    latency_s: float
    ttft_s: float | None
    tag: str


def measure(spec: LoadSpec, *, timeout_s: float = 900.0) -> list[dict]:
    """Run one load spec in a child process and return its per-repetition summaries."""
    return run_child("mentor.bench.load", spec, timeout_s=timeout_s, what=f"load generator for {spec.kind}")


def main() -> None:
    """Child-process entry point: spec on stdin, summaries on stdout."""
    spec = LoadSpec(**json.loads(sys.stdin.read()))
    json.dump(asyncio.run(run(spec)), sys.stdout)


async def run(spec: LoadSpec) -> list[dict]:
    """Warm up, then measure `repetitions` batches, each bracketed by the server's CPU time."""
    limits = httpx.Limits(max_connections=spec.concurrency, max_keepalive_connections=spec.concurrency)
    async with httpx.AsyncClient(base_url=spec.base_url, timeout=REQUEST_TIMEOUT_S, limits=limits) as client:
        send = SENDERS[spec.kind]
        await batch(client, send, spec, start=0, count=spec.warmup)
        summaries = []
        for repetition in range(spec.repetitions):
            start = spec.warmup + repetition * spec.requests
            cpu_before, started = cpu_seconds(spec.pid), time.perf_counter()
            samples = await batch(client, send, spec, start=start, count=spec.requests)
            wall_s, cpu_s = time.perf_counter() - started, cpu_seconds(spec.pid) - cpu_before
            summaries.append(summarize(samples, wall_s=wall_s, cpu_s=cpu_s))
        return summaries


# (client, question, learner id) -> (when the first text arrived, or None; what answered)
Sender = Callable[[httpx.AsyncClient, str, str], Awaitable[tuple[float | None, str]]]


async def batch(client: httpx.AsyncClient, send: Sender, spec: LoadSpec, *, start: int, count: int) -> list[Sample]:
    """Send requests start..start+count-1 over `spec.concurrency` connections, one simulated learner each."""
    indices = iter(range(start, start + count))  # shared by the workers: the loop ends when it is used up
    samples: list[Sample] = []

    async def worker(seat: int) -> None:
        for index in indices:
            began = time.perf_counter()
            try:
                first_text_at, tag = await send(client, question(index, spec), learner(index, seat))
            except (httpx.HTTPError, ValueError, KeyError) as exc:
                samples.append(Sample(False, time.perf_counter() - began, None, f"error:{type(exc).__name__}"))
                continue
            ttft = None if first_text_at is None else first_text_at - began
            samples.append(Sample(True, time.perf_counter() - began, ttft, tag))

    await asyncio.gather(*(worker(seat) for seat in range(spec.concurrency)))
    return samples


def question(index: int, spec: LoadSpec) -> str:
    """Request `index` of the run (warm-up included) under the spec's workload."""
    return question_for(spec.workload, index, spec.first_index)


def learner(index: int, seat: int) -> str:
    # A simulated learner (one per connection) asks each question once, then a new learner takes the seat;
    # that keeps every learner far below the rate limit while each still has its own id.
    return f"bench-learner-{seat:02d}-{index // len(QUESTIONS)}"


async def send_mentor(client: httpx.AsyncClient, text: str, learner_id: str) -> tuple[float | None, str]:
    body = {"message": text, "learner_id": learner_id}
    response = await client.post("/v1/chat", json=body)
    response.raise_for_status()
    return None, answer_tag(response.json())


async def send_mentor_stream(client: httpx.AsyncClient, text: str, learner_id: str) -> tuple[float | None, str]:
    body = {"message": text, "learner_id": learner_id}
    first_delta = None
    event = tag = ""
    async with client.stream("POST", "/v1/chat/stream", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                event = line.removeprefix("event: ")
                if event == "delta" and first_delta is None:
                    first_delta = time.perf_counter()
            elif line.startswith("data: ") and event in ("done", "error"):
                tag = answer_tag(json.loads(line.removeprefix("data: "))) if event == "done" else "error:stream"
    if not tag.startswith(("llm", "extractive")):
        raise ValueError(f"stream ended without a done event ({tag or 'nothing'})")
    return first_delta, tag


async def send_baseline(client: httpx.AsyncClient, text: str, learner_id: str) -> tuple[float | None, str]:
    response = await client.post("/v1/chat", json={"message": text})
    response.raise_for_status()
    body = response.json()
    return None, f"baseline/{len(body['contexts'])}-contexts" if body["answer"] else "baseline/empty"


async def send_stub(client: httpx.AsyncClient, text: str, learner_id: str) -> tuple[float | None, str]:
    passages = "\n\n".join(f"[{n}] (section: worked example)\n{STUB_PASSAGE}" for n in range(1, 5))
    body = {
        "model": "stub",
        "messages": [
            {"role": "system", "content": STUB_SYSTEM},
            {"role": "user", "content": f"<passages>\n{passages}\n</passages>\n\n<question>\n{text}\n</question>"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    first_token = None
    async with client.stream("POST", "/chat/completions", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if first_token is None and line.startswith("data: {"):
                choices = json.loads(line.removeprefix("data: "))["choices"]
                if choices and choices[0]["delta"].get("content"):
                    first_token = time.perf_counter()
    return first_token, "stub"


def answer_tag(response: dict) -> str:
    """engine, plus why it fell back or that it redirected: tells whether the stub's answers were accepted."""
    tag = response["engine"]
    if response.get("fallback_reason"):
        tag += f"/fallback:{response['fallback_reason']}"
    if response.get("out_of_scope"):
        tag += "/out_of_scope"
    return tag


SENDERS: dict[str, Sender] = {
    "mentor": send_mentor,
    "mentor_stream": send_mentor_stream,
    "baseline": send_baseline,
    "stub": send_stub,
}


def summarize(samples: list[Sample], *, wall_s: float, cpu_s: float) -> dict:
    """Throughput, latency percentiles (successful requests), time to first text and server CPU per request."""
    ok = [s for s in samples if s.ok]
    latencies = sorted(s.latency_s * 1000 for s in ok)
    ttfts = sorted(s.ttft_s * 1000 for s in ok if s.ttft_s is not None)
    summary = {
        "requests": len(samples),
        "errors": len(samples) - len(ok),
        "wall_s": wall_s,
        "rps": len(ok) / wall_s,
        "p50_ms": percentile(latencies, 50),
        "p95_ms": percentile(latencies, 95),
        "p99_ms": percentile(latencies, 99),
        "cpu_s_per_request": cpu_s / len(samples),
        "answered_by": dict(Counter(s.tag for s in samples)),
    }
    if ttfts:
        summary |= {"ttft_p50_ms": percentile(ttfts, 50), "ttft_p95_ms": percentile(ttfts, 95)}
    return summary


def percentile(sorted_values: list[float], p: float) -> float | None:
    """Nearest-rank percentile of an ascending list (None when empty)."""
    if not sorted_values:
        return None
    return sorted_values[max(math.ceil(p / 100 * len(sorted_values)) - 1, 0)]
