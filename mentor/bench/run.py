"""`run_bench`: one benchmark run, start to finish.

1. Index the corpus with mentor's own ingest (timed) into a temporary directory.
2. Start a stub OpenAI-compatible LLM, `mentor serve` with the LLM engine and with the extractive engine, and
   the LangChain baseline over the same Chroma data, each in its own process on 127.0.0.1.
3. At each concurrency, load the stub alone, then each server, from a separate load-generator process.
4. Stop every process (also on error), then measure ingest and retrieval against generated corpora.
5. Write results.json and results.md into the directory the caller names.

The LangChain baseline needs the dev extra (`langchain-chroma`, `langchain-openai`); without it `run_bench` stops
before anything starts, with one sentence saying what to install or to run without the baseline.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mentor.bench.load import LoadSpec, measure
from mentor.bench.procs import (
    ROOT,
    clean_env,
    free_port,
    machine_busy_seconds,
    machine_info,
    own_cpu_seconds,
    peak_rss_mb,
    python_code,
    spawn,
    stop,
    wait_ready,
)
from mentor.bench.questions import QUESTIONS
from mentor.bench.report import render_markdown
from mentor.errors import ConfigError

if TYPE_CHECKING:
    from mentor.bench.ingest import Ingested
    from mentor.embeddings import Embedder

log = logging.getLogger(__name__)

# Sized so --quick stays well under five minutes on a 2-core machine and the full run under ~15.
PRESETS = {
    True: {"requests_per_level": 64, "repetitions": 3, "ingest_modules": (1, 20)},
    False: {"requests_per_level": 192, "repetitions": 5, "ingest_modules": (1, 20, 200)},
}
# (result name, load-generator kind, server, every question new): the order each level is measured in.
PLAN = (
    ("stub", "stub", "stub", False),
    ("mentor_llm", "mentor", "mentor_llm", False),
    ("mentor_llm_stream", "mentor_stream", "mentor_llm", False),
    # The questions repeat, so mentor's query-embedding cache answers them; this run shows mentor without it.
    ("mentor_llm_uncached", "mentor", "mentor_llm", True),
    ("mentor_extractive", "mentor", "mentor_extractive", False),
    ("baseline", "baseline", "baseline", False),
)
LLM_CONFIGS = ("mentor_llm", "mentor_llm_stream", "mentor_llm_uncached")
# The baseline's own packages (module, distribution): the dev extra, not installed by `make serve`.
BASELINE_PACKAGES = (("langchain_chroma", "langchain-chroma"), ("langchain_openai", "langchain-openai"))


@dataclass(frozen=True)
class Server:
    """A server process under test and the base URL its clients use."""

    name: str
    process: subprocess.Popen
    url: str


def run_bench(
    *,
    quick: bool,
    out_dir: Path,
    concurrencies: Sequence[int] = (1, 8, 32),
    requests_per_level: int | None = None,
    repetitions: int | None = None,
    warmup: int | None = None,
    ingest_modules: Sequence[int] | None = None,
    include_baseline: bool = True,
    include_extractive: bool = True,
    stub_token_delay_s: float = 0.0,
    stub_tool_call: bool = False,
    search_questions: int | None = None,
    corpus_dir: Path | None = None,
    on_plan: Callable[[int], None] | None = None,
    on_step: Callable[[str], None] | None = None,
) -> dict:
    """Measure mentor against the stub LLM and the LangChain baseline; write results.json and results.md.

    `requests_per_level`, `repetitions` and `ingest_modules` default to the quick or full preset; `warmup`
    (unmeasured requests before each measured run) defaults to max(2 x concurrency, one pass over the
    questions capped at requests_per_level), and to 2 x concurrency when every question is new.
    `ingest_modules` are corpus sizes: 1 is the seed corpus, larger sizes add generated variants of it.
    `search_questions` limits how many questions are timed against each corpus size in the retrieval
    measurement (default: all). `on_plan(steps)` is called once with the number of steps, then `on_step(what)`
    as each one starts (progress for a terminal; the same lines are logged at INFO).
    """
    if include_baseline:
        require_baseline_packages()
    preset = PRESETS[quick]
    requests = requests_per_level or preset["requests_per_level"]
    reps = repetitions or preset["repetitions"]
    sizes = sorted(set(ingest_modules or preset["ingest_modules"]) | {1})
    corpus_dir = (corpus_dir or ROOT / "corpus").resolve()
    params = {
        "quick": quick,
        "concurrencies": list(concurrencies),
        "requests_per_level": requests,
        "repetitions": reps,
        "warmup": {str(c): warmup_for(c, warmup, requests) for c in concurrencies},
        "ingest_modules": sizes,
        "stub_token_delay_s": stub_token_delay_s,
        "stub_tool_call": stub_tool_call,
        "questions": len(QUESTIONS),
        "search_questions": search_questions or len(QUESTIONS),
    }
    machine = machine_info()
    configs_per_level = sum(
        1
        for _name, _kind, server, _distinct in PLAN
        if (server != "mentor_extractive" or include_extractive) and (server != "baseline" or include_baseline)
    )
    # model, seed index, servers; each configuration at each level; each corpus size; the results files
    if on_plan is not None:
        on_plan(3 + configs_per_level * len(concurrencies) + len(sizes) + 1)

    def step(what: str) -> None:
        log.info("bench: %s", what)
        if on_step is not None:
            on_step(what)

    started, busy_before, own_before = time.perf_counter(), machine_busy_seconds(), own_cpu_seconds()
    with tempfile.TemporaryDirectory(prefix="mentor-bench-") as tmp:
        work = Path(tmp)
        from mentor.bench.ingest import bench_settings, ingest
        from mentor.embeddings import SentenceTransformerEmbedder

        step("loading the embedding model")
        embedder = SentenceTransformerEmbedder()
        model_started = time.perf_counter()
        embedder.embed_query("warm up")
        model_load_s = time.perf_counter() - model_started
        step("indexing the seed corpus")
        seed = ingest(bench_settings(data_dir=work / "seed", corpus_dir=corpus_dir), embedder)
        with contextlib.ExitStack() as stack:  # every process started below is stopped, whatever happens
            step("starting the servers")
            servers = start_servers(
                stack,
                work,
                corpus_dir=corpus_dir,
                seed_chroma=seed.settings.chroma_path,
                collection=seed.settings.collection,
                include_baseline=include_baseline,
                include_extractive=include_extractive,
                stub_token_delay_s=stub_token_delay_s,
                stub_tool_call=stub_tool_call,
            )
            configs = measure_servers(
                servers, concurrencies, requests=requests, repetitions=reps, warmup=warmup, step=step
            )
            peak_rss = {name: peak_rss_mb(s.process.pid) for name, s in servers.items()}
        databases = {"mentor_llm": work / "mentor_llm" / "mentor.db", "baseline": work / "baseline.db"}
        rows_written = {name: count_rows(path) for name, path in databases.items() if path.exists()}
        questions = QUESTIONS[: search_questions or len(QUESTIONS)]
        ingest_runs, retrieval = measure_ingest(
            work, seed, sizes, corpus_dir, embedder, questions, passes=reps, step=step
        )
    duration_s = time.perf_counter() - started
    # CPU the machine spent on anything but this run: other people's work makes every figure noisier.
    other_cpu_s = machine_busy_seconds() - busy_before - (own_cpu_seconds() - own_before)
    machine["other_cpu_share"] = max(other_cpu_s, 0.0) / (duration_s * (machine["cores"] or 1))
    results = assemble(
        machine=machine,
        params=params,
        configs=configs,
        peak_rss=peak_rss,
        rows_written=rows_written,
        ingest_runs=ingest_runs,
        retrieval=retrieval,
        model_load_s=model_load_s,
        stub_calls=2 if stub_tool_call else 1,
    )
    results["duration_s"] = duration_s
    step(f"writing {out_dir / 'results.json'}")
    write_results(results, out_dir)
    return results


def require_baseline_packages() -> None:
    """Raise ConfigError, in one sentence, when the LangChain baseline's packages are not installed."""
    import importlib

    missing = []
    for module, distribution in BASELINE_PACKAGES:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(distribution)
    if missing:
        raise ConfigError(
            f"the LangChain baseline needs {' and '.join(missing)} from the dev extra "
            "(`pip install -e '.[dev]'`); or leave the baseline out (`mentor bench --no-baseline`)"
        )


