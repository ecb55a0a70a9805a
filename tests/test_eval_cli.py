"""`mentor eval` against a running server (--url), its exports, and replay of logged questions."""

from __future__ import annotations

import asyncio
import json

import httpx
from typer.testing import CliRunner

from mentor.api import create_app
from mentor.cli import app
from mentor.evaluate import compute_metrics, load_golden, run_cases

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
