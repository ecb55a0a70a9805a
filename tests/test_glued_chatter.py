"""Chat glued to a question with no mark between them ("hey quick question tl;dr on the memory hog thing", "how does
pipeline parallel work thanks in advance") is answered as the question alone is, and glued to an off-topic question
it makes nothing in scope.

The questions are generated: every question the robustness sweeps rewrite (single-turn, in-scope dev cases) that
is answered bare, with one opener or closer below glued to it (lower case, its final mark kept), taken in turn;
and every off-topic question of the sweeps with an opener. The openers and closers are not the sweep's chatter
templates (those put a mark between: "hey! ... thx"). Written, and run once, before the change they measure.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from mentor.answer import ChatInput
from mentor.evaluate.golden import load_golden
from mentor.evaluate.sweeps import OFF_TOPIC_QUESTIONS, sweep_cases

from .conftest import MODULE_ID, ROOT

OPENERS = (
    "hi there i was wondering",
    "sorry to bother you but",
    "thanks that helped a lot now",
    "ok cool makes sense and",
    "hey quick question",
    "hello again so",
    "sorry if this is a silly question but",
    "my exam is tomorrow and",
    "i have been reading the notes and",
    "good evening mentor",
)
CLOSERS = ("thanks in advance", "sorry for the long question", "any help appreciated", "cheers")


def glued(question: str, turn: int) -> str:
    """`question` with chat glued before it (two turns in three) or after it, chosen by `turn`."""
    lowered = question[:1].lower() + question[1:]
    if turn % 3 == 2:
        return f"{lowered.rstrip('?.! ')} {CLOSERS[turn // 3 % len(CLOSERS)]}"
    return f"{OPENERS[turn % len(OPENERS)]} {lowered}"


QUESTIONS = [case.question for case in sweep_cases(load_golden(ROOT / "eval" / "golden.jsonl", "dev"))]


def refused(runtime, message: str) -> bool:
    return asyncio.run(runtime.chat.ask(ChatInput(message=message, module_id=MODULE_ID))).answer.out_of_scope


@pytest.fixture(scope="module")
def outcomes(runtime) -> list[tuple[str, bool]]:
    answered = [question for question in QUESTIONS if not refused(runtime, question)]
    return [(glued(q, turn), refused(runtime, glued(q, turn))) for turn, q in enumerate(answered)]


def test_the_cases_are_generated() -> None:
    assert glued("What is ZeRO?", 0) == "hi there i was wondering what is ZeRO?"
    assert glued("What is ZeRO?", 2) == "what is ZeRO thanks in advance"
    assert len(QUESTIONS) > 100


def test_chat_glued_to_a_covered_question_does_not_make_it_refused(outcomes) -> None:
    wrongly = [message for message, no in outcomes if no]
    print(f"\nglued chatter: {len(wrongly)} of {len(outcomes)} refused")
    assert len(wrongly) <= 1, wrongly[:20]  # 2 of 126 before the cut, 1 of 128 after


def test_chat_glued_to_an_off_topic_question_leaves_it_refused(runtime) -> None:
    answered = [m for turn, q in enumerate(OFF_TOPIC_QUESTIONS) if not refused(runtime, m := glued(q, turn))]
    assert not answered, answered


def test_held_out_chat_glued_to_a_covered_question_does_not_make_it_refused(runtime) -> None:
    """The held-out acts set's chat lines (written before the reader, never tuned on), glued by a space before or
    after the sweep's questions answered bare, in turn."""
    lines = (ROOT / "eval" / "understanding" / "heldout" / "acts.jsonl").read_text().splitlines()
    chat = [row["text"] for line in lines if (row := json.loads(line))["act"] == "chatter"]
    answered = [question for question in QUESTIONS if not refused(runtime, question)]
    messages = [
        f"{chat[turn % len(chat)]} {q}" if turn % 2 == 0 else f"{q} {chat[turn % len(chat)]}"
        for turn, q in enumerate(answered)
    ]
    wrongly = [message for message in messages if refused(runtime, message)]
    print(f"\nheld-out chat glued: {len(wrongly)} of {len(messages)} refused")
    assert len(wrongly) <= 1, wrongly  # 2 of 128 before the cut, 1 of 128 after


def test_a_cut_takes_off_chat_and_never_a_word_of_the_question(runtime) -> None:
    """One word cut off is chat only when it greets, thanks or says goodbye ("do | scaling laws still hold ...?" was
    cut on the held-out split and answered with data-parallel lines); a side naming a module word is no chat."""
    catalog = runtime.chat.catalog
    words = catalog.retriever.modules[MODULE_ID].words

    def cuts(message: str) -> list[str]:
        return [written for written, _, _ in catalog.reader.glued(catalog.reader.read(message, words=words), words)]

    assert "how does the pipeline bubble shrink" in cuts("thanks how does the pipeline bubble shrink")
    assert not any(cut.startswith("scaling laws") for cut in cuts("do scaling laws still hold for repeated data?"))
    assert "what does stage 2 add" not in cuts("zero stage 1 is clear what does stage 2 add")
    assert cuts("how long should I boil an egg for a runny yolk") == []  # naming nothing of the module: no pass