def warmup_for(concurrency: int, warmup: int | None, requests: int, *, distinct: bool = False) -> int:
    """Unmeasured requests first: one pass over the questions fills mentor's caches, as in steady state."""
    if warmup is not None:
        return warmup
    if distinct:  # nothing to fill: new questions are never cached; just open the connections
        return 2 * concurrency
    return max(2 * concurrency, min(len(QUESTIONS), requests))


def start_servers(
    stack: contextlib.ExitStack,
    work: Path,
    *,
    corpus_dir: Path,
    seed_chroma: Path,
    collection: str,
    include_baseline: bool,
    include_extractive: bool,
    stub_token_delay_s: float,
    stub_tool_call: bool,
) -> dict[str, Server]:
    """Start all servers at once (their start-up overlaps), register their shutdown, wait until each is ready."""
    servers: dict[str, Server] = {}
    ready_paths: dict[str, str] = {}

    def launch(name: str, port: int, argv: list[str], env: dict[str, str], ready_path: str) -> None:
        process = spawn(argv, env=env, log_path=work / "logs" / f"{name}.log")
        stack.callback(stop, process)
        servers[name] = Server(name, process, f"http://127.0.0.1:{port}")
        ready_paths[name] = ready_path

    port = free_port()
    stub_code = (
        "from mentor.stub_llm import serve_stub; "
        f"serve_stub('127.0.0.1', {port}, token_delay_s={stub_token_delay_s!r}, tool_call={stub_tool_call!r})"
    )
    launch("stub", port, python_code(stub_code), clean_env(), "/v1/models")
    stub_v1 = f"{servers['stub'].url}/v1"
    engines = {"mentor_llm": {"MENTOR_LLM_BASE_URL": stub_v1, "MENTOR_LLM_MODEL": "stub"}}
    if include_extractive:
        engines["mentor_extractive"] = {}
    for name, llm_env in engines.items():
        port = free_port()
        env = clean_env(
            MENTOR_DATA_DIR=str(work / name),
            MENTOR_CORPUS_DIR=str(corpus_dir),
            MENTOR_PROMPTS_DIR=str(ROOT / "prompts"),
            MENTOR_HOST="127.0.0.1",
            MENTOR_PORT=str(port),
            MENTOR_RATE_LIMIT_PER_MINUTE="10000",
            # Access logs off for both mentor and the baseline: the terminal is not what is measured.
            MENTOR_LOG_LEVEL="warning",
            **llm_env,
        )
        launch(name, port, [sys.executable, "-m", "mentor.cli", "serve"], env, "/readyz")
    if include_baseline:
        port = free_port()
        argv = python_code("from mentor.bench.baseline import main; main()") + [
            f"--chroma-path={seed_chroma}",
            f"--collection={collection}",
            f"--llm-base-url={stub_v1}",
            f"--database={work / 'baseline.db'}",
            f"--port={port}",
        ]
        launch("baseline", port, argv, clean_env(), "/healthz")
    log.info("bench: waiting for %s", ", ".join(servers))
    for name, path in ready_paths.items():
        wait_ready(servers[name].url + path, servers[name].process, work / "logs" / f"{name}.log")
    return servers


