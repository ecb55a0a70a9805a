"""Chat on a line of its own before or after a question is read as its own clause and left out ("whats the one mental
model i should keep from all this" then, after a blank line, "thanks in advance!" was refused: the text the reader
was given had its line breaks collapsed into spaces when the placeholders of redacted details were dropped, so the
two lines were one clause).

The cases are generated: every question the robustness sweeps rewrite (single-turn, in-scope dev questions) that is
answered bare, with a chat line of the held-out acts set (written before the reader, never tuned on) on a line of its
own after it, or before it, in turn. Written, and run once, before the change it measures.
"""

from __future__ import annotations

import json

import pytest

from mentor.evaluate.golden import load_golden
from mentor.evaluate.sweeps import sweep_cases

from .chat_helpers import answered_alike, ask_module
from .conftest import ROOT

QUESTIONS = [case.question for case in sweep_cases(load_golden(ROOT / "eval" / "golden.jsonl", "dev"))]
CHAT = [
    row["text"]
    for line in (ROOT / "eval" / "understanding" / "heldout" / "acts.jsonl").read_text().splitlines()
    if (row := json.loads(line))["act"] == "chatter"
]


@pytest.fixture(scope="module")
def outcomes(runtime) -> list[tuple[str, bool]]:
    found = []
    for turn, question in enumerate(QUESTIONS):
        bare = ask_module(runtime, question)
        if bare.answer.out_of_scope:
            continue
        chat = CHAT[turn % len(CHAT)]
        message = f"{question}\n\n{chat}" if turn % 2 == 0 else f"{chat}\n{question}"
        found.append((message, answered_alike(ask_module(runtime, message), bare)))
    return found


def test_the_cases_are_generated(outcomes) -> None:
    assert len(outcomes) >= 100, len(outcomes)


def test_chat_on_a_line_of_its_own_leaves_the_question_as_it_is(outcomes) -> None:
    moved = [message for message, same in outcomes if not same]
    print(f"\nchat on a line of its own: {len(outcomes) - len(moved)} of {len(outcomes)} answered as the question")
    # 116 of 128 before the line breaks were kept (`privacy.without_placeholders`), 124 after.
    assert len(moved) <= 4, moved
