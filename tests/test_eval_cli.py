"""`mentor eval` against a running server (--url), its exports, and replay of logged questions."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
from typer.testing import CliRunner

from mentor.api import create_app
from mentor.cli import app
from mentor.evaluate import CaseResult, compute_metrics, load_golden, run_cases

from .chat_helpers import serve
from .conftest import ROOT


def test_eval_runs_against_a_live_server_over_http(runtime) -> None:
    cases = [c for c in load_golden(ROOT / "eval/golden.jsonl", "dev") if c.category in ("calculation", "off_topic")]
    cases = cases[:4] + [c for c in cases if c.category == "off_topic"][:2]

    async def run(url: str):
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            return await run_cases(cases, client=client, analyst_token=runtime.analyst_token)

    with serve(create_app(runtime.settings, runtime=runtime)) as url:
        results = asyncio.run(run(url))
    assert [r.case.id for r in results] == [c.id for c in cases]
    metrics = compute_metrics(results)["overall"]
    assert metrics["tool_selection"]["n"] == 4 and metrics["tool_selection"]["value"] == 1.0
    assert metrics["oos_recall"]["value"] == 1.0 and metrics["pii_leak_rate"]["value"] in (0.0, None)


def test_replay_re_asks_logged_questions(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MENTOR_DATA_DIR", str(tmp_path / "data"))
    runner = CliRunner()
    for question in ("what does ZeRO stage 2 shard?", "int4 70B", "how do I bake bread?"):
        assert runner.invoke(app, ["ask", question]).exit_code == 0
    result = runner.invoke(app, ["eval", "replay", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output[result.output.index("{") :])
    assert report["totals"]["questions"] == 3 and report["totals"]["changed"] == 0 and report["changes"] == []
    summary = runner.invoke(app, ["eval", "replay"])
    assert "replayed 3 questions: 0 changed" in summary.output


def test_export_writes_ragas_records(tmp_path) -> None:
    out = tmp_path / "ragas.jsonl"
    result = CliRunner().invoke(app, ["eval", "export", "--format", "ragas", "--split", "heldout", "--out", str(out)])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) >= 30
    assert {
        "user_input",
        "retrieved_contexts",
        "response",
        "reference",
        "retrieved_context_ids",
        "reference_context_ids",
    } <= set(records[0])
    bad = CliRunner().invoke(app, ["eval", "export", "--format", "csv", "--out", str(out)])
    assert bad.exit_code == 2


def small_golden(path: Path) -> Path:
    """The golden set's header and one dev case of a few kinds: a calculation, a follow-up, an off-topic, a PII."""
    header, *lines = (ROOT / "eval" / "golden.jsonl").read_text().splitlines()
    wanted, kept = ["calculation", "follow_up", "off_topic", "pii"], []
    for line in lines:
        case = json.loads(line) if line.strip() else {}
        if case.get("split") == "dev" and case.get("category") in wanted:
            wanted.remove(case["category"])
            kept.append(line)
    path.write_text("\n".join([header, *kept]) + "\n")
    return path


def test_eval_in_process_prints_no_request_lines_leaves_no_scratch_and_export_reuses_its_report(tmp_path) -> None:
    golden, report, scratch = small_golden(tmp_path / "golden.jsonl"), tmp_path / "report", tmp_path / "tmp"
    scratch.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MENTOR_")}
    env |= {"MENTOR_DATA_DIR": str(tmp_path / "data"), "TMPDIR": str(scratch)}
    mentor = str(Path(sys.executable).parent / "mentor")
    done = subprocess.run(
        [mentor, "eval", "--set", str(golden), "--report", str(report)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "case_pass_rate" in done.stdout
    # httpx's INFO line per request (208 in a dev run) is gone; what is left is the start-up's few lines.
    assert "HTTP Request" not in done.stderr and len(done.stderr.splitlines()) < 15, done.stderr
    assert list(scratch.glob("mentor-eval-*")) == []  # the scratch data directory is removed after the run
    assert not (tmp_path / "data").exists()  # and the configured one was never touched

    # The report keeps every result whole: read back, each writes out exactly what was stored.
    stored = json.loads((report / "report.json").read_text())["cases"]
    cases = {case.id: case for case in load_golden(golden, "all")}
    for row in stored:
        again = CaseResult.from_dict(cases[row["id"]], row).to_dict()
        assert json.loads(json.dumps(again)) == row, row["id"]

    # `eval export --from-report` writes those results without asking again (no model, seconds).
    out = tmp_path / "ragas.jsonl"
    runner = CliRunner()
    args = ["eval", "export", "--from-report", str(report), "--set", str(golden), "--out", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["response"] for r in records] == [row["answer"] for row in stored]
    # The report pairs answers with the golden set it was run on; another set is refused in one line.
    other = runner.invoke(app, ["eval", "export", "--from-report", str(report), "--out", str(out)])
    assert other.exit_code == 2 and "was made from golden set" in other.output, other.output
    missing = runner.invoke(app, ["eval", "export", "--from-report", str(tmp_path), "--out", str(out)])
    assert missing.exit_code == 2 and "no report there" in missing.output
