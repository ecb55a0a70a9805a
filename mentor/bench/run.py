"""`run_bench`: one benchmark run, start to finish.

1. Index the corpus with mentor's own ingest (timed) into a temporary directory.
2. Start a stub OpenAI-compatible LLM, `mentor serve` with the LLM engine and with the extractive engine, and
   the LangChain baseline over the same Chroma data, each in its own process on 127.0.0.1.
3. At each concurrency, load the stub alone, then each server under each workload (repeated, every question new,
   the realistic mix: `mentor.bench.questions`), from a separate load-generator process. mentor and the baseline
   get the same question texts in the same order.
4. Stop the mentor servers; on the quieter machine, time the first answer of a freshly started `mentor serve`,
   `mentor --help` and a cold `mentor ask`, and the stages of one new question for each embedding backend.
5. Stop every process (also on error), then measure ingest and retrieval against generated corpora.
6. Write results.json and results.md into the directory the caller names.

The LangChain baseline needs the dev extra (`langchain-chroma`, `langchain-openai`); without it `run_bench` stops
before anything starts, with one sentence saying what to install or to run without the baseline.
"""

from __future__ import annotations

import contextlib
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

from mentor.bench.cold import cli_times, first_answers
from mentor.bench.load import LoadSpec, measure
from mentor.bench.plan import PLAN, PRESETS, STAGE_BACKENDS
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
from mentor.bench.questions import (
    MIX_REPEAT_SHARE,
    MIX_ZIPF_S,
    QUESTIONS,
    NewQuestions,
    new_capacity,
    repeat_share,
)
from mentor.bench.stages import STAGE_WARMUP, StageSpec, stage_breakdown
from mentor.bench.summary import assemble, write_results
from mentor.errors import ConfigError

if TYPE_CHECKING:
    from mentor.bench.ingest import Ingested
    from mentor.embeddings import Embedder

