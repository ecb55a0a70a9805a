"""Render a benchmark result document as Markdown tables."""

from __future__ import annotations

from mentor.bench.stages import STAGES

LABELS = {
    "stub": "stub LLM alone (streamed)",
    "mentor_llm": "mentor, LLM engine (/v1/chat)",
    "mentor_llm_stream": "mentor, LLM engine (/v1/chat/stream)",
    "mentor_llm_uncached": "mentor, LLM engine, every question new (/v1/chat)",
    "mentor_llm_mixed": "mentor, LLM engine, mixed questions (/v1/chat)",
    "mentor_extractive": "mentor, extractive engine (/v1/chat)",
    "baseline": "LangChain baseline (/v1/chat)",
    "baseline_uncached": "LangChain baseline, every question new (/v1/chat)",
    "baseline_mixed": "LangChain baseline, mixed questions (/v1/chat)",
}
# workload: (its name in the report, mentor's configuration, the baseline's)
SIDE_BY_SIDE = {
    "repeat": ("repeated (cached)", "mentor_llm", "baseline"),
    "new": ("every question new", "mentor_llm_uncached", "baseline_uncached"),
    "mix": ("mixed", "mentor_llm_mixed", "baseline_mixed"),
}


def render_markdown(results: dict) -> str:
    """The headline figures, the side-by-side and load tables, stages, start-up, ingest, retrieval, and notes."""
    machine, params = results["machine"], results["params"]
    first = results["first_answer"]
    lines = [
        "# mentor bench",
        "",
        f"{'Quick' if params['quick'] else 'Full'} run on {machine['date']}: {machine['cpu_model']}, "
        f"{machine['cores']} cores, {machine['memory_gb']} GB, Python {machine['python']}; "
        f"took {results.get('duration_s', 0):.0f} s; other processes used {machine['other_cpu_share']:.0%} of the CPU; "
        f"embedding backend {results['embedding_backend']}.",
        "",
        f"- **Throughput vs baseline** (LLM engine, concurrency {results['throughput_concurrency']}): "
        f"{fmt(results['throughput_ratio_vs_baseline_uncached'], 2)}x when every question is new, "
        f"{fmt(results['throughput_ratio_vs_baseline_mixed'], 2)}x on the mix "
        f"({fmt(results['throughput_rps_mixed'])} req/s, {results['mixed_repeat_share']:.0%} repeats), "
        f"{fmt(results['throughput_ratio_vs_baseline'], 2)}x when questions repeat",
        f"- **Overhead** over the stub LLM (concurrency {results['overhead_concurrency']}): "
        f"p50 {fmt(results['overhead_p50_ms_uncached'])} ms when every question is new, "
        f"{fmt(results['overhead_p50_ms_mixed'])} ms on the mix, {fmt(results['overhead_p50_ms'])} ms repeated "
        f"(p99 {fmt(results['overhead_p99_ms'])} ms); time to first token +{fmt(results['ttft_overhead_p50_ms'])} ms",
        f"- **First answer** of a fresh `mentor serve`: {fmt(results['first_answer_ms'])} ms after /readyz turned "
        f"200 ({fmt(results['serve_ready_s'], 1)} s after start); "
        f"the next new question {fmt(first['second_answer_ms'])} ms",
        f"- **Peak RSS** of `mentor serve`: {fmt(results['peak_rss_mb'], 0)} MB",
        f"- **CLI**: `mentor --help` {fmt(results['cli_help_s'], 2)} s, cold `mentor ask` "
        f"{fmt(results['cli_ask_cold_s'], 1)} s",
        "",
        "## mentor vs the LangChain baseline, side by side (LLM engine, /v1/chat)",
        "",
        "| workload | conc. | mentor req/s | baseline req/s | ratio | mentor p50 ms | baseline p50 ms "
        "| mentor overhead p50 ms |",
        "|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    configs = results["configs"]
    for label, mentor, baseline in SIDE_BY_SIDE.values():
        for level in params["concurrencies"]:
            m = configs.get(mentor, {}).get("levels", {}).get(str(level))
            b = configs.get(baseline, {}).get("levels", {}).get(str(level))
            if m is None:
                continue
            ratio = m["rps"]["median"] / b["rps"]["median"] if b else None
            overhead = configs[mentor].get("overhead_ms", {}).get(str(level))
            lines.append(
                f"| {label} | {level} | {med(m.get('rps'))} | {med(b.get('rps')) if b else '-'} "
                f"| {f'{ratio:.2f}x' if ratio else '-'} "
                f"| {med(m.get('p50_ms'))} | {med(b.get('p50_ms')) if b else '-'} "
                f"| {fmt(overhead['p50']) if overhead else '-'} |"
            )
    lines += [
        "",
        "## Load",
        "",
        "| configuration | conc. | req/s | p50 ms | p95 ms | p99 ms | first token p50 ms | overhead p50 / p99 ms "
        "| CPU ms/req | peak RSS MB | errors |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for name, config in configs.items():
        for level, m in config["levels"].items():
            overhead = config.get("overhead_ms", {}).get(level)
            overhead_text = f"{fmt(overhead['p50'])} / {fmt(overhead['p99'])}" if overhead else "-"
            cpu = m.get("cpu_s_per_request")
            lines.append(
                f"| {LABELS.get(name, name)} | {level} | {spread(m.get('rps'), 1)} | {spread(m.get('p50_ms'))} "
                f"| {med(m.get('p95_ms'))} | {med(m.get('p99_ms'))} | {med(m.get('ttft_p50_ms'))} "
                f"| {overhead_text} "
                f"| {fmt(cpu['median'] * 1000) if cpu else '-'} | {fmt(config.get('peak_rss_mb'), 0)} "
                f"| {m['errors']} |"
            )
    lines += stage_table(results["stages"])
    lines += startup_table(results)
    lines += [
        "",
        "## Ingest",
        "",
        "| modules | chunks | ingest s | of which embedding s | embeddings | embeddings/s | re-ingest s "
        "| re-ingest embeddings |",
        "|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for run in results["ingest"]["by_size"]:
        lines.append(
            f"| {run['modules']} | {run['chunks']} | {fmt(run['ingest_s'], 2)} | {fmt(run['embed_s'], 2)} "
            f"| {run['embeddings']} "
            f"| {fmt(run['embeddings_per_s'], 0)} | {fmt(run['reingest_s'], 2)} | {run['reingest_embeddings']} |"
        )
    lines += [
        "",
        f"Loading the embedding model took {fmt(results['ingest']['embedding_model_load_s'], 1)} s (not included).",
        "",
        "## Retrieval (`Retriever.search`, one module, top 4, new questions)",
        "",
        "| modules in index | chunks | cold p50 ms | cold p95 ms | warm p50 ms | warm p95 ms | retriever build s |",
        "|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for row in results["retrieval"]:
        lines.append(
            f"| {row['modules']} | {row['chunks']} | {fmt(row['cold_p50_ms'], 2)} | {fmt(row['cold_p95_ms'], 2)} "
            f"| {fmt(row['warm_p50_ms'], 2)} | {fmt(row['warm_p95_ms'], 2)} | {fmt(row['retriever_build_s'], 2)} |"
        )
    lines += [
        "",
        "Cold: the query embedding is computed (an embedder without a cache); warm: it comes from mentor's query "
        "cache, which leaves BM25, the dot product, fusion and scope.",
        "",
        "## Notes",
        "",
    ]
    lines += [f"- {note}" for note in results["notes"]]
    return "\n".join(lines) + "\n"


def stage_table(stages: dict) -> list[str]:
    """One column per backend: the median (p90) of each stage of a new question, then the process's figures."""
    if not stages:
        return []
    backends = list(stages)
    lines = [
        "",
        "## Stages of one new question (in-process, median ms, p90 in brackets; 1st: the first question after "
        "start-up and warm-up)",
        "",
        "| stage | " + " | ".join(f"{b} | {b}, 1st" for b in backends) + " |",
        "|---|" + "--:|" * 2 * len(backends),
    ]

    def row(label: str, key: str) -> str:
        cells = [
            f"{fmt(s['median_ms'][key], 2)} ({fmt(s['p90_ms'][key], 2)}) | {fmt(s['first_ms'].get(key), 1)}"
            for s in stages.values()
        ]
        return f"| {label} | " + " | ".join(cells) + " |"

    def fact(label: str, values: list[str]) -> str:
        return f"| {label} | " + " | ".join(f"{value} | -" for value in values) + " |"

    lines += [row(label, key) for key, label in STAGES]
    lines += [
        row("**sum of the request-path stages** (all but the signal record)", "sum"),
        row("**`ChatService.ask`, end to end** (adds validation, conversation, thread hand-offs)", "end_to_end"),
        fact(
            "writer embedded the question again, missing the query cache",
            [f"{s['record_embed_miss_share']:.0%}" for s in stages.values()],
        ),
        fact("model load s (first query included)", [fmt(s["model_load_s"], 2) for s in stages.values()]),
        fact("process RSS MB after the questions", [fmt(s["rss_mb"], 0) for s in stages.values()]),
        fact("torch imported", ["yes" if s["torch_imported"] else "no" for s in stages.values()]),
    ]
    return lines


def startup_table(results: dict) -> list[str]:
    """Each fresh server's time to ready and first two answers; the CLI's wall times."""
    first, cli = results["first_answer"], results["cli"]
    lines = [
        "",
        "## Start-up and CLI",
        "",
        "| fresh `mentor serve` | ready s | first answer ms | next answer ms | RSS MB then | torch loaded |",
        "|--:|--:|--:|--:|--:|---|",
    ]
    for n, run in enumerate(first["runs"], start=1):
        lines.append(
            f"| {n} | {fmt(run['ready_s'], 2)} | {fmt(run['first_ms'])} | {fmt(run['second_ms'])} "
            f"| {fmt(run['rss_mb'], 0)} | {'yes' if run['torch_loaded'] else 'no'} |"
        )
    lines += [
        "",
        f"`mentor --help`: {', '.join(fmt(s, 2) for s in cli['help_s'])} s (best {fmt(cli['cli_help_s'], 2)} s); "
        f"cold `mentor ask`: {', '.join(fmt(s, 2) for s in cli['ask_s'])} s "
        f"(best {fmt(cli['cli_ask_cold_s'], 2)} s); run as `{cli['command']}`.",
    ]
    return lines


def fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def med(metric: dict | None, digits: int = 1) -> str:
    return "-" if metric is None else fmt(metric["median"], digits)


def spread(metric: dict | None, digits: int = 1) -> str:
    """median [min-max]"""
    if metric is None:
        return "-"
    return f"{fmt(metric['median'], digits)} [{fmt(metric['min'], digits)}-{fmt(metric['max'], digits)}]"
