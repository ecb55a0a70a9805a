"""The CI gate: `mentor eval --check` on the embedded default passes the thresholds in eval/thresholds.toml."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from mentor.cli import app


def test_eval_check_passes_on_the_dev_split(tmp_path) -> None:
    result = CliRunner().invoke(app, ["eval", "--split", "dev", "--check", "--report", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "all metrics within" in result.output
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["golden"]["cases"] >= 80 and report["engines"] == ["extractive"]
    assert (tmp_path / "report.md").read_text().startswith("#")


def test_eval_check_fails_when_a_threshold_is_not_met(tmp_path) -> None:
    strict = tmp_path / "strict.toml"
    strict.write_text('golden_version = "1.0.0"\n[overall]\nretrieval_mrr = { min = 1.0, reason = "impossible" }\n')
    result = CliRunner().invoke(app, ["eval", "--split", "dev", "--check", "--thresholds", str(strict)])
    assert result.exit_code == 1 and "retrieval_mrr" in result.output