log = logging.getLogger(__name__)

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
    backend: str | None = None,
    stage_backends: Sequence[str] = STAGE_BACKENDS,
    stage_questions: int | None = None,
    first_answer_runs: int | None = None,
    ask_runs: int | None = None,
    on_plan: Callable[[int], None] | None = None,
    on_step: Callable[[str], None] | None = None,
) -> dict:
    """Measure mentor against the stub LLM and the LangChain baseline; write results.json and results.md.

    `requests_per_level`, `repetitions`, `ingest_modules`, `stage_questions`, `first_answer_runs` and `ask_runs`
    default to the quick or full preset; `warmup` (unmeasured requests before each measured run) defaults to
    max(2 x concurrency, one pass over the questions capped at requests_per_level) for repeated questions, and
    to 2 x concurrency when questions are new. `ingest_modules` are corpus sizes: 1 is the seed corpus, larger
    sizes add generated variants of it. `search_questions` is how many new questions are timed against each
    corpus size in the retrieval measurement (default 40). `backend` is the embedding backend of the servers and
    of the ingest (default: mentor's default); `stage_backends` are those the per-stage breakdown runs (each in
    its own process; empty: none). `on_plan(steps)` is called once with the number of steps, then
    `on_step(what)` as each one starts (progress for a terminal; the same lines are logged at INFO).
    """
    if include_baseline:
        require_baseline_packages()
    preset = PRESETS[quick]
    requests = requests_per_level or preset["requests_per_level"]
    reps = repetitions or preset["repetitions"]
    sizes = sorted(set(ingest_modules or preset["ingest_modules"]) | {1})
    corpus_dir = (corpus_dir or ROOT / "corpus").resolve()
    from mentor.bench.ingest import bench_settings

    backend = backend or bench_settings(data_dir=Path(), corpus_dir=corpus_dir).embedding_backend
    params = {
        "quick": quick,
        "concurrencies": list(concurrencies),
        "requests_per_level": requests,
        "repetitions": reps,
        "warmup": {
            workload: {str(c): warmup_for(c, warmup, requests, workload=workload) for c in concurrencies}
            for workload in ("repeat", "new")
        },
        "ingest_modules": sizes,
        "stub_token_delay_s": stub_token_delay_s,
        "stub_tool_call": stub_tool_call,
        "questions": len(QUESTIONS),
        "new_questions": new_capacity(),
        "mix": {"repeat_share": MIX_REPEAT_SHARE, "zipf_s": MIX_ZIPF_S, "popular_questions": len(QUESTIONS)},
        "search_questions": search_questions or len(QUESTIONS),
        "embedding_backend": backend,
        "stage_backends": list(stage_backends),
        "stage_questions": stage_questions or preset["stage_questions"],
        "first_answer_runs": first_answer_runs or preset["first_answer_runs"],
        "ask_runs": ask_runs or preset["ask_runs"],
    }
    machine = machine_info()
    configs_per_level = sum(
        1
        for _name, _kind, server, _workload in PLAN
        if (server != "mentor_extractive" or include_extractive) and (server != "baseline" or include_baseline)
    )
    # model, seed index, servers; each configuration at each level; first answer, CLI; each stage backend;
    # each corpus size; the results files
    if on_plan is not None:
        on_plan(3 + configs_per_level * len(concurrencies) + 2 + len(stage_backends) + len(sizes) + 1)

    def step(what: str) -> None:
        log.info("bench: %s", what)
        if on_step is not None:
            on_step(what)

    new = NewQuestions()
    started, busy_before, own_before = time.perf_counter(), machine_busy_seconds(), own_cpu_seconds()
    with tempfile.TemporaryDirectory(prefix="mentor-bench-") as tmp:
        work = Path(tmp)
        from mentor.bench.ingest import ingest
        from mentor.embeddings import make_embedder

        step("loading the embedding model")
        seed_settings = bench_settings(data_dir=work / "seed", corpus_dir=corpus_dir, backend=backend)
        embedder = make_embedder(seed_settings)
        model_started = time.perf_counter()
        embedder.embed_query("warm up")
        model_load_s = time.perf_counter() - model_started
        step("indexing the seed corpus")
        seed = ingest(seed_settings, embedder)
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
                backend=backend,
            )
            configs = measure_servers(
                servers, concurrencies, requests=requests, repetitions=reps, warmup=warmup, new=new, step=step
            )
            peak_rss = {name: peak_rss_mb(s.process.pid) for name, s in servers.items()}
            # The rest is timed on a quieter machine: only the idle stub and baseline stay up.
            for name in ("mentor_llm", "mentor_extractive"):
                if name in servers:
                    stop(servers[name].process)
            stub_v1 = f"{servers['stub'].url}/v1"
            cold = measure_cold(
                work,
                corpus_dir=corpus_dir,
                stub_v1=stub_v1,
                backend=backend,
                new=new,
                first_runs=params["first_answer_runs"],
                ask_runs=params["ask_runs"],
                step=step,
            )
            stages = {}
            for stage_backend in stage_backends:
                step(f"stages of a new question, {stage_backend} backend")
                count = params["stage_questions"] + STAGE_WARMUP
                stages[stage_backend] = stage_breakdown(
                    StageSpec(
                        backend=stage_backend,
                        corpus_dir=str(corpus_dir),
                        llm_base_url=stub_v1,
                        staged=new.texts(count),
                        end_to_end=new.texts(count),
                    )
                )
        databases = {"mentor_llm": work / "mentor_llm" / "mentor.db", "baseline": work / "baseline.db"}
        rows_written = {name: count_rows(path) for name, path in databases.items() if path.exists()}
        ingest_runs, retrieval = measure_ingest(
            work,
            seed,
            sizes,
            corpus_dir,
            embedder,
            new.texts(params["search_questions"]),
            passes=reps,
            step=step,
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
        cold=cold,
        stages=stages,
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


def warmup_for(concurrency: int, warmup: int | None, requests: int, *, workload: str = "repeat") -> int:
    """Unmeasured requests first: one pass over the questions fills mentor's caches, as in steady state."""
    if warmup is not None:
        return warmup
    if workload != "repeat":  # new questions fill nothing, and the mix's popular ones are hot already: just connect
        return 2 * concurrency
    return max(2 * concurrency, min(len(QUESTIONS), requests))


def mentor_env(work: Path, name: str, *, corpus_dir: Path, port: int, llm_env: dict[str, str], backend: str) -> dict:
    """The environment of a `mentor` process under test: its own data directory, mentor's defaults otherwise."""
    return clean_env(
        MENTOR_DATA_DIR=str(work / name),
        MENTOR_CORPUS_DIR=str(corpus_dir),
        MENTOR_PROMPTS_DIR=str(ROOT / "prompts"),
        MENTOR_HOST="127.0.0.1",
        MENTOR_PORT=str(port),
        MENTOR_RATE_LIMIT_PER_MINUTE="10000",
        MENTOR_RATE_LIMIT_PER_CLIENT_PER_MINUTE="10000",  # the load comes from this one address
        # Access logs off for both mentor and the baseline: the terminal is not what is measured.
        MENTOR_LOG_LEVEL="warning",
        MENTOR_EMBEDDING_BACKEND=backend,
        **llm_env,
    )


def stub_env(stub_v1: str) -> dict[str, str]:
    """mentor's LLM engine pointed at the stub."""
    return {"MENTOR_LLM_BASE_URL": stub_v1, "MENTOR_LLM_MODEL": "stub"}


SERVE_ARGV = (sys.executable, "-m", "mentor.cli", "serve")


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
    backend: str,
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
    engines = {"mentor_llm": stub_env(stub_v1)}
    if include_extractive:
        engines["mentor_extractive"] = {}
    for name, llm_env in engines.items():
        port = free_port()
        env = mentor_env(work, name, corpus_dir=corpus_dir, port=port, llm_env=llm_env, backend=backend)
        launch(name, port, list(SERVE_ARGV), env, "/readyz")
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
    new: NewQuestions,
    step: Callable[[str], None],
) -> dict[str, dict]:
    """Every configuration at every concurrency; levels outermost so slow drift affects all alike.

    New questions are never sent twice to one server (a cache would answer them): each level's "new" and "mix"
    runs take fresh ranges from `new`, and the baseline's run of a workload gets the very texts mentor's got.
    """
    configs: dict[str, dict] = {}
    for concurrency in concurrencies:
        first_new: dict[str, int] = {}  # workload -> first new question of this level, shared by both servers
        for name, kind, server_name, workload in PLAN:
            server = servers.get(server_name)
            if server is None:
                continue
            step(f"{name} at concurrency {concurrency}")
            spec_warmup = warmup_for(concurrency, warmup, requests, workload=workload)
            if workload != "repeat" and workload not in first_new:
                first_new[workload] = new.take(spec_warmup + requests * repetitions)
            spec = LoadSpec(
                kind=kind,
                base_url=server.url + ("/v1" if kind == "stub" else ""),
                pid=server.process.pid,
                concurrency=concurrency,
                requests=requests,
                repetitions=repetitions,
                warmup=spec_warmup,
                workload=workload,
                first_index=first_new.get(workload, 0),
            )
            level = aggregate(measure(spec))
            level["workload"] = workload
            if workload != "repeat":
                level["first_new"] = spec.first_index
            if workload == "mix":  # the share of measured requests (warm-up excluded) that asked a popular question
                level["repeat_share"] = repeat_share(spec_warmup, requests * repetitions)
            configs.setdefault(name, {"levels": {}})["levels"][str(concurrency)] = level
    return configs


