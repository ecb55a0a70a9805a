"""Reports a person reads (report.md) and a machine diffs (report.json); exports are in `export.py`."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mentor.errors import InvalidInput
from mentor.evaluate.golden import CATEGORIES, load_golden
from mentor.evaluate.metrics import LOWER_IS_BETTER, METRICS
from mentor.evaluate.runner import CaseResult

log = logging.getLogger(__name__)
ANSWER_EXCERPT = 600


def _distinct(values: Sequence[str | None]) -> list[str]:
    return sorted({v for v in values if v})


def write_report(results: Sequence[CaseResult], metrics: dict[str, Any], out_dir: Path) -> None:
    """Write report.json and report.md into `out_dir`, comparing with the report.json already there."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / "report.json"
    previous = _read_previous(json_path)
    cases = [r.case for r in results]
    report = {
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "golden": {
            "version": cases[0].golden_version if cases else None,
            "sha256": cases[0].golden_sha256 if cases else None,
            "splits": _distinct([c.split for c in cases]),
            "cases": len(cases),
        },
        "engines": _distinct([r.engine for r in results]),
        "models": _distinct([r.model for r in results]),
        "prompt_versions": _distinct([r.prompt_version for r in results]),
        "module_versions": _distinct([r.module_version for r in results]),
        "metrics": metrics,
        "cases": [r.to_dict() for r in results],
    }
    json_path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (out_dir / "report.md").write_text(render_markdown(report, previous), encoding="utf-8")


def _read_previous(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    try:
        previous = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        log.warning("previous report %s unreadable (%s): no comparison", path, exc)
        return None
    return previous if isinstance(previous, dict) and "metrics" in previous else None


def read_results(report_dir: Path, golden: Path) -> list[CaseResult]:
    """The results `write_report` kept in `report_dir`, with their cases from `golden`, the set they were run on.

    What `mentor eval export --from-report` exports instead of asking every case again. The report records the
    golden set's SHA-256; a different file would pair answers with other expectations, so it is refused.
    """
    path = report_dir / "report.json"
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidInput(f"{path}: no report there; write one with `mentor eval --report {report_dir}`") from None
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"{path}: cannot be read as a report ({type(exc).__name__})") from None
    if not isinstance(report, dict) or not isinstance(report.get("cases"), list) or "golden" not in report:
        raise InvalidInput(f"{path}: not a report written by `mentor eval --report`")
    made_from = report["golden"] or {}
    cases = {case.id: case for case in load_golden(golden, "all")}
    current = next(iter(cases.values()), None)
    if current is None or current.golden_sha256 != made_from.get("sha256"):
        raise InvalidInput(
            f"{path} was made from golden set {made_from.get('version')} "
            f"(sha256 {str(made_from.get('sha256'))[:12]}), not from {golden} as it is now; pass that set with --set, "
            f"or run `mentor eval --report {report_dir}` again"
        )
    return [CaseResult.from_dict(cases[row["id"]], row) for row in report["cases"]]


def _fmt(metric: dict[str, Any] | None, name: str) -> str:
    if not metric or metric.get("value") is None:
        return "—"
    value = metric["value"]
    return f"{value:.1f}" if name.endswith("_ms") else f"{value:.3f}"


def _delta(now: dict[str, Any] | None, before: dict[str, Any] | None, name: str) -> str:
    if not now or not before or now.get("value") is None or before.get("value") is None:
        return ""
    change = now["value"] - before["value"]
    if abs(change) < 1e-9:
        return "="
    better = (change < 0) if name in LOWER_IS_BETTER else (change > 0)
    text = f"{change:+.1f}" if name.endswith("_ms") else f"{change:+.3f}"
    return f"{text} {'▲' if better else '▼'}"


def _table(scope: dict[str, Any], before: dict[str, Any] | None, *, compare: bool) -> list[str]:
    head = "| metric | value | n |" + (" Δ vs previous |" if compare else "")
    rule = "|---|---:|---:|" + ("---:|" if compare else "")
    lines = [head, rule]
    for name in METRICS:
        metric = scope.get(name)
        if not metric or not metric.get("n"):
            continue
        row = f"| {name} | {_fmt(metric, name)} | {metric['n']} |"
        if compare:
            row += f" {_delta(metric, (before or {}).get(name), name)} |"
        lines.append(row)
    return lines


