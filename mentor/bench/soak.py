"""Soak: `mentor serve` on a fresh data directory, driven for a fixed time with mostly new questions, long
(~3,900-character) turns and follow-ups, while the server's resident memory (VmRSS) is sampled.

    python -m mentor.bench.soak --duration 300 --out eval/bench/soak.json     # the 5-minute run

What to look for is a plateau: RSS may rise while the bounded stores and caches fill (the model's first
batches, the query cache, the conversation store), then stays flat. `growth_second_half_mb` is the RSS change
over the second half of the run (`fitted_growth_second_half_mb` the same by a least-squares line). Before the
embedder's freed memory went back to the OS and conversations were capped by bytes, RSS climbed ~0.4 MB a
request without levelling off (792 -> 1,133 MB in 2 minutes here; 764 -> 904 MB in the issue's 5 minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

from mentor.bench.procs import ROOT, clean_env, cpu_seconds, free_port, rss_mb, spawn, stop, tail, wait_ready
from mentor.bench.questions import QUESTIONS

log = logging.getLogger(__name__)
REQUEST_TIMEOUT_S = 120.0
FOLLOW_UPS = (
    "and what about ZeRO stage 3?",
    "and on 64 GPUs instead?",
    "why is that?",
    "and for a 70B model?",
    "what does that mean for memory?",
)
# A learner pasting their notes before asking: on-topic sentences, so the turn is answered, not refused.
NOTES = (
    "ZeRO partitions the optimizer state across data-parallel ranks, then the gradients, then the parameters.",
    "Adam keeps momentum and variance plus an fp32 master copy, about 12 bytes per parameter of state.",
    "Tensor parallelism splits each layer's matrices and needs the fast links inside one node.",
    "Pipeline parallelism splits the layers into stages and fills the bubble with micro-batches.",
    "Mixed precision keeps bf16 activations and weights while the master weights stay in fp32.",
    "Chinchilla suggests about twenty training tokens per parameter for a compute-optimal model.",
)
LONG_CHARS = 3900


@dataclass(frozen=True)
class SoakSpec:
    """How long and how hard to drive the server, and how often to sample its memory."""

    duration_s: float = 300.0
    concurrency: int = 4
    sample_every_s: float = 5.0
    long_share: float = 0.3  # of all turns, first questions and follow-ups alike
    max_follow_ups: int = 3  # per conversation, 0..max chosen at random
    seed: int = 0
    cache_entries: int | None = None  # the server's MENTOR_CACHE_ENTRIES (its default when None)


@dataclass
class Tally:
    """What the learners saw."""

    latencies_s: list[float] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    long_turns: int = 0
    follow_ups: int = 0
    conversations: int = 0


def run_soak(spec: SoakSpec, *, work: Path | None = None) -> dict:
    """Start `mentor serve` on a fresh data directory (it ingests the corpus), drive it, stop it; return results."""
    with contextlib.ExitStack() as stack:
        if work is None:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mentor-soak-")))
        port = free_port()
        env = clean_env(
            MENTOR_DATA_DIR=str(work / "data"),
            MENTOR_CORPUS_DIR=str(ROOT / "corpus"),
            MENTOR_PROMPTS_DIR=str(ROOT / "prompts"),
            MENTOR_HOST="127.0.0.1",
            MENTOR_PORT=str(port),
            MENTOR_RATE_LIMIT_PER_MINUTE="10000",
            MENTOR_RATE_LIMIT_PER_CLIENT_PER_MINUTE="10000",  # every seat asks from this one address
            MENTOR_LOG_LEVEL="warning",
        )
        if spec.cache_entries is not None:
            env["MENTOR_CACHE_ENTRIES"] = str(spec.cache_entries)
        log_path = work / "server.log"
        process = spawn([sys.executable, "-m", "mentor.cli", "serve"], env=env, log_path=log_path)
        stack.callback(stop, process)
        url = f"http://127.0.0.1:{port}"
        log.info("soak: starting mentor serve on %s (the first start ingests the corpus)", url)
        wait_ready(f"{url}/readyz", process, log_path)
        results = asyncio.run(drive(spec, url, process.pid))
        if process.poll() is not None:
            raise RuntimeError(f"server exited during the soak:\n{tail(log_path)}")
    return {"spec": asdict(spec)} | results


async def drive(spec: SoakSpec, url: str, pid: int) -> dict:
    """Run `spec.concurrency` learners until the time is up while sampling the server's RSS."""
    tally = Tally()
    samples: list[tuple[float, float]] = []
    started = time.monotonic()
    cpu_at_start = cpu_seconds(pid)
    deadline = started + spec.duration_s

    async def sample() -> None:
        while True:
            samples.append((round(time.monotonic() - started, 1), round(rss_mb(pid), 1)))
            if time.monotonic() >= deadline:
                return
            await asyncio.sleep(min(spec.sample_every_s, max(0.0, deadline - time.monotonic())))

    limits = httpx.Limits(max_connections=spec.concurrency + 1)
    async with httpx.AsyncClient(base_url=url, timeout=REQUEST_TIMEOUT_S, limits=limits) as http:
        sampler = asyncio.create_task(sample())
        await asyncio.gather(*(learner(http, spec, seat, deadline, tally) for seat in range(spec.concurrency)))
        await sampler
    return summarize(tally, samples, wall_s=time.monotonic() - started, server_cpu_s=cpu_seconds(pid) - cpu_at_start)


