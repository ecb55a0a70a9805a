"""`mentor bench` machinery on a tiny configuration: real processes, real HTTP; shapes are asserted, not speeds."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from mentor.bench import render_markdown, run_bench
from mentor.bench.corpus_gen import generate_corpus
from mentor.bench.load import percentile
from mentor.bench.procs import cpu_seconds, peak_rss_mb
from mentor.bench.questions import (
    MIX_REPEAT_SHARE,
    QUESTIONS,
    TOPICS,
    NewQuestions,
    is_repeat,
    mixed_question,
    new_capacity,
    new_question,
    repeat_share,
)
from mentor.bench.stages import STAGES, Clock
from mentor.corpus import chunk_corpus, load_corpus
from mentor.settings import Settings
from mentor.stub_llm import bench_reply

from .conftest import CORPUS, MODULE_ID

# The extractive server is left out to keep this test near a minute on two cores; `include_extractive` only adds
# one more server of the same kind.
CONFIGS = (
    "stub",
    "mentor_llm",
    "mentor_llm_stream",
    "mentor_llm_uncached",
    "mentor_llm_mixed",
    "baseline",
    "baseline_uncached",
    "baseline_mixed",
)
LLM_CONFIGS = ("mentor_llm", "mentor_llm_stream", "mentor_llm_uncached", "mentor_llm_mixed")


def positive(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


@pytest.mark.slow
def test_tiny_run_has_every_figure_and_writes_both_files(tmp_path: Path) -> None:
    planned: list[int] = []
    steps: list[str] = []
    backend = Settings.model_construct().embedding_backend  # mentor's default; one backend keeps the test short
    results = run_bench(
        quick=True,
        concurrencies=(1,),
        requests_per_level=3,
        repetitions=1,
        ingest_modules=(1, 2),
        search_questions=4,
        include_baseline=True,
        include_extractive=False,
        stage_backends=(backend,),
        stage_questions=3,
        first_answer_runs=1,
        ask_runs=1,
        out_dir=tmp_path,
        on_plan=planned.append,
        on_step=steps.append,
    )
    # The progress bar's plan matches what ran: one step per configuration and level, per corpus size, and so on.
    assert planned == [len(steps)] and len(set(steps)) == len(steps)
    assert steps[0] == "loading the embedding model" and steps[-1] == f"writing {tmp_path / 'results.json'}"
    assert sum(step.endswith("at concurrency 1") for step in steps) == len(CONFIGS)

    headline = (
        "throughput_ratio_vs_baseline",
        "throughput_ratio_vs_baseline_uncached",
        "throughput_ratio_vs_baseline_mixed",
        "throughput_rps_mixed",
        "overhead_p50_ms",
        "overhead_p50_ms_uncached",
        "overhead_p50_ms_mixed",
        "overhead_p99_ms",
        "first_answer_ms",
        "serve_ready_s",
        "peak_rss_mb",
        "cli_help_s",
        "cli_ask_cold_s",
    )
    for key in headline:
        assert positive(results[key]), key
    assert math.isfinite(results["ttft_overhead_p50_ms"])
    assert 0 <= results["mixed_repeat_share"] <= 1 and results["embedding_backend"] == backend
    # Sane magnitudes, not speeds: a first answer within a minute, --help within its own time-out.
    assert results["first_answer_ms"] < 60_000 and results["cli_help_s"] < results["cli_ask_cold_s"]
    first_run = results["first_answer"]["runs"][0]
    assert first_run["engines"] == ["llm", "llm"] and results["cli"]["ask_engines"] == ["llm"]
    if backend != "torch":  # an ONNX backend's server must never map torch in
        assert first_run["torch_loaded"] is False
    assert set(results["configs"]) == set(CONFIGS)
    # Every question new to both, the same texts to both: mentor's and the baseline's runs share one range of new
    # questions per workload, and the two workloads' ranges do not overlap.
    levels = {name: results["configs"][name]["levels"]["1"] for name in CONFIGS}
    for workload, mentor, baseline in (
        ("new", "mentor_llm_uncached", "baseline_uncached"),
        ("mix", "mentor_llm_mixed", "baseline_mixed"),
    ):
        assert levels[mentor]["workload"] == levels[baseline]["workload"] == workload
        assert levels[mentor]["first_new"] == levels[baseline]["first_new"]
    new_range = range(levels["mentor_llm_uncached"]["first_new"], levels["mentor_llm_uncached"]["first_new"] + 5)
    assert levels["mentor_llm_mixed"]["first_new"] not in new_range
    stage = results["stages"][backend]
    assert stage["questions"] == 3 and stage["torch_imported"] is (backend == "torch")
    for key, _label in STAGES:
        assert 0 <= stage["median_ms"][key] < 10_000, key
    for key in ("embed", "llm_call", "sum", "end_to_end"):
        assert positive(stage["median_ms"][key]), key
    # The record takes the reading's vector: the writer embeds nothing again (the figure once read 100%, counting
    # a record that embedded nothing as a miss).
    assert stage["record_embed_miss_share"] == 0.0 and stage["median_ms"]["record_embed"] == 0.0
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
    for name in LLM_CONFIGS:
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
    for heading in ("## mentor vs the LangChain baseline, side by side", "## Stages of one new question"):
        assert heading in markdown
    assert "| every question new | 1 |" in markdown and "| mixed | 1 |" in markdown


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


def topic_of(text: str) -> str:
    """The template of TOPICS a new question was made from."""
    for topic in TOPICS:
        pattern = re.escape(topic).replace(r"\{size\}", r"[\d.]+B").replace(r"\{gpus\}", r"\d+")
        if re.search(pattern, text, re.IGNORECASE):
            return topic
    raise AssertionError(f"no topic in {text!r}")


def test_new_questions_never_repeat_and_read_like_learners_questions() -> None:
    texts = [new_question(n) for n in range(new_capacity())]
    assert len(set(texts)) == len(texts) >= 15_000  # a full run sends ~6,200
    # ... and none is a curated question in other words: the query cache, warm with those, would answer it.
    key = lambda text: " ".join(text.split()).lower()  # noqa: E731 - the query cache's key
    assert {key(text) for text in texts}.isdisjoint(key(q) for q in QUESTIONS)
    words = sorted(len(text.split()) for text in texts)
    assert 14 <= words[len(words) // 2] <= 18 and words[0] >= 4 and words[-1] <= 30
    assert all(text[0].isupper() and text.endswith(("?", ".")) for text in texts)
    # Neighbours vary: a run of 200 consecutive questions covers nearly every topic, none dominating.
    topics = Counter(topic_of(text) for text in texts[:200])
    assert len(topics) >= len(TOPICS) - 4 and max(topics.values()) <= 15
    assert new_question(123) == texts[123]  # deterministic
    with pytest.raises(IndexError):
        new_question(new_capacity())


def test_new_question_ranges_handed_out_do_not_overlap() -> None:
    new = NewQuestions()
    first, second = new.take(100), new.take(50)
    assert (first, second) == (0, 100)
    assert set(new.texts(10)).isdisjoint(new_question(n) for n in range(150))
    with pytest.raises(IndexError):
        new.take(new_capacity())


def test_the_mix_has_the_stated_share_of_repeats_with_zipf_popularity() -> None:
    count = 15_000
    asked = [mixed_question(i, first_new=0) for i in range(count)]
    repeats = [text for i, text in enumerate(asked) if is_repeat(i)]
    assert abs(repeat_share(0, count) - MIX_REPEAT_SHARE) < 0.005
    # Also in the windows a quick run measures (192 requests after a warm-up), not only on average.
    assert all(abs(repeat_share(start, 192) - MIX_REPEAT_SHARE) < 0.02 for start in range(0, 2000, 37))
    assert len(repeats) == round(repeat_share(0, count) * count)
    assert set(repeats) <= set(QUESTIONS)
    new = [text for i, text in enumerate(asked) if not is_repeat(i)]
    assert len(set(new)) == len(new) and set(new).isdisjoint(QUESTIONS)
    # Zipf with s=1.1: the most popular question is asked about 8^1.1 = 9.8 times as often as the 8th.
    popularity = Counter(repeats)
    first, eighth = popularity[QUESTIONS[0]], popularity[QUESTIONS[7]]
    assert popularity.most_common(1)[0][0] == QUESTIONS[0] and 7 < first / eighth < 14


def test_new_questions_are_in_the_modules_scope(runtime) -> None:
    from mentor.consult import consult

    # Out-of-scope questions would be redirected, not answered: the bench would not measure the LLM path.
    step = new_capacity() // 150
    for n in range(0, new_capacity(), step):
        text = new_question(n)
        grounds = consult(
            text, (), module_id=MODULE_ID, reader=runtime.chat.catalog.reader, retriever=runtime.retriever, top_k=4
        )
        assert grounds.answerable, text


def test_stage_clock_counts_nested_time_once() -> None:
    clock = Clock()
    began = time.perf_counter()
    with clock.stage("outer"):
        time.sleep(0.02)
        with clock.stage("inner"):
            time.sleep(0.03)
        wrapped = clock.timed(lambda: time.sleep(0.01), lambda: "scope" if clock.current == "outer" else "other")
        wrapped()
    elapsed = time.perf_counter() - began
    # Exclusive: the outer stage keeps its own 20 ms, not the 40 ms spent in the stages inside it (counted twice,
    # the totals would exceed the time elapsed). No upper bound in milliseconds: a busy machine stretches sleeps.
    totals = clock.totals
    assert totals["inner"] > 0.029 and totals["scope"] > 0.009 and totals["outer"] > 0.019 and "other" not in totals
    assert sum(totals.values()) == pytest.approx(elapsed, abs=0.002)
