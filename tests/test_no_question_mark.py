"""A question written without its question mark is answered as it is with one ("training a 1.3 billion param model
with AdamW, memory" was refused: its last word, alone after a comma, was read as chat and left out, so nothing was
left to compute).

The cases are generated: every question the robustness sweeps rewrite (single-turn, in-scope dev questions) that
ends with a question mark and is answered, written again without it. Written, and run once, before the change it
measures.
"""

from __future__ import annotations

import pytest

from mentor.evaluate.golden import load_golden
from mentor.evaluate.sweeps import sweep_cases

from .chat_helpers import answered_alike, ask_module
from .conftest import ROOT

QUESTIONS = [
    case.question
    for case in sweep_cases(load_golden(ROOT / "eval" / "golden.jsonl", "dev"))
    if case.question.rstrip().endswith("?")
]


@pytest.fixture(scope="module")
def outcomes(runtime) -> list[tuple[str, bool]]:
    found = []
    for question in QUESTIONS:
        asked = ask_module(runtime, question)
        if asked.answer.out_of_scope:
            continue
        bare = question.rstrip().rstrip("?").rstrip()
        found.append((bare, answered_alike(ask_module(runtime, bare), asked)))
    return found


def test_the_cases_are_generated(outcomes) -> None:
    assert len(outcomes) >= 80, len(outcomes)


def test_a_question_without_its_mark_is_answered_as_with_it(outcomes) -> None:
    moved = [message for message, same in outcomes if not same]
    print(f"\nwithout the question mark: {len(outcomes) - len(moved)} of {len(outcomes)} answered as with it")
    # 92 of 94 before a module word alone beside a question was read as its context without a mark; 93 after (left:
    # "how big is a 13B model at 8 bits" cites the quantization section, with the mark the number formats').
    assert len(moved) <= 1, moved