def render_markdown(report: dict[str, Any], previous: dict[str, Any] | None = None) -> str:
    """The human report: tables overall and per category, failures with their answers, deltas."""
    metrics = report["metrics"]
    golden = report["golden"]
    compare = previous is not None
    old = (previous or {}).get("metrics", {})
    lines = [
        "# mentor eval report",
        "",
        f"- created: {report['created_at']}",
        f"- golden set: version {golden['version']}, sha256 `{(golden['sha256'] or '')[:16]}`, "
        f"split {', '.join(golden['splits'])}, {golden['cases']} cases "
        f"({metrics['cases']['run']} run, {metrics['cases']['skipped']} skipped, {metrics['cases']['errors']} errors)",
        f"- engine: {', '.join(report['engines']) or '—'}; model: {', '.join(report['models']) or '—'}; "
        f"prompt version: {', '.join(report['prompt_versions']) or '—'}; "
        f"module version: {', '.join(report['module_versions']) or '—'}",
    ]
    if compare:
        before = previous.get("golden", {})
        lines.append(
            f"- compared with the previous report of {previous.get('created_at', '?')} "
            f"(golden {before.get('version')}, sha256 `{(before.get('sha256') or '')[:16]}`)"
        )
        if before.get("sha256") != golden["sha256"] or before.get("splits") != golden["splits"]:
            lines.append("  - **the golden set or split differs**: deltas compare different case sets")
    for note in metrics.get("notes", []):
        lines.append(f"- note: {note}")
    lines += ["", "## Overall", "", *_table(metrics["overall"], old.get("overall"), compare=compare)]
    if metrics.get("by_engine"):
        lines += [
            "",
            "## By engine",
            "",
            "| engine | latency p50 ms | latency p95 ms | grounded | n |",
            "|---|---:|---:|---:|---:|",
        ]
        for engine, m in metrics["by_engine"].items():
            lines.append(
                f"| {engine} | {_fmt(m['latency_p50_ms'], 'latency_p50_ms')} | "
                f"{_fmt(m['latency_p95_ms'], 'latency_p95_ms')} | "
                f"{_fmt(m['grounded_share'], 'grounded_share')} | {m['latency_p50_ms']['n']} |"
            )
    for category in CATEGORIES:
        scope = metrics["by_category"].get(category)
        if scope is None:
            continue
        before = old.get("by_category", {}).get(category)
        lines += ["", f"## {category}", "", *_table(scope, before, compare=compare)]
    lines += ["", *_failures(report["cases"]), "", *_quality_misses(report["cases"])]
    if compare:
        lines += ["", *_case_changes(report["cases"], previous.get("cases", []))]
    return "\n".join(lines) + "\n"


