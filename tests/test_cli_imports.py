"""What a newcomer installs and types first: the runtime install, a light `mentor` that loads torch only for the
commands that embed, options refused before anything heavy loads, `--version`, and plain help.

Each command runs in a fresh interpreter (what a user's shell starts), which then reports the modules it imported.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

from .conftest import ROOT

MENTOR = Path(sys.executable).parent / "mentor"  # the console script pip installed
# What the embedding model drags in: seconds of start-up, and the reason `mentor --help` once took 5 s to fail.
MODEL = ("torch", "sentence_transformers", "transformers")
# The embedded index: needed to answer, not to print help, run a calculator or read the signals log.
INDEX = ("chromadb",)

# Runs the CLI as the console script does, then writes which of the watched modules got imported.
HARNESS = """
import json, sys
from mentor.cli import app
try:
    app(sys.argv[2:], prog_name="mentor")
    code = 0
except SystemExit as exc:
    code = exc.code or 0
watched = ("torch", "sentence_transformers", "transformers", "onnxruntime", "chromadb", "sklearn", "rich")
with open(sys.argv[1], "w") as out:
    json.dump({"code": code, "imported": [m for m in watched if m in sys.modules]}, out)
"""


def run_cli(tmp_path: Path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess, dict]:
    """`mentor ARGS` in a fresh interpreter with a private data directory; its output and what it imported."""
    report = tmp_path / f"imports-{len(list(tmp_path.glob('imports-*')))}.json"
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MENTOR_")}
    environment |= {"MENTOR_DATA_DIR": str(tmp_path / "data"), "COLUMNS": "120"} | env
    done = subprocess.run(
        [sys.executable, "-c", HARNESS, str(report), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=environment,
        timeout=120,
    )
    return done, json.loads(report.read_text())


def small_report(directory: Path) -> Path:
    """A report.json as `mentor eval --report` writes it, for three dev cases answered by hand (no model needed)."""
    from mentor.evaluate import CaseResult, compute_metrics, load_golden, write_report

    cases = [c for c in load_golden(ROOT / "eval" / "golden.jsonl", "dev") if c.corpus == "default"][:3]
    results = [CaseResult(case, answer="An answer.", out_of_scope=False, coverage="full") for case in cases]
    write_report(results, compute_metrics(results), directory)
    return directory


@pytest.mark.parametrize(
    ("args", "env"),
    [
        pytest.param(("--help",), {}, id="help"),
        pytest.param(("--version",), {}, id="version"),
        pytest.param(("ask", "--help"), {}, id="ask-help"),
        pytest.param(("calc", "--list"), {}, id="calc-list"),
        pytest.param(("calc", "training_memory", "--args", '{"params": "7B"}'), {}, id="calc"),
        pytest.param(("signals", "summary", "--since", "7d"), {}, id="signals-summary"),
        pytest.param(("signals", "purge", "--older-than", "180d"), {}, id="signals-purge"),
        pytest.param(("token", "learner-1", "--ttl", "30m"), {"MENTOR_LEARNER_TOKEN_SECRET": "s" * 32}, id="token"),
    ],
)
def test_commands_that_do_not_embed_never_import_the_model(tmp_path, args, env) -> None:
    done, seen = run_cli(tmp_path, *args, **env)
    assert seen["code"] == 0, done.stderr
    assert [m for m in (*MODEL, *INDEX) if m in seen["imported"]] == [], args
    if args[-1] in ("--help", "--version"):
        assert "rich" not in seen["imported"]  # plain help: not even the progress bars' library


def test_eval_export_from_a_report_writes_its_cases_without_the_model(tmp_path) -> None:
    report = small_report(tmp_path / "report")
    out = tmp_path / "records.jsonl"
    done, seen = run_cli(
        tmp_path, "eval", "export", "--from-report", str(report), "--format", "deepeval", "--out", str(out)
    )
    assert done.stdout.strip() == f"wrote 3 deepeval records to {out}", done.stderr
    # Only the stored records and the export code: neither the model nor the index the in-process runner opens.
    assert [m for m in (*MODEL, *INDEX) if m in seen["imported"]] == []
    kept = json.loads((report / "report.json").read_text())["cases"]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["name"] for r in records] == [case["id"] for case in kept]


def test_bad_options_fail_at_once_with_exit_2_and_a_plain_message(tmp_path) -> None:
    cases = [
        (("ask", "hi", "--style", "bogus"), "Invalid value for '--style': 'bogus' is not one of explain, hint, brief"),
        (("ask", "hi", "--stile", "hint"), "No such option: --stile"),
        (("eval", "--split", "test"), "'test' is not one of dev, heldout, fresh, all"),
        (("eval", "export", "--format", "csv"), "'csv' is not one of ragas, ragas-multiturn, deepeval"),
        (("signals", "export", "--format", "pdf"), "'pdf' is not one of csv, jsonl, xapi"),
        (("signals", "summary", "--bucket", "year"), "'year' is not one of day, week"),
        (("serve", "--workers", "0"), "Invalid value for '--workers'"),
    ]
    for args, message in cases:
        started = time.perf_counter()
        done, seen = run_cli(tmp_path, *args)
        elapsed = time.perf_counter() - started
        assert seen["code"] == 2, (args, done.stderr)
        assert message in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)
        assert done.stdout == ""
        # Refused while parsing: nothing of the model, the index or the runtime was loaded, so it takes a
        # fraction of a second (it took 5 s and more when `ask` checked --style after building the runtime).
        assert seen["imported"] == [], (args, seen)
        assert elapsed < 10, (args, elapsed)  # a bound only a regression to loading the model would break


def test_an_unknown_module_is_refused_from_the_corpus_front_matter_before_anything_heavy_loads(tmp_path) -> None:
    for args in (("ask", "what does ZeRO stage 1 shard?", "--module", "nope"), ("search", "ZeRO", "--module", "nope")):
        started = time.perf_counter()
        done, seen = run_cli(tmp_path, *args)
        elapsed = time.perf_counter() - started
        assert seen["code"] == 2, (args, done.stderr)
        # The message the runtime would give, naming the modules there are, as the only line on stderr.
        assert done.stderr == "error: unknown module 'nope'; known modules: P10.llm-systems-frontier.02\n", args
        assert done.stdout == ""
        # Neither the model (torch, or ONNX Runtime by default), nor the index, nor the reader's classifiers: it
        # loaded for 2.4 s and more before failing when the runtime's own check was the first. ~0.5 s here.
        assert seen["imported"] == [], (args, seen)
        assert elapsed < 10, (args, elapsed)  # a bound only a regression to loading the model would break


def test_help_is_quick_and_shows_flags_without_type_noise() -> None:
    timings = []
    for _ in range(3):
        started = time.perf_counter()
        done = subprocess.run([MENTOR, "--help"], capture_output=True, text=True, timeout=60, cwd=ROOT)
        timings.append(time.perf_counter() - started)
        assert done.returncode == 0, done.stderr
    # 0.1-0.3 s here; before, help imported rich for its boxes. The bound leaves room for a busy CI machine.
    assert min(timings) < 1.5, timings
    assert "--version" in done.stdout and "ask" in done.stdout and "eval" in done.stdout
    for command in (["ask"], ["bench"], ["eval"], ["signals", "export"], ["search"]):
        text = subprocess.run([MENTOR, *command, "--help"], capture_output=True, text=True, timeout=60).stdout
        assert "<bool>" not in text and "╭" not in text, (command, text)
    ask = subprocess.run([MENTOR, "ask", "--help"], capture_output=True, text=True, timeout=60).stdout
    assert re.search(r"^\s+--json\s+Print the full response object\.", ask, re.M), ask
    assert re.search(r"^\s+--style explain\|hint\|brief\s+How to answer\.", ask, re.M), ask


def test_version_is_the_installed_package_version() -> None:
    done = subprocess.run([MENTOR, "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert done.stdout == f"mentor {version('mentor')}\n" == f"mentor {project['version']}\n"


def test_choices_on_the_command_line_are_their_owners() -> None:
    from mentor import cli
    from mentor.answer import STYLES
    from mentor.evaluate.export import EXPORT_FORMATS
    from mentor.evaluate.golden import SPLITS
    from mentor.signals.exports import FORMATS

    assert cli.STYLES == STYLES
    assert (*SPLITS, "all") == cli.SPLITS
    assert cli.EVAL_FORMATS == EXPORT_FORMATS
    assert cli.SIGNAL_FORMATS == FORMATS


# --- the install ------------------------------------------------------------------------------------------------


DEV_ONLY_MODULES = (
    "pytest",
    "hypothesis",
    "httpx_sse",
    "schemathesis",
    "playwright",
    "axe_playwright_python",
    "ruff",
    "langchain_chroma",
    "langchain_openai",
)


def test_make_serve_installs_the_runtime_and_make_test_the_dev_extra(tmp_path) -> None:
    def planned(target: str) -> list[str]:
        venv = tmp_path / "venv"  # a fresh clone: no virtualenv yet, so every step is planned
        done = subprocess.run(
            ["make", "-n", f"VENV={venv}", target], capture_output=True, text=True, cwd=ROOT, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return [line for line in done.stdout.splitlines() if "pip install" in line and "--upgrade pip" not in line]

    # The runtime install (~2 GB the first time) shows pip's own progress, not --quiet minutes of silence.
    assert planned("serve") == [f"{tmp_path}/venv/bin/pip install -e ."]
    assert planned("test") == [f"{tmp_path}/venv/bin/pip install --quiet -e '.[dev]'"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = " ".join(project["dependencies"])
    assert "langchain-chroma" not in runtime and "langchain-openai" not in runtime and "pytest" not in runtime
    dev = " ".join(project["optional-dependencies"]["dev"])
    assert "langchain-chroma" in dev and "langchain-openai" in dev


def test_every_mentor_module_imports_without_the_dev_extra(tmp_path) -> None:
    """What `make serve` installs is enough to import all of mentor (the baseline loads its packages when run)."""
    code = f"""
import importlib, pkgutil, sys
for name in {DEV_ONLY_MODULES!r}:
    sys.modules[name] = None  # as if not installed: importing it raises ModuleNotFoundError
import mentor
failed = []
for info in pkgutil.walk_packages(mentor.__path__, "mentor."):
    if ".migrations" in info.name:
        continue  # Alembic's scripts, run by Alembic
    try:
        importlib.import_module(info.name)
    except ImportError as exc:
        failed.append(f"{{info.name}}: {{exc}}")
print("\\n".join(failed))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == ""
