"""What replicas buy on this machine: throughput of 1, 2 and 3 replicas on new questions, one replica's RSS, the
cost of the shared state's Redis round-trips per question, and how long a re-ingested module takes to reach
every replica. `python -m mentor.bench.replicas [--requests N] [--out FILE]`.

The replicas run at once (the topology of mentor.bench.cluster); the 1- and 2-replica figures drive only the
first one or two, so the three figures come from one run, side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

from mentor.bench.cluster import Cluster, Replica
from mentor.bench.load import percentile
from mentor.bench.procs import machine_info, rss_mb
from mentor.bench.questions import QUESTIONS

CONCURRENCY = 32


async def drive(replicas: list[Replica], requests: int, first_index: int) -> dict:
    """`requests` new questions at concurrency 32, round-robin over `replicas`; requests/s and latency."""
    targets = itertools.cycle(replicas)
    indices = iter(range(first_index, first_index + requests))
    latencies: list[float] = []
    failures = 0
    limits = httpx.Limits(max_connections=CONCURRENCY * len(replicas))
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:

        async def seat(n: int) -> None:
            nonlocal failures
            for index in indices:
                replica = next(targets)
                text = QUESTIONS[index % len(QUESTIONS)] + f" (case {index})"  # new to every cache
                began = time.perf_counter()
                response = await client.post(
                    f"{replica.url}/v1/chat", json={"message": text, "learner_id": f"bench-{n}-{index}"}
                )
                if response.status_code == 200:
                    latencies.append(time.perf_counter() - began)
                else:
                    failures += 1

        started = time.perf_counter()
        await asyncio.gather(*(seat(n) for n in range(CONCURRENCY)))
        wall = time.perf_counter() - started
    latencies.sort()
    return {
        "replicas": len(replicas),
        "requests": requests,
        "failures": failures,
        "requests_per_s": round(len(latencies) / wall, 1),
        "p50_ms": round(percentile(latencies, 50) * 1000, 1),
        "p99_ms": round(percentile(latencies, 99) * 1000, 1),
    }


async def state_round_trips(redis_url: str, questions: int = 2000) -> dict:
    """Per question, the learner-state calls a question makes (rate limit, open, append, remember the asker), on
    Redis and in memory, measured in this process: the added latency is the difference."""
    from mentor.answer import Turn
    from mentor.conversations import MemoryConversationStore
    from mentor.redis_state import RedisConversationStore, connect_redis, redis_limiter
    from mentor.throttle import ASK, Limit, memory_limiter

    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    clients = connect_redis(redis_url)
    limits = {ASK: Limit(10**6, "questions")}
    kinds = {
        "memory": (MemoryConversationStore(ttl_s=3600, max_conversations=100_000), memory_limiter(limits)),
        "redis": (
            RedisConversationStore(clients, prefix=prefix, ttl_s=3600),
            redis_limiter(clients, prefix=prefix, limits=limits),
        ),
    }
    turn = Turn("what does ZeRO stage 2 shard? " * 3, "Stage 2 shards the gradients and optimizer states [1]. " * 6)
    result = {}
    for name, (store, limiter) in kinds.items():
        times = []
        current: dict[str, str] = {}  # each learner's conversation: every third question starts a new one
        for n in range(questions):
            learner = f"learner-{n % 50}"
            began = time.perf_counter()
            await limiter.hit(ASK, learner)
            conversation = await store.open(current.get(learner) if n % 3 else None, learner_key=learner, module_id="m")
            await store.append(conversation, turn)
            await store.remember_asker(uuid.uuid4().hex, learner)
            times.append(time.perf_counter() - began)
            current[learner] = conversation.id
        times.sort()
        result[name] = {f"p{q}_ms": round(percentile(times, q) * 1000, 3) for q in (50, 99)}
    await clients.aclose()
    result["added_p50_ms"] = round(result["redis"]["p50_ms"] - result["memory"]["p50_ms"], 3)
    result["added_p99_ms"] = round(result["redis"]["p99_ms"] - result["memory"]["p99_ms"], 3)
    return result


def propagation(cluster: Cluster) -> dict:
    """Seconds from the end of `mentor ingest` of a changed module until every replica serves the new text."""
    module = next(Path(cluster.env["MENTOR_CORPUS_DIR"]).glob("*.md"))
    marker = f"zebraquartz{uuid.uuid4().hex[:6]}"
    anchor = "Loss falls as a power law"
    module.write_text(module.read_text().replace(anchor, f"The {marker} rule. {anchor}", 1))
    began = time.perf_counter()
    cluster.job("ingest")
    ingest_s = time.perf_counter() - began
    published = time.monotonic()
    seen: dict[int, float] = {}
    while len(seen) < len(cluster.replicas) and time.monotonic() - published < 30:
        for n, replica in enumerate(cluster.replicas):
            if n in seen:
                continue
            found = httpx.get(f"{replica.url}/v1/search", params={"q": marker, "k": 1}, timeout=10).json()
            if marker in found["passages"][0]["text"]:
                seen[n] = time.monotonic() - published
        time.sleep(0.05)
    return {
        "ingest_job_s": round(ingest_s, 2),
        "delay_s": [round(d, 2) for d in seen.values()],
        "max_delay_s": round(max(seen.values()), 2) if seen else None,
        "reload_interval_s": float(cluster.env["MENTOR_RELOAD_INTERVAL_S"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300, help="new questions per measured configuration")
    parser.add_argument("--out", type=Path, default=None, help="write the JSON result here too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mentor-replicas-") as root:
        unlimited = {"MENTOR_RATE_LIMIT_PER_MINUTE": "10000", "MENTOR_RATE_LIMIT_PER_CLIENT_PER_MINUTE": "10000"}
        cluster = Cluster.start(Path(root), replicas=3, extra_env=unlimited)
        try:
            asyncio.run(drive(cluster.replicas, 64, first_index=10**6))  # warm every replica
            throughput = [
                asyncio.run(drive(cluster.replicas[:n], args.requests, first_index=n * 10**5)) for n in (1, 2, 3)
            ]
            rss = [round(rss_mb(r.process.pid), 1) for r in cluster.replicas if r.process is not None]
            result = {
                "machine": machine_info(),
                "throughput_new_questions_concurrency_32": throughput,
                "replica_rss_mb": rss,
                "state_round_trips_per_question": asyncio.run(state_round_trips(cluster.env["MENTOR_REDIS_URL"])),
                "change_propagation": propagation(cluster),
            }
        finally:
            cluster.close()
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()