async def learner(http: httpx.AsyncClient, spec: SoakSpec, seat: int, deadline: float, tally: Tally) -> None:
    """One seat: a new learner per conversation, a new question, then a few follow-ups in the same conversation."""
    rng = random.Random(spec.seed * 1000 + seat)
    n = 0
    while time.monotonic() < deadline:
        learner_id = f"soak-{spec.seed}-{seat}-{n}"
        tally.conversations += 1
        conversation_id = None
        for turn in range(1 + rng.randint(0, spec.max_follow_ups)):
            if time.monotonic() >= deadline:
                return
            n += 1
            text = new_question(n, seat) if turn == 0 else follow_up(rng, n, seat)
            if rng.random() < spec.long_share:
                text = long_turn(text, n, seat)
                tally.long_turns += 1
            tally.follow_ups += turn > 0
            body = {"message": text, "learner_id": learner_id}
            if conversation_id:
                body["conversation_id"] = conversation_id
            began = time.perf_counter()
            try:
                response = await http.post("/v1/chat", json=body)
            except httpx.HTTPError as exc:
                tally.statuses[f"error:{type(exc).__name__}"] += 1
                break
            tally.latencies_s.append(time.perf_counter() - began)
            tally.statuses[str(response.status_code)] += 1
            if response.status_code != 200:
                break
            conversation_id = response.json()["conversation_id"]


def unique_tail(n: int, seat: int) -> str:
    """Makes a text new to every cache without changing its words: the request number in binary as ?s and !s."""
    return format(n * 64 + seat + 1, "b").replace("0", "?").replace("1", "!")


def new_question(n: int, seat: int) -> str:
    return QUESTIONS[(n * 7 + seat) % len(QUESTIONS)] + unique_tail(n, seat)


def follow_up(rng: random.Random, n: int, seat: int) -> str:
    return rng.choice(FOLLOW_UPS) + unique_tail(n, seat)


def long_turn(question: str, n: int, seat: int) -> str:
    """The question after ~3,900 characters of pasted notes, numbered so no two are alike."""
    notes: list[str] = []
    length = len(question) + 40
    i = n
    while length < LONG_CHARS:
        sentence = f"({i % 997}) {NOTES[i % len(NOTES)]}"
        notes.append(sentence)
        length += len(sentence) + 1
        i += 1
    return f"My notes: {' '.join(notes)} My question: {question}"[: LONG_CHARS + 90]


def summarize(tally: Tally, samples: list[tuple[float, float]], *, wall_s: float, server_cpu_s: float) -> dict:
    """Latency, answers and the RSS curve, with the growth over the second half (the plateau check)."""
    latencies = sorted(tally.latencies_s)
    half = samples[-1][0] / 2 if samples else 0.0
    second_half = [rss for t, rss in samples if t >= half]
    return {
        "wall_s": round(wall_s, 1),
        "requests": len(latencies),
        # Server CPU per answered request: steadier than latency on a shared machine.
        "server_cpu_ms_per_request": round(server_cpu_s * 1000 / len(latencies), 1) if latencies else None,
        "statuses": dict(tally.statuses),
        "conversations": tally.conversations,
        "long_turns": tally.long_turns,
        "follow_ups": tally.follow_ups,
        "latency_ms": {
            "p50": round(statistics.median(latencies) * 1000, 1) if latencies else None,
            "p99": round(latencies[int(0.99 * (len(latencies) - 1))] * 1000, 1) if latencies else None,
            "max": round(latencies[-1] * 1000, 1) if latencies else None,
        },
        "rss_mb": {
            "start": samples[0][1] if samples else None,
            "end": samples[-1][1] if samples else None,
            "peak": max((rss for _, rss in samples), default=None),
        },
        "growth_second_half_mb": round(second_half[-1] - second_half[0], 1) if second_half else None,
        "fitted_growth_second_half_mb": fitted_growth([(t, rss) for t, rss in samples if t >= half]),
        "samples": samples,
    }


def fitted_growth(samples: list[tuple[float, float]]) -> float | None:
    """RSS growth over the samples' span by a least-squares line: one sample's jitter (a few MB) barely moves it."""
    if len(samples) < 3:
        return None
    times, values = zip(*samples, strict=True)
    slope = statistics.linear_regression(times, values).slope
    return round(slope * (times[-1] - times[0]), 1)


def main() -> None:
    """`python -m mentor.bench.soak`: run one soak and print (and optionally keep) its results as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=300.0, help="seconds of load (default 300)")
    parser.add_argument("--concurrency", type=int, default=4, help="learners asking at once (default 4)")
    parser.add_argument("--sample-every", type=float, default=5.0, help="seconds between RSS samples (default 5)")
    parser.add_argument("--long-share", type=float, default=0.3, help="share of ~3,900-character turns (0.3)")
    parser.add_argument("--out", type=Path, help="also write the results here as JSON")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request would bury the progress
    spec = SoakSpec(
        duration_s=args.duration,
        concurrency=args.concurrency,
        sample_every_s=args.sample_every,
        long_share=args.long_share,
    )
    results = run_soak(spec)
    text = json.dumps(results, indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
