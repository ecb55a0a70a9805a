"""The result document of a bench run: headline figures, every measurement behind them, notes; and its files."""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path

from mentor.bench.plan import LLM_CONFIGS, PAIRS, SERVER_OF
from mentor.bench.questions import TOPICS
from mentor.bench.report import render_markdown

log = logging.getLogger(__name__)


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
    cold: dict,
    stages: dict,
) -> dict:
    """The result document: headline figures first, then every measurement behind them."""
    low, high = str(min(params["concurrencies"])), str(max(params["concurrencies"]))

    def median(config: str, level: str, key: str) -> float | None:
        metric = configs.get(config, {}).get("levels", {}).get(level, {}).get(key)
        return None if metric is None else metric["median"]

    for name, config in configs.items():
        config["peak_rss_mb"] = peak_rss.get(SERVER_OF[name])
        if SERVER_OF[name] in ("mentor_llm", "baseline"):
            calls = stub_calls if name.startswith("mentor") else 1
            config["overhead_ms"] = {
                level: {
                    q: median(name, level, f"{q}_ms") - calls * median("stub", level, f"{q}_ms")
                    for q in ("p50", "p95", "p99")
                }
                for level in config["levels"]
            }

    def ratio(workload: str) -> float | None:
        mentor, baseline = (median(name, high, "rps") for name in PAIRS[workload])
        return mentor / baseline if mentor and baseline else None

    def overhead(config: str) -> float:
        return configs[config]["overhead_ms"][low]["p50"]

    ttft = median("mentor_llm_stream", low, "ttft_p50_ms")
    stub_ttft = median("stub", low, "ttft_p50_ms")
    largest = ingest_runs[-1]
    errors = {name: sum(level["errors"] for level in c["levels"].values()) for name, c in configs.items()}
    mixed_levels = configs["mentor_llm_mixed"]["levels"].values()
    results = {
        "throughput_ratio_vs_baseline": ratio("repeat"),
        "throughput_ratio_vs_baseline_uncached": ratio("new"),
        "throughput_ratio_vs_baseline_mixed": ratio("mix"),
        "throughput_rps_mixed": median("mentor_llm_mixed", high, "rps"),
        "throughput_concurrency": int(high),
        # Weighted by requests: every level measures the same number, so this is their plain mean.
        "mixed_repeat_share": sum(level["repeat_share"] for level in mixed_levels) / len(mixed_levels),
        "overhead_p50_ms": overhead("mentor_llm"),
        "overhead_p99_ms": configs["mentor_llm"]["overhead_ms"][low]["p99"],
        "overhead_p50_ms_uncached": overhead("mentor_llm_uncached"),
        "overhead_p50_ms_mixed": overhead("mentor_llm_mixed"),
        "overhead_concurrency": int(low),
        "ttft_overhead_p50_ms": ttft - stub_ttft if ttft is not None and stub_ttft is not None else None,
        "first_answer_ms": cold["first_answer"]["first_answer_ms"],
        "serve_ready_s": cold["first_answer"]["ready_s"],
        "peak_rss_mb": peak_rss["mentor_llm"],
        "cli_help_s": cold["cli"]["cli_help_s"],
        "cli_ask_cold_s": cold["cli"]["cli_ask_cold_s"],
        "embedding_backend": params["embedding_backend"],
        "first_answer": cold["first_answer"],
        "cli": cold["cli"],
        "stages": stages,
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
    mix = params["mix"]
    found = [
        f"Medians of {params['repetitions']} repetitions of {params['requests_per_level']} requests per level "
        "(min-max in brackets); warm-up requests are excluded from latency and CPU.",
        f"Overhead = latency - stub latency x {stub_calls} LLM call(s) per question, at the same concurrency.",
        "The stub LLM is mentor.stub_llm.serve_stub, whose reply quotes a sentence of passage [1] verbatim, so "
        "mentor's grounding check accepts it and the LLM path (not the extractive fallback) is what is measured.",
        f"The stub, the load generator and the server under test share this machine's "
        f"{results['machine']['cores']} cores. Embedding backend of the servers, the CLI and the ingest: "
        f"{params['embedding_backend']}.",
        f"Workloads, the same texts in the same order for mentor and the baseline. Repeated: the "
        f"{params['questions']} curated questions in turn; after warm-up mentor's query-embedding cache answers "
        "every one (the baseline has no cache). Every question new: learner-like questions of ~15 words about the "
        f"module (an opening, one of {len(TOPICS)} questions, a closing: {params['new_questions']:,} texts), "
        "none sent twice to a server in the run. Mixed: a popular question (one of the curated ones, Zipf, "
        f"s={mix['zipf_s']}, over their ranks; in mentor's cache from the repeated run) for {mix['repeat_share']:.0%} "
        "of requests, spread evenly by a golden-ratio sequence, else a new question: "
        f"{results['mixed_repeat_share']:.1%} of the measured mixed requests were repeats.",
        "At concurrency above 1, overhead includes queueing in the server (the stub alone queues far less).",
        "First answer: a new `mentor serve` on the LLM server's data directory (already ingested) is started after "
        "the load runs, /readyz polled every 20 ms until 200, then a new question timed over HTTP (stub included); "
        "the second new question after it shows what a warm server takes. CLI: wall time of fresh processes, "
        "`mentor --help` best of 3, `mentor ask --json` with a new question (best of "
        f"{params['ask_runs']}) on that data directory.",
    ]
    if results["stages"]:
        found.append(
            f"Stages: medians over {params['stage_questions']} new questions, in-process, one process per backend "
            "(mentor.bench.stages); the signal record is built by the writer thread, off the request path, but on "
            "the same cores."
        )
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
    engines = [engine for run in results["first_answer"]["runs"] for engine in run["engines"]]
    engines += results["cli"]["ask_engines"]
    if set(engines) - {"llm"}:
        found.append(f"Not every first answer or CLI answer came from the LLM engine: {engines}.")
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