def measure_servers(
    servers: dict[str, Server],
    concurrencies: Sequence[int],
    *,
    requests: int,
    repetitions: int,
    warmup: int | None,
    step: Callable[[str], None],
) -> dict[str, dict]:
    """Every configuration at every concurrency; levels outermost so slow drift affects all alike."""
    configs: dict[str, dict] = {}
    distinct_sent = 0  # distinct questions never repeat across runs, or the cache would answer them
    for concurrency in concurrencies:
        for name, kind, server_name, distinct in PLAN:
            server = servers.get(server_name)
            if server is None:
                continue
            step(f"{name} at concurrency {concurrency}")
            spec = LoadSpec(
                kind=kind,
                base_url=server.url + ("/v1" if kind == "stub" else ""),
                pid=server.process.pid,
                concurrency=concurrency,
                requests=requests,
                repetitions=repetitions,
                warmup=warmup_for(concurrency, warmup, requests, distinct=distinct),
                distinct_questions=distinct,
                first_index=distinct_sent,
            )
            if distinct:
                distinct_sent += spec.warmup + spec.requests * spec.repetitions
            configs.setdefault(name, {"levels": {}})["levels"][str(concurrency)] = aggregate(measure(spec))
    return configs


def aggregate(summaries: list[dict]) -> dict:
    """Median, min and max of each metric over the repetitions; counts are summed."""
    result: dict = {
        "repetitions": len(summaries),
        "requests": sum(s["requests"] for s in summaries),
        "errors": sum(s["errors"] for s in summaries),
        "answered_by": dict(sum((Counter(s["answered_by"]) for s in summaries), Counter())),
    }
    for key in ("rps", "p50_ms", "p95_ms", "p99_ms", "ttft_p50_ms", "ttft_p95_ms", "cpu_s_per_request"):
        values = [s[key] for s in summaries if s.get(key) is not None]
        if values:
            result[key] = {"median": statistics.median(values), "min": min(values), "max": max(values)}
    return result


