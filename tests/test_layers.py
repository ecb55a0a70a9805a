"""The shape STYLE.md asks for, checked: data flows one way (the layer table of docs/architecture.md, executable),
the question is read in one place, and the question path stays readable."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from .conftest import ROOT

QUESTION_PATH = ("chat.py", "consult.py", "respond.py", "intake.py", "retrieve.py", "grounding.py", "citations.py")
QUESTION_DIRS = ("understanding", "engines")
MAX_FUNCTION_LINES = 70
MAX_CHAT_LINES = 250


def test_no_import_runs_back_up_the_layers() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "1 kept, 0 broken" in result.stdout


def test_only_the_reader_cuts_a_message_by_its_syntax() -> None:
    """Nothing downstream imports a question pattern: the clause syntax is the reader's alone."""
    importers = [
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "mentor").rglob("*.py")
        if "understanding.clauses" in path.read_text() and path.parent.name != "understanding"
    ]
    assert importers == []


def test_the_question_path_reads_in_one_sitting() -> None:
    files = [ROOT / "mentor" / name for name in QUESTION_PATH]
    files += [p for d in QUESTION_DIRS for p in sorted((ROOT / "mentor" / d).glob("*.py"))]
    long = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.name}:{node.name} ({lines} lines)")
    assert long == []
    assert len((ROOT / "mentor/chat.py").read_text().splitlines()) <= MAX_CHAT_LINES
