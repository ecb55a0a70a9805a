"""The scope calibration set is labelled data the threshold is fitted on: it must stay apart from the golden set
(which measures the result) and hold enough of each class to fit on."""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path

from mentor.scope import load_labelled

ROOT = Path(__file__).resolve().parents[1]
SCOPE_SET = ROOT / "eval/calibration/scope.jsonl"
GOLDEN = ROOT / "eval/golden.jsonl"


def normal(text: str) -> str:
    """Lowercase words only: "Which paper introduced ZeRO?" and "which paper introduced zero" are one question."""
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def golden_turns() -> list[str]:
    turns: list[str] = []
    for line in GOLDEN.read_text(encoding="utf-8").splitlines():
        if line.strip():
            turns.extend(t for t in json.loads(line).get("turns", []) if isinstance(t, str))
    return turns


def test_every_line_is_a_question_with_a_boolean_label() -> None:
    for n, line in enumerate(SCOPE_SET.read_text(encoding="utf-8").splitlines(), start=1):
        row = json.loads(line)
        assert set(row) == {"module_id", "q", "in_scope"}, f"line {n}: {row}"
        assert isinstance(row["in_scope"], bool), f"line {n}: label must be true or false"
        assert row["q"].strip() == row["q"] and row["q"], f"line {n}: empty or padded question"


def test_set_is_big_enough_and_leans_in_scope() -> None:
    labelled = load_labelled(SCOPE_SET)
    share = sum(row.in_scope for row in labelled) / len(labelled)
    assert len(labelled) >= 250
    assert 0.55 <= share <= 0.65, f"in-scope share {share:.2f}"


def test_no_question_appears_twice() -> None:
    questions = [normal(row.question) for row in load_labelled(SCOPE_SET)]
    repeated = sorted({q for q in questions if questions.count(q) > 1})
    assert not repeated


def near_copy(a: str, b: str) -> bool:
    """Same question with a word or a few letters changed: nearly the same characters or nearly the same words.
    Two short questions on different topics ("what is data parallelism" / "what's tensor parallelism") are not."""
    words_a, words_b = set(a.split()), set(b.split())
    overlap = len(words_a & words_b) / len(words_a | words_b)
    return difflib.SequenceMatcher(None, a, b).ratio() >= 0.9 or overlap >= 0.75


def test_near_copy_tells_a_reworded_question_from_a_different_one() -> None:
    assert near_copy(normal("Which paper introduced ZeRO?"), normal("which paper introduced zero"))
    assert near_copy(normal("what does zero stage 3 shard"), normal("what does zero-3 shard?"))
    assert not near_copy(normal("what is data parallelism"), normal("what's tensor parallelism"))


def test_no_question_is_copied_or_lightly_reworded_from_the_golden_set() -> None:
    golden = [normal(t) for t in golden_turns()]
    close = [(r.question, g) for r in load_labelled(SCOPE_SET) for g in golden if near_copy(normal(r.question), g)]
    assert not close