def _failures(cases: list[dict[str, Any]]) -> list[str]:
    failed = [c for c in cases if not c["skipped"] and not c["verdicts"].get("passed", False)]
    lines = [f"## Failures ({len(failed)})"]
    if not failed:
        return [*lines, "", "None."]
    for case in failed:
        expect = case["expect"]
        wanted = []
        if expect["sections"]:
            wanted.append(f"sections {', '.join(expect['sections'])}")
        if expect["tool"]:
            wanted.append(f"tool {expect['tool']} {json.dumps(expect['tool_arguments'])}")
        if expect["numbers"]:
            wanted.append(f"numbers {' + '.join(' | '.join(n) for n in expect['numbers'])}")
        if expect["facts"]:
            wanted.append(f"facts {', '.join(expect['facts'])}")
        if expect.get("verdict"):
            wanted.append(f"verdict {expect['verdict']!r} first")
        wanted.append(f"out_of_scope {str(expect['out_of_scope']).lower()}")
        got_tools = ", ".join(f"{t['name']} {json.dumps(t['arguments'])}" for t in case["tool_calls"]) or "none"
        cited = ", ".join(sorted({c["section_id"] for c in case["citations"]})) or "none"
        retrieved = ", ".join(p["section_id"] for p in case["contexts"] if p["source"] == "search") or "none"
        answer = case["answer"].replace("\n", " ")
        if len(answer) > ANSWER_EXCERPT:
            answer = answer[:ANSWER_EXCERPT] + " …"
        lines += [
            "",
            f"### {case['id']} ({case['category']}, {case['split']}): {', '.join(case['verdicts']['failed_checks'])}",
            "",
            *[f"> {turn}" for turn in case["turns"]],
            "",
            f"- expected: {'; '.join(wanted)}",
            f"- got: out_of_scope {str(case['out_of_scope']).lower()}; "
            f"coverage {case.get('coverage') or 'none given'}; cited {cited}; retrieved {retrieved}; "
            f"tools {got_tools}",
        ]
        if case["grounding"].get("untraced_numbers"):
            lines.append(f"- untraced numbers: {', '.join(case['grounding']['untraced_numbers'])}")
        if case["verdicts"].get("pii_found"):
            lines.append(f"- stored personal details: {', '.join(case['verdicts']['pii_found'])}")
        if case["error"]:
            lines.append(f"- error: {case['error']}")
        lines.append(f"- answer: {answer or '(none)'}")
    return lines


def _quality_misses(cases: list[dict[str, Any]]) -> list[str]:
    """Cases that missed an answer-quality check or quoted an irrelevant unit: which, and the units involved."""
    missed = [
        c
        for c in cases
        if not c["skipped"] and (c["verdicts"].get("quality_misses") or c["verdicts"].get("irrelevant_units"))
    ]
    lines = [f"## Answer-quality misses ({len(missed)})"]
    if not missed:
        return [*lines, "", "None."]
    for case in missed:
        verdicts, expect = case["verdicts"], case["expect"]
        details = []
        if verdicts.get("answer_complete") is False:
            details.append(f"parts answered {verdicts['parts_answered']} of {len(expect.get('parts', []))}")
        if verdicts.get("coverage_correct") is False:
            wanted = expect.get("coverage") or ("none" if expect["out_of_scope"] else "full")
            details.append(f"coverage {case.get('coverage') or 'none given'}, expected {wanted}")
        if verdicts.get("verdict_given") is False:
            details.append(f"first sentence lacks the verdict {expect.get('verdict')!r}")
        if verdicts.get("follow_up_novel") is False:
            details.append(f"{len(verdicts.get('repeated_units') or [])} unit(s) repeated from the previous answer")
        if verdicts.get("irrelevant_units"):
            details.append(f"{len(verdicts['irrelevant_units'])} of {verdicts['answer_units']} unit(s) irrelevant")
        answer = case["answer"].replace("\n", " ")
        if len(answer) > ANSWER_EXCERPT:
            answer = answer[:ANSWER_EXCERPT] + " …"
        checks = ", ".join(verdicts["quality_misses"]) or "irrelevant units"
        lines += ["", f"### {case['id']} ({case['category']}, {case['split']}): {checks}"]
        lines += ["", *[f"> {turn}" for turn in case["turns"]], "", f"- {'; '.join(details)}"]
        lines += [f"- irrelevant: {unit}" for unit in verdicts.get("irrelevant_units") or []]
        lines.append(f"- answer: {answer or '(none)'}")
    return lines


def _case_changes(cases: list[dict[str, Any]], previous: list[dict[str, Any]]) -> list[str]:
    before = {c.get("id"): c.get("verdicts", {}).get("passed") for c in previous if isinstance(c, dict)}
    now = {c["id"]: c["verdicts"].get("passed") for c in cases if not c["skipped"]}
    fixed = sorted(i for i, ok in now.items() if ok and before.get(i) is False)
    broken = sorted(i for i, ok in now.items() if ok is False and before.get(i) is True)
    new = sorted(i for i in now if i not in before)
    return [
        "## Changes since the previous report",
        "",
        f"- now failing: {', '.join(broken) or 'none'}",
        f"- now passing: {', '.join(fixed) or 'none'}",
        f"- new cases: {', '.join(new) or 'none'}",
    ]
