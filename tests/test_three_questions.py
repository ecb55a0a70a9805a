"""Three questions written as one message are each answered: learners paste a list of what they want to know.

The cases are generated, not picked, the way tests/test_joined_questions.py draws its pairs: triples of the sweeps'
questions (single-turn dev questions in scope) whose golden expectations share no section, drawn with a fixed seed
from the golden set alone, each joined in one of three ways. An answer must cite one of the expected sections of
every question. Two draws, written and run once before the round they measure (docs/eval-notes.md, seventeenth
round): the round was designed from the first draw's failures; the second's were not read.
"""

from __future__ import annotations

import random

from mentor.evaluate.golden import load_golden
from mentor.evaluate.sweeps import sweep_cases

from .chat_helpers import ask_module as ask
from .chat_helpers import cited_sections as sections
from .conftest import ROOT

TRIPLES = 40
SEED_DESIGN = 5
JOINS_DESIGN = ("{a}? {b}? {c}", "{a}, {b} and {c}", "1. {a}\n2. {b}\n3. {c}")
SEED_MEASURE = 6
JOINS_MEASURE = ("{a}. {b}. {c}", "{a}; {b}; also {c}", "- {a}?\n- {b}?\n- {c}")

Drawn = tuple[tuple[str, frozenset[str]], ...]


def triples(seed: int) -> list[Drawn]:
    """`TRIPLES` triples of sweep questions, no two of a triple sharing an expected section, each question with its
    expected sections."""
    cases = sweep_cases(load_golden(ROOT / "eval" / "golden.jsonl", "dev"))
    questions = [(c.question, frozenset(c.expect.sections)) for c in cases if c.expect.sections]
    rng = random.Random(seed)
    found: list[Drawn] = []
    while len(found) < TRIPLES:
        drawn = tuple(rng.sample(questions, 3))
        disjoint = all(not x[1] & y[1] for i, x in enumerate(drawn) for y in drawn[i + 1 :])
        if disjoint and drawn not in found:
            found.append(drawn)
    return found


def answered(runtime, drawn: list[Drawn], joins: tuple[str, ...]) -> list[tuple[str, int]]:
    """Each triple joined in turn by `joins`, asked as one message: how many of its questions the answer cites."""
    found = []
    for index, triple in enumerate(drawn):
        a, b, c = (question.rstrip(" ?") for question, _ in triple)
        message = joins[index % len(joins)].format(a=a, b=b, c=c)
        cited = sections(ask(runtime, message))
        found.append((message, sum(bool(cited & expected) for _, expected in triple)))
    return found


def missed(outcomes: list[tuple[str, int]], draw: str) -> tuple[list[str], int]:
    """The messages of `outcomes` not answered in all three questions, and the questions answered in all, printed
    with the draw's figures."""
    short = [message for message, count in outcomes if count < 3]
    parts = sum(count for _, count in outcomes)
    print(short)
    print(
        f"\n{draw}: {len(outcomes) - len(short)} of {len(outcomes)} answered in all three; {parts} of "
        f"{3 * len(outcomes)} questions"
    )
    return short, parts


def test_the_triples_are_drawn_from_the_golden_set_alone() -> None:
    for seed in (SEED_DESIGN, SEED_MEASURE):
        drawn = triples(seed)
        assert drawn == triples(seed) and len(drawn) == TRIPLES
        assert all(not x[1] & y[1] for t in drawn for i, x in enumerate(t) for y in t[i + 1 :])
    assert not set(triples(SEED_DESIGN)) & set(triples(SEED_MEASURE))


def test_every_question_of_three_is_answered(runtime) -> None:
    short, parts = missed(answered(runtime, triples(SEED_DESIGN), JOINS_DESIGN), "three questions")
    # 13 of 40 in all three, 88 of 120 questions, when written (5c29559); 24 and 103 after the round it designed
    # (docs/eval-notes.md, seventeenth round). A floor, not a target.
    assert len(short) <= 16 and parts >= 103, short


def test_every_question_of_another_three_is_answered(runtime) -> None:
    short, parts = missed(answered(runtime, triples(SEED_MEASURE), JOINS_MEASURE), "another three")
    # 14 of 40 in all three, 90 of 120 questions, when written (5c29559); 19 and 95 after the seventeenth round,
    # designed without reading its failures. A floor, not a target.
    assert len(short) <= 21 and parts >= 95, short
