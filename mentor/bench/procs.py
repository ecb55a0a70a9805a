"""Subprocess helpers for the benchmark: free ports, start/wait/stop servers, read CPU and memory from /proc."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 10.0


def free_port() -> int:
    """A port nobody listens on right now (the OS picks it; a tiny race with other programs is accepted)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any MENTOR_* or OPENAI_* variable, plus `extra` and offline flags.

    A developer's own MENTOR_LLM_BASE_URL or OPENAI_API_KEY must not leak into a configuration under test.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MENTOR_", "OPENAI_"))}
    return env | {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"} | extra


def python_code(code: str) -> list[str]:
    """argv that runs `code` with this interpreter (`-c` avoids runpy's double import of `-m` modules)."""
    return [sys.executable, "-c", code]


def run_child(module: str, spec: object, *, timeout_s: float, what: str) -> Any:
    """Run `module.main()` in a child process, `spec` (a dataclass) as JSON on stdin; return its JSON stdout.

    A measurement in a process of its own: the bench's own imports and threads do not share its CPU or its GIL.
    """
    done = subprocess.run(
        python_code(f"from {module} import main; main()"),
        input=json.dumps(asdict(spec)),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=ROOT,
        env=clean_env(),
    )
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


def spawn(argv: list[str], *, env: Mapping[str, str], log_path: Path) -> subprocess.Popen:
    """Start a server process whose output goes to `log_path` (read back when it fails to start)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        return subprocess.Popen(argv, env=dict(env), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)


def wait_ready(url: str, process: subprocess.Popen, log_path: Path, *, timeout_s: float = START_TIMEOUT_S) -> None:
    """Poll `url` until it answers 200; fail early, with the log's tail, if the process exits."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{url}: server exited with {process.returncode}:\n{tail(log_path)}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url}: not ready after {timeout_s:.0f} s:\n{tail(log_path)}")


def stop(process: subprocess.Popen) -> None:
    """SIGTERM (uvicorn shuts down gracefully), then SIGKILL if it lingers."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=STOP_TIMEOUT_S)


def tail(path: Path, lines: int = 30) -> str:
    """The last lines of a log file, or a note that there is none."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no log at {path})"


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, all its threads included (/proc/<pid>/stat fields 14 and 15)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    # The command name (field 2) may contain spaces and parentheses: split after its closing parenthesis.
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def peak_rss_mb(pid: int) -> float:
    """Peak resident set size (VmHWM) of a live process, in MiB."""
    return _status_mb(pid, "VmHWM")


def rss_mb(pid: int) -> float:
    """Resident set size (VmRSS) of a live process now, in MiB."""
    return _status_mb(pid, "VmRSS")


def _status_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} for process {pid}")


def machine_info() -> dict[str, object]:
    """What the numbers were measured on."""
    cpu_model = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu_model = line.split(":", 1)[1].strip()
            break
    mem_kb = next(
        int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal:")
    )
    return {
        "cpu_model": cpu_model,
        "cores": os.cpu_count(),
        "memory_gb": round(mem_kb / 1024 / 1024, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "load_average_at_start": float(Path("/proc/loadavg").read_text().split()[0]),
    }


def machine_busy_seconds() -> float:
    """CPU time all processes on the machine have used since boot (/proc/stat: user, nice, system, irq, softirq)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[:7])
    return (user + nice + system + irq + softirq) / CLOCK_TICKS


def own_cpu_seconds() -> float:
    """CPU time of this process and of every child it has waited for (servers and load generators)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system
