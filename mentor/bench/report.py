"""Render a benchmark result document as Markdown tables."""

from __future__ import annotations

LABELS = {
    "stub": "stub LLM alone (streamed)",
    "mentor_llm": "mentor, LLM engine (/v1/chat)",
    "mentor_llm_stream": "mentor, LLM engine (/v1/chat/stream)",
    "mentor_llm_uncached": "mentor, LLM engine, every question new (/v1/chat)",
    "mentor_extractive": "mentor, extractive engine (/v1/chat)",
    "baseline": "LangChain baseline (/v1/chat)",
}


def render_markdown(results: dict) -> str:
    """The headline figures, the load table, the ingest and retrieval tables, and the notes."""
    machine, params = results["machine"], results["params"]
    lines = [
        "# mentor bench",
        "",
        f"{'Quick' if params['quick'] else 'Full'} run on {machine['date']}: {machine['cpu_model']}, "
        f"{machine['cores']} cores, {machine['memory_gb']} GB, Python {machine['python']}; "
        f"took {results.get('duration_s', 0):.0f} s; other processes used {machine['other_cpu_share']:.0%} of the CPU.",
        "",
        f"- **Throughput vs baseline** (LLM engine, concurrency {results['throughput_concurrency']}): "
        f"{fmt(results['throughput_ratio_vs_baseline'], 2)}x "
        f"({fmt(results['throughput_ratio_vs_baseline_uncached'], 2)}x when every question is new)",
        f"- **Overhead** over the stub LLM (concurrency {results['overhead_concurrency']}): "
        f"p50 {fmt(results['overhead_p50_ms'])} ms ({fmt(results['overhead_p50_ms_uncached'])} ms when every "
        f"question is new), p99 {fmt(results['overhead_p99_ms'])} ms; "
        f"time to first token +{fmt(results['ttft_overhead_p50_ms'])} ms",
        f"- **Peak RSS** of `mentor serve`: {fmt(results['peak_rss_mb'], 0)} MB",
        "",
        "## Load",
        "",
        "| configuration | conc. | req/s | p50 ms | p95 ms | p99 ms | first token p50 ms | overhead p50 / p99 ms "
        "| CPU ms/req | peak RSS MB | errors |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for name, config in results["configs"].items():
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
        "## Retrieval (`Retriever.search`, one module, top 4)",
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
        "Cold: the query embedding is computed; warm: it comes from mentor's query cache.",
        "",
        "## Notes",
        "",
    ]
    lines += [f"- {note}" for note in results["notes"]]
    return "\n".join(lines) + "\n"


def fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def med(metric: dict | None, digits: int = 1) -> str:
    return "-" if metric is None else fmt(metric["median"], digits)


def spread(metric: dict | None, digits: int = 1) -> str:
    """median [min-max]"""
    if metric is None:
        return "-"
    return f"{fmt(metric['median'], digits)} [{fmt(metric['min'], digits)}-{fmt(metric['max'], digits)}]"
