"""The `mentor` command line, run in-process with a private data directory."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mentor.cli import app

from .conftest import MODULE_ID, ROOT, free_port


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


MENTOR = str(Path(sys.executable).parent / "mentor")  # the console script, as a learner's shell runs it


def command_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a `mentor` command a learner types: no MENTOR_* of the tests, a private data directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MENTOR_")}
    return env | {"MENTOR_DATA_DIR": str(data_dir), "COLUMNS": "120"} | extra


def ask_timed(env: dict[str, str], *args: str) -> tuple[list[str], dict[str, float]]:
    """Run `mentor ask ARGS` in its own process; its stdout lines, and the wall-clock seconds from launching it to
    each line's arrival (click flushes every line it echoes)."""
    started = time.monotonic()
    process = subprocess.Popen(
        [MENTOR, "ask", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT
    )
    lines, arrived = [], {}
    for line in process.stdout:
        lines.append(line.rstrip("\n"))
        arrived[lines[-1]] = time.monotonic() - started
    stderr = process.stderr.read()
    assert process.wait(timeout=300) == 0, stderr
    return lines, arrived


TIMINGS = re.compile(
    r"-- (?P<engine>\w+), grounded, answered in (?P<answer_ms>\d+) ms; (?P<total>[\d.]+) s since the command "
    r"started \(imports (?P<imports>[\d.]+) s, model (?P<model>[\d.]+) s, index (?P<index>[\d.]+) s, "
    r"warm-up (?P<warm>[\d.]+) s\)"
)
FOLLOW_UP = re.compile(r'-- conversation (?P<id>[0-9a-f]{32}): follow up with  mentor ask --conversation (?P=id) "..."')


@pytest.mark.slow
def test_ask_times_each_stage_from_the_process_start_and_a_second_ask_continues_its_conversation(tmp_path) -> None:
    env = command_env(tmp_path / "data")
    lines, arrived = ask_timed(env, "what does ZeRO stage 1 shard?")
    timings = TIMINGS.fullmatch(lines[-2])
    assert timings, lines
    # Honest: the total counts from the process's start (Python's start-up and the imports included), so it is
    # the wall clock a shell measures up to that line. It read "start-up 3.5 s" for a first ask of 11 s.
    total, wall = float(timings["total"]), arrived[lines[-2]]
    assert wall - 1.0 < total <= wall + 0.1, (total, wall)
    stages = sum(float(timings[name]) for name in ("imports", "model", "index", "warm"))
    assert total - 2.0 < stages <= total + 0.2, lines[-2]  # every stage named: nothing long goes unreported
    assert float(timings["imports"]) > 0.3  # torch-free, still a few hundred ms of libraries at least
    assert int(timings["answer_ms"]) < 1000 * total / 4  # the answer's own latency, not the start's
    # The id to continue with, and the command that does it.
    printed = FOLLOW_UP.fullmatch(lines[-1])
    assert printed, lines[-1]
    conversation = printed["id"]
    assert (tmp_path / "data" / "conversations" / f"{conversation}.json").is_file()

    # Another process, later: the follow-up is read against the first question, as it is on the server.
    follow, _ = ask_timed(env, "and what about stage 3?", "--conversation", conversation, "--json")
    answer = json.loads("\n".join(follow))
    assert answer["conversation_id"] == conversation
    assert answer["reading"]["continues"] is True
    assert answer["retrieval_query"] == "what does ZeRO stage 1 shard? and what about stage 3?"
    assert "parameters" in answer["answer"]  # what stage 3 shards besides stage 1's optimizer states

    # An id no `ask` printed is refused in one line, after which nothing was kept.
    refused = subprocess.run(
        [MENTOR, "ask", "and stage 2?", "--conversation", "0" * 32],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert refused.returncode == 2
    assert refused.stderr.splitlines()[-1] == f"error: conversation {'0' * 32} not found for this learner and module"


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


@pytest.mark.slow
def test_a_first_start_says_what_it_does_before_each_long_step_and_where_it_is_ready(tmp_path) -> None:
    """`mentor serve` with nothing cached (the model not exported yet, an empty data directory): ~25 s here."""
    import httpx

    port = free_port()
    cache = tmp_path / "model-cache"
    env = command_env(tmp_path / "data", MENTOR_MODEL_CACHE_DIR=str(cache))
    process = subprocess.Popen(
        [MENTOR, "serve", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    messages: list[str] = []
    try:
        for line in process.stderr:  # plain log lines: "time LEVEL logger: message"
            messages.append(line.rstrip("\n").split(": ", 1)[-1])
            if messages[-1].startswith("mentor ready at ") or len(messages) > 500:
                break
        url = f"http://127.0.0.1:{port}"
        assert messages[-1] == f"mentor ready at {url} — the box at /, the dashboard at /dashboard, the API at /docs"
        # Said once the port is open: the address answers at once.
        assert httpx.get(f"{url}/", timeout=10).status_code == 200
    finally:
        process.terminate()
        process.wait(timeout=60)
    # Each long step is announced before it starts, and says how long it took when done (the export alone sat
    # 9.7 s in silence before; indexing and the reader's examples a further ~30 s on a busy machine).
    said = re.escape
    expected = [
        said("mentor 0.1.0 starting: loading its libraries…"),
        said("loading the embedding model and the index…"),
        said("indexing: embedding 12 new chunks of 1 module…"),
        said(f"exporting all-MiniLM-L6-v2 to ONNX into {cache} (first start only, ~10 s)…"),
        r"exported all-MiniLM-L6-v2 to ONNX in [\d.]+ s \(max diff vs torch .*\)",
        said("quantizing the ONNX model to int8 (first start only, ~5 s)…"),
        r"quantized the ONNX model to int8 in [\d.]+ s .*",
        r"index mentor_chunks: added 12, updated 0, removed 0, unchanged 0 \(12 embeddings computed\) in [\d.]+ s",
        said("building the reader from its labelled examples…"),
        rf"embedding \d+ texts \(examples-acts\) once; later starts read them from {said(str(cache))}",
        r"reader built in [\d.]+ s",
        said("warming up: running every answer stage once…"),
        r"mentor ready: 12 chunks of 1 module \(added 12, .*\), warmed up in [\d.]+ s",
        r"mentor ready at .*",
    ]
    position = 0
    for pattern in expected:
        found = next((i for i in range(position, len(messages)) if re.fullmatch(pattern, messages[i])), None)
        assert found is not None, (pattern, messages[position:])
        position = found + 1
