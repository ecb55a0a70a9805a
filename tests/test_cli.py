"""The `mentor` command line, run in-process with a private data directory."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from mentor.cli import app

from .conftest import MODULE_ID


@pytest.fixture
def cli(tmp_path, monkeypatch):
    monkeypatch.setenv("MENTOR_DATA_DIR", str(tmp_path / "data"))
    runner = CliRunner()

    def run(*args: str):
        return runner.invoke(app, list(args))

    return run


def test_help_explains_every_command(cli) -> None:
    result = cli("--help")
    assert result.exit_code == 0
    for command in ("ingest", "search", "serve", "calibrate", "db"):
        assert command in result.output


def test_ingest_then_search_json(cli) -> None:
    first = cli("ingest")
    assert first.exit_code == 0, first.output
    assert "12 chunks of 1 module: added 12, updated 0, removed 0, unchanged 0" in first.output
    again = cli("ingest")
    assert "added 0, updated 0, removed 0" in again.output and "(0 embeddings computed)" in again.output
    result = cli("search", "why keep an fp32 master copy", "--module", MODULE_ID, "--k", "2", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert len(rows) == 2
    assert set(rows[0]) == {"chunk_id", "section_id", "section_title", "text", "score"}


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("search", ""), "query: must contain some text"),
        (("search", "zero", "--module", "nope"), "unknown module"),
        (("search", "zero", "--k", "0"), "k: must be between 1 and 50"),
    ],
)
def test_bad_input_exits_2_with_one_line(cli, args, fragment) -> None:
    result = cli(*args)
    assert result.exit_code == 2
    assert fragment in result.output and "Traceback" not in result.output


def test_ask_logs_a_signal_and_signals_commands_read_it(cli, tmp_path) -> None:
    import csv

    result = cli("ask", "int4 70B, my email is someone@example.com", "--json")
    assert result.exit_code == 0, result.output
    answer = json.loads(result.output[result.output.index("{") :])
    assert answer["tool_calls"][0]["name"] == "quantized_size"
    out = tmp_path / "signals.csv"
    exported = cli("signals", "export", "--format", "csv", "--out", str(out))
    assert exported.exit_code == 0 and "wrote 1 records" in exported.output
    (row,) = list(csv.DictReader(out.open()))
    assert row["question_id"] == answer["question_id"] and "someone@example.com" not in row["text"]
    summary = cli("signals", "summary", "--since", "7d")
    assert summary.exit_code == 0 and "fewer than 5 distinct learners" in summary.output
    assert cli("signals", "purge", "--older-than", "180d").output.startswith("purged 0 questions")
    assert cli("signals", "purge", "--older-than", "soon").exit_code == 2
    assert cli("signals", "export", "--format", "pdf").exit_code == 2
    assert cli("ask", "").exit_code == 2


def test_db_upgrade_brings_a_new_database_to_the_latest_schema_and_says_so(cli, tmp_path, monkeypatch) -> None:
    from mentor.db import make_engine
    from mentor.signals.schema import schema_behind

    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    monkeypatch.setenv("MENTOR_DATABASE_URL", url)
    assert "mentor db upgrade" in schema_behind(make_engine(url))
    result = cli("db", "upgrade")
    assert result.exit_code == 0, result.output
    assert "up to date" in result.output and schema_behind(make_engine(url)) is None


def test_a_shared_configuration_without_its_secrets_is_refused_in_one_line(cli, monkeypatch) -> None:
    monkeypatch.setenv("MENTOR_REDIS_URL", "redis://127.0.0.1:6379/11")
    monkeypatch.delenv("MENTOR_PSEUDONYM_KEY", raising=False)
    monkeypatch.delenv("MENTOR_ANALYST_TOKEN", raising=False)
    result = cli("ask", "what is ZeRO?")
    assert result.exit_code != 0
    assert result.output.strip().splitlines()[-1].startswith("error: MENTOR_ANALYST_TOKEN must be set when Redis")
