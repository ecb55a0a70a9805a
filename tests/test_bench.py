"""`mentor bench` machinery on a tiny configuration: real processes, real HTTP; shapes are asserted, not speeds."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from mentor.bench import render_markdown, run_bench
from mentor.bench.corpus_gen import generate_corpus
from mentor.bench.load import percentile
from mentor.bench.procs import cpu_seconds, peak_rss_mb
from mentor.corpus import chunk_corpus, load_corpus
from mentor.stub_llm import bench_reply

from .conftest import CORPUS

# The extractive server is left out to keep this test under a minute on two cores (each server start loads
# torch); `include_extractive` only adds one more server of the same kind.
CONFIGS = ("stub", "mentor_llm", "mentor_llm_stream", "mentor_llm_uncached", "baseline")


def positive(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


@pytest.mark.slow
def test_tiny_run_has_every_figure_and_writes_both_files(tmp_path: Path) -> None:
    planned: list[int] = []
    steps: list[str] = []
    results = run_bench(
        quick=True,
        concurrencies=(1,),
        requests_per_level=3,
        repetitions=1,
        ingest_modules=(1, 2),
        search_questions=4,
        include_baseline=True,
        include_extractive=False,
        out_dir=tmp_path,
        on_plan=planned.append,
        on_step=steps.append,
    )
    # The progress bar's plan matches what ran: one step per configuration and level, per corpus size, and so on.
    assert planned == [len(steps)] and len(set(steps)) == len(steps)
    assert steps[0] == "loading the embedding model" and steps[-1] == f"writing {tmp_path / 'results.json'}"
    assert sum(step.endswith("at concurrency 1") for step in steps) == len(CONFIGS)

    headline = ("throughput_ratio_vs_baseline", "throughput_ratio_vs_baseline_uncached", "overhead_p50_ms")
    for key in (*headline, "overhead_p50_ms_uncached", "overhead_p99_ms", "peak_rss_mb"):
        assert positive(results[key]), key
    assert math.isfinite(results["ttft_overhead_p50_ms"])
    assert set(results["configs"]) == set(CONFIGS)
    for name in CONFIGS:
        level = results["configs"][name]["levels"]["1"]
        assert level["requests"] == 3 and level["errors"] == 0, (name, level)
        for metric in ("rps", "p50_ms", "p95_ms", "p99_ms"):
            assert all(positive(level[metric][k]) for k in ("median", "min", "max")), (name, metric)
        # /proc counts CPU in 10 ms ticks, so three quick stub requests may honestly cost 0.
        assert 0 <= level["cpu_s_per_request"]["median"] < 10
        assert positive(results["configs"][name]["peak_rss_mb"])
    for name in ("stub", "mentor_llm_stream"):
        assert positive(results["configs"][name]["levels"]["1"]["ttft_p50_ms"]["median"])
    # The stub's answers pass mentor's grounding, so the LLM path is what was measured, not the fallback.
    for name in ("mentor_llm", "mentor_llm_stream", "mentor_llm_uncached"):
        assert results["configs"][name]["levels"]["1"]["answered_by"] == {"llm": 3}, name

    seed, generated = results["ingest"]["seed"], results["ingest"]["generated"]
    assert seed["modules"] == 1 and generated["modules"] == 2 and generated["chunks"] > seed["chunks"]
    for run in (seed, generated):
        assert run["embeddings"] == run["chunks"] and run["reingest_embeddings"] == 0
        assert all(positive(run[k]) for k in ("ingest_s", "embed_s", "embeddings_per_s", "reingest_s"))
    assert [row["modules"] for row in results["retrieval"]] == [1, 2]
    assert all(positive(row[k]) for row in results["retrieval"] for k in ("cold_p50_ms", "warm_p50_ms"))
    assert {"cpu_model", "cores", "memory_gb", "python", "date"} <= set(results["machine"])

    written = json.loads((tmp_path / "results.json").read_text())
    assert written["overhead_p50_ms"] == results["overhead_p50_ms"]
    markdown = (tmp_path / "results.md").read_text()
    assert markdown == render_markdown(results)
    assert "| mentor, LLM engine (/v1/chat) | 1 |" in markdown and "LangChain baseline" in markdown


def test_without_the_baseline_packages_the_bench_says_so_in_one_line_before_starting(tmp_path: Path) -> None:
    # As when `make serve` installed only the runtime: importing langchain_chroma raises ModuleNotFoundError.
    code = (
        "import sys; sys.modules['langchain_chroma'] = None; from mentor.cli import app; "
        "app(['bench', '--quick', '--out', sys.argv[1]], prog_name='mentor')"
    )
    out = tmp_path / "bench"
    env = {"MENTOR_DATA_DIR": str(tmp_path / "data"), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: the LangChain baseline needs langchain-chroma from the dev extra "
        "(`pip install -e '.[dev]'`); or leave the baseline out (`mentor bench --no-baseline`)"
    ]
    assert done.stdout == "" and not out.exists()  # nothing was started or written


def test_generated_modules_are_distinct_in_every_chunk(tmp_path: Path) -> None:
    modules = load_corpus(generate_corpus(CORPUS, tmp_path / "corpus", 5))
    chunks = chunk_corpus(modules)
    assert len(modules) == len({m.id for m in modules}) == 5
    assert len({c.embedding_text for c in chunks}) == len(chunks)


def test_stub_reply_quotes_the_passage_text_not_its_section_header() -> None:
    mentor_prompt = "<passages>\n[1] (section: Parallelism strategies)\nThe two walls. A large model does not fit.\n"
    reply = bench_reply({"messages": [{"role": "user", "content": mentor_prompt}]})
    assert reply.content == "A large model does not fit. [1]"
    baseline_prompt = "Context:\n[1] Data parallel splits the batch across every GPU in the group.\n\n[2] Other"
    reply = bench_reply({"messages": [{"role": "user", "content": baseline_prompt}]})
    assert reply.content == "Data parallel splits the batch across every GPU in the group. [1]"


def test_process_readers_and_percentiles() -> None:
    code = "data = bytearray(50_000_000); sum(range(3_000_000)); print('ready', flush=True); input()"
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert child.stdout.readline() == b"ready\n"
        assert cpu_seconds(child.pid) > 0 and peak_rss_mb(child.pid) > 50
    finally:
        child.communicate(b"\n", timeout=10)
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 99) == 4.0
    assert percentile([], 50) is None