def count_rows(database: Path) -> int:
    """Rows in every table of a SQLite file: did the server record its questions?"""
    with contextlib.closing(sqlite3.connect(database)) as db:
        tables = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return sum(db.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()[0] for table in tables)


def measure_ingest(
    work: Path,
    seed: Ingested,
    sizes: Sequence[int],
    corpus_dir: Path,
    embedder: Embedder,
    questions: Sequence[str],
    *,
    passes: int,
    step: Callable[[str], None],
) -> tuple[list[dict], list[dict]]:
    """Ingest figures for each corpus size, and `Retriever.search` latency for the seed module in each."""
    from mentor.bench.corpus_gen import generate_corpus
    from mentor.bench.ingest import bench_settings, ingest, retrieval_latency
    from mentor.corpus import load_corpus
    from mentor.embeddings import SentenceTransformerEmbedder

    module_id = load_corpus(corpus_dir)[0].id
    uncached = SentenceTransformerEmbedder(query_cache_size=0)  # every query pays its forward pass
    uncached.embed_query("warm up")
    ingest_runs, retrieval = [], []
    for size in sizes:
        if size == 1:
            step("retrieval over the seed corpus")
            index = seed
        else:
            step(f"ingest and retrieval over a generated corpus of {size} modules")
            generated = generate_corpus(corpus_dir, work / f"corpus-{size}", size)
            index = ingest(bench_settings(data_dir=work / f"data-{size}", corpus_dir=generated), embedder)
        ingest_runs.append(index.figures)
        retrieval.append(
            retrieval_latency(index, module_id, questions, cached=embedder, uncached=uncached, passes=passes)
        )
    return ingest_runs, retrieval