def measure_cold(
    work: Path,
    *,
    corpus_dir: Path,
    stub_v1: str,
    backend: str,
    new: NewQuestions,
    first_runs: int,
    ask_runs: int,
    step: Callable[[str], None],
) -> dict:
    """The first answers of a restarted `mentor serve` and the CLI's wall times, on the LLM server's data directory
    (ingested, its server stopped), with new questions."""
    step("first answer of a freshly started mentor serve")
    port = free_port()
    env = mentor_env(work, "mentor_llm", corpus_dir=corpus_dir, port=port, llm_env=stub_env(stub_v1), backend=backend)
    first = first_answers(
        SERVE_ARGV,
        env=env,
        url=f"http://127.0.0.1:{port}",
        questions=new.texts(2 * first_runs),
        runs=first_runs,
        log_dir=work / "logs",
    )
    step("mentor --help and a cold mentor ask")
    cli = cli_times(env=env, questions=new.texts(ask_runs))
    return {"first_answer": first, "cli": cli}


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
    """Ingest figures for each corpus size, and `Retriever.search` latency for the seed module in each, over new
    questions (the same ones for every size)."""
    from mentor.bench.corpus_gen import generate_corpus
    from mentor.bench.ingest import bench_settings, ingest, retrieval_latency
    from mentor.corpus import load_corpus
    from mentor.embeddings import make_embedder

    module_id = load_corpus(corpus_dir)[0].id
    uncached = make_embedder(seed.settings, query_cache_size=0)  # every query pays its forward pass
    uncached.embed_query("warm up")
    ingest_runs, retrieval = [], []
    for size in sizes:
        if size == 1:
            step("retrieval over the seed corpus")
            index = seed
        else:
            step(f"ingest and retrieval over a generated corpus of {size} modules")
            generated = generate_corpus(corpus_dir, work / f"corpus-{size}", size)
            settings = bench_settings(
                data_dir=work / f"data-{size}", corpus_dir=generated, backend=seed.settings.embedding_backend
            )
            index = ingest(settings, embedder)
        ingest_runs.append(index.figures)
        retrieval.append(
            retrieval_latency(index, module_id, questions, cached=embedder, uncached=uncached, passes=passes)
        )
    return ingest_runs, retrieval
