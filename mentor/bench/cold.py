"""Start-up figures: the first answer of a freshly started `mentor serve`, and the wall time of CLI calls.

`first_answers` starts `mentor serve` (on a data directory that is already ingested, as a restart would), polls
/readyz until it answers 200, then times the first question, a new one, and a second new one after it: a server
that warmed every stage before saying it was ready answers the first as fast as the second.

`cli_times` runs `mentor --help` and `mentor ask --json "<new question>"` in fresh processes and times them from
the outside (interpreter start, imports, model and index load, the answer), as a user waits for them.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx

from mentor.bench.procs import ROOT, START_TIMEOUT_S, peak_rss_mb, rss_mb, spawn, stop, tail

POLL_S = 0.02  # /readyz is polled this often: the time to ready is known to about this


def first_answers(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    url: str,
    questions: Sequence[str],
    runs: int,
    log_dir: Path,
) -> dict:
    """Start the server `runs` times; each time wait for /readyz, then time two new questions (2 per run)."""
    results = []
    for run in range(runs):
        log_path = log_dir / f"first-answer-{run}.log"
        started = time.perf_counter()
        process = spawn(list(argv), env=env, log_path=log_path)
        try:
            ready_s = _wait_ready(url + "/readyz", process, log_path) - started
            with httpx.Client(base_url=url, timeout=60) as client:
                first_ms, first_engine = _ask(client, questions[2 * run], run)
                second_ms, second_engine = _ask(client, questions[2 * run + 1], run)
            results.append(
                {
                    "ready_s": ready_s,
                    "first_ms": first_ms,
                    "second_ms": second_ms,
                    "engines": [first_engine, second_engine],
                    "rss_mb": rss_mb(process.pid),
                    "peak_rss_mb": peak_rss_mb(process.pid),
                    # The server must not need torch with the ONNX backend: is libtorch mapped into it?
                    "torch_loaded": _maps_torch(process.pid),
                }
            )
        finally:
            stop(process)
    return {
        "runs": results,
        "first_answer_ms": statistics.median(r["first_ms"] for r in results),
        "second_answer_ms": statistics.median(r["second_ms"] for r in results),
        "ready_s": statistics.median(r["ready_s"] for r in results),
    }


def _wait_ready(url: str, process: subprocess.Popen, log_path: Path) -> float:
    """Poll until `url` answers 200; return when it did (perf_counter)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    with httpx.Client(timeout=2) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"{url}: server exited with {process.returncode}:\n{tail(log_path)}")
            try:
                if client.get(url).status_code == 200:
                    return time.perf_counter()
            except httpx.HTTPError:
                pass
            time.sleep(POLL_S)
    raise RuntimeError(f"{url}: not ready after {START_TIMEOUT_S:.0f} s:\n{tail(log_path)}")


def _ask(client: httpx.Client, question: str, run: int) -> tuple[float, str]:
    began = time.perf_counter()
    response = client.post("/v1/chat", json={"message": question, "learner_id": f"bench-first-{run}"})
    elapsed_ms = (time.perf_counter() - began) * 1000
    response.raise_for_status()
    body = response.json()
    return elapsed_ms, body["engine"] + (f"/fallback:{body['fallback_reason']}" if body.get("fallback_reason") else "")


def _maps_torch(pid: int) -> bool:
    return "libtorch" in Path(f"/proc/{pid}/maps").read_text()


def mentor_argv() -> list[str]:
    """How a user runs `mentor`: the console script installed beside this interpreter, else the same entry point."""
    script = Path(sys.executable).with_name("mentor")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from mentor.cli import app; sys.exit(app(prog_name='mentor'))"]


def cli_times(*, env: Mapping[str, str], questions: Sequence[str], help_runs: int = 3) -> dict:
    """Best wall time of `mentor --help` over `help_runs` fresh processes, and of `mentor ask` over one per
    question (each new; the data directory in `env` is already ingested)."""
    argv = mentor_argv()
    help_s = [_wall(argv + ["--help"], env)[0] for _ in range(help_runs)]
    ask_s, engines = [], []
    for question in questions:
        seconds, stdout = _wall(argv + ["ask", "--json", question], env)
        ask_s.append(seconds)
        engines.append(json.loads(stdout)["engine"])
    return {
        "cli_help_s": min(help_s),
        "cli_ask_cold_s": min(ask_s) if ask_s else None,
        "help_s": help_s,
        "ask_s": ask_s,
        "ask_engines": engines,
        "command": Path(argv[0]).name if len(argv) == 1 else "python -c (no console script)",
    }


def _wall(argv: list[str], env: Mapping[str, str]) -> tuple[float, str]:
    began = time.perf_counter()
    done = subprocess.run(argv, env=dict(env), cwd=ROOT, capture_output=True, text=True, timeout=300)
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[-2:])} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return seconds, done.stdout