def assemble(
    *,
    machine: dict,
    params: dict,
    configs: dict,
    peak_rss: dict,
    rows_written: dict,
    ingest_runs: list[dict],
    retrieval: list[dict],
    model_load_s: float,
    stub_calls: int,
) -> dict:
    """The result document: headline figures first, then every measurement behind them."""
    low, high = str(min(params["concurrencies"])), str(max(params["concurrencies"]))

    def median(config: str, level: str, key: str) -> float | None:
        metric = configs.get(config, {}).get("levels", {}).get(level, {}).get(key)
        return None if metric is None else metric["median"]

    for name, config in configs.items():
        server = "mentor_llm" if name in LLM_CONFIGS else name
        config["peak_rss_mb"] = peak_rss.get(server)
        if name in (*LLM_CONFIGS, "baseline"):
            calls = stub_calls if name.startswith("mentor") else 1
            config["overhead_ms"] = {
                level: {
                    q: median(name, level, f"{q}_ms") - calls * median("stub", level, f"{q}_ms")
                    for q in ("p50", "p95", "p99")
                }
                for level in config["levels"]
            }

    def ratio(config: str) -> float | None:
        mentor, baseline = median(config, high, "rps"), median("baseline", high, "rps")
        return mentor / baseline if mentor and baseline else None

    ttft = median("mentor_llm_stream", low, "ttft_p50_ms")
    stub_ttft = median("stub", low, "ttft_p50_ms")
    largest = ingest_runs[-1]
    errors = {name: sum(level["errors"] for level in c["levels"].values()) for name, c in configs.items()}
    results = {
        "throughput_ratio_vs_baseline": ratio("mentor_llm"),
        "throughput_ratio_vs_baseline_uncached": ratio("mentor_llm_uncached"),
        "throughput_concurrency": int(high),
        "overhead_p50_ms": configs["mentor_llm"]["overhead_ms"][low]["p50"],
        "overhead_p99_ms": configs["mentor_llm"]["overhead_ms"][low]["p99"],
        "overhead_p50_ms_uncached": configs["mentor_llm_uncached"]["overhead_ms"][low]["p50"],
        "overhead_concurrency": int(low),
        "ttft_overhead_p50_ms": ttft - stub_ttft if ttft is not None and stub_ttft is not None else None,
        "peak_rss_mb": peak_rss["mentor_llm"],
        "ingest": {
            "seed": ingest_runs[0],
            "generated": largest if largest["modules"] > 1 else None,
            "by_size": ingest_runs,
            "embedding_model_load_s": model_load_s,
        },
        "retrieval": retrieval,
        "configs": configs,
        "rows_written": rows_written,
        "errors": errors,
        "machine": machine,
        "params": params,
    }
    results["notes"] = notes(results, stub_calls)
    return results


def notes(results: dict, stub_calls: int) -> list[str]:
    """What a reader needs to interpret the numbers honestly."""
    params = results["params"]
    found = [
        f"Medians of {params['repetitions']} repetitions of {params['requests_per_level']} requests per level "
        "(min-max in brackets); warm-up requests are excluded from latency and CPU.",
        f"Overhead = latency - stub latency x {stub_calls} LLM call(s) per question, at the same concurrency.",
        "The stub LLM is mentor.stub_llm.serve_stub, whose reply quotes a sentence of passage [1] verbatim, so "
        "mentor's grounding check accepts it and the LLM path (not the extractive fallback) is what is measured.",
        f"The stub, the load generator and the server under test share this machine's "
        f"{results['machine']['cores']} cores.",
        f"The {params['questions']} questions repeat, so after warm-up mentor's query-embedding cache answers every "
        "question; the baseline embeds each one. In 'every question new' each text gets a unique tail of '?' and '!', "
        "so no cache answers it.",
        "At concurrency above 1, overhead includes queueing in the server (the stub alone queues far less).",
    ]
    rows = results["rows_written"]
    if rows:
        found.append(
            "Database rows written during the run (warm-up included): "
            + ", ".join(f"{name} {count}" for name, count in rows.items())
            + " (the baseline writes one row per question)."
        )
    for name in LLM_CONFIGS:
        answered = Counter()
        for level in results["configs"].get(name, {}).get("levels", {}).values():
            answered.update(level["answered_by"])
        if set(answered) - {"llm"}:
            found.append(f"Not every {name} answer came from the LLM engine as intended: {dict(answered)}.")
    if params["quick"] and max(params["ingest_modules"]) < 200:
        found.append(f"Quick mode: the 200-module ingest is replaced by {max(params['ingest_modules'])} modules.")
    if results["machine"]["other_cpu_share"] > 0.05:
        found.append(
            f"Other processes used {results['machine']['other_cpu_share']:.0%} of the machine's CPU during the run: "
            "expect noisier, slower figures than on a quiet machine."
        )
    if any(results["errors"].values()):
        found.append(f"Requests failed: {results['errors']}.")
    return found


def write_results(results: dict, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    (out_dir / "results.md").write_text(render_markdown(results), encoding="utf-8")
    log.info("bench: wrote %s and %s", out_dir / "results.json", out_dir / "results.md")
