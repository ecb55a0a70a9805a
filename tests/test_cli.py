"""The `mentor` command line, run in-process with a private data directory."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mentor.cli import app

from .conftest import MODULE_ID, ROOT


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
    rows = json.loads(result.stdout)  # stdout is the JSON alone; the log lines went to stderr
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


def test_ask_reports_the_answers_latency_not_the_start_up(cli) -> None:
    result = cli("ask", "what does ZeRO stage 2 shard?")
    assert result.exit_code == 0, result.output
    last = result.output.strip().splitlines()[-1]
    found = re.fullmatch(r"-- \w+, grounded, answered in (\d+) ms \(start-up ([\d.]+) s\), conversation \w+", last)
    assert found, last
    # The start-up loads the embedding model and runs every stage once (seconds); the answer then takes what a
    # running server's would. Before, the first embedding loaded the model inside the measured answer.
    answered_ms, startup_s = int(found[1]), float(found[2])
    assert answered_ms < startup_s * 1000 / 2, last


def run_with_stderr_on_a_terminal(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """Run `args` with stderr on a pseudo-terminal (as in a shell) and stdout on a pipe (as in `| jq`)."""
    main, terminal = pty.openpty()
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=terminal, stdin=subprocess.DEVNULL, env=env)
    os.close(terminal)
    drawn = b""
    while True:
        ready, _, _ = select.select([main], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            drawn += chunk
        elif process.poll() is not None:
            break
    out = process.stdout.read().decode()
    os.close(main)
    return process.wait(timeout=60), out, drawn.decode(errors="replace")


def test_progress_is_drawn_on_a_terminals_stderr_and_never_on_stdout(tmp_path) -> None:
    mentor = str(Path(sys.executable).parent / "mentor")
    out = tmp_path / "signals.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MENTOR_")}
    env |= {"MENTOR_DATA_DIR": str(tmp_path / "data"), "TERM": "xterm", "COLUMNS": "100"}
    args = [mentor, "signals", "export", "--out", str(out)]

    code, stdout, stderr = run_with_stderr_on_a_terminal(args, env)
    assert code == 0 and stdout == f"wrote 0 records to {out}\n"  # results alone on stdout
    assert f"writing {out}" in stderr and "━" in stderr, stderr  # the bar, on the terminal

    # Not a terminal (a log file, CI): no bar at all.
    piped = subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert piped.returncode == 0 and piped.stdout == stdout and "━" not in piped.stderr, piped.stderr

    # JSON log lines: every line on stderr is an object, so no bar either.
    code, stdout, stderr = run_with_stderr_on_a_terminal(args, env | {"MENTOR_LOG_FORMAT": "json"})
    assert code == 0 and stdout == f"wrote 0 records to {out}\n" and "━" not in stderr, stderr
