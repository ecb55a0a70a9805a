"""Two questions written as one message are both answered: "half of a two-part question dropped" is a weakness the
brief names.

The cases are generated, not picked: pairs of the sweeps' questions (single-turn dev questions in scope) whose golden
expectations share no section, drawn with a fixed seed from the golden set alone (not from any answer, so a change
of answers draws the same pairs), each joined in one of three ways learners join questions. The joined answer must
cite one of the expected sections of each half. Written, and run once, before any change it measures.
"""

from __future__ import annotations

import random

import pytest

from mentor.evaluate.golden import load_golden
from mentor.evaluate.sweeps import sweep_cases

from .chat_helpers import ask_module as ask
from .chat_helpers import cited_sections as sections
from .conftest import ROOT

PAIRS = 60
SEED = 0
JOINS = ("{a} and {b}", "{a}? {b}", "{a}, also {b}")
# A second draw, written and run once before the round it measures (docs/eval-notes.md, fourteenth round): other
# pairs, joined in three other ways.
SEED_AGAIN = 1
JOINS_AGAIN = ("{a}. {b}", "{a}, and {b}", "{a}; {b}")
# A third draw, joined by no mark at all, written and run once before the round that cuts such joins (fourteenth).
SEED_UNMARKED = 2
JOINS_UNMARKED = ("{a} and {b}", "{a} also {b}")
# A fourth draw, the second question after a mark and opened by a connecting word, written and run once before the
# round it measures (docs/eval-notes.md, fifteenth round).
SEED_OPENED = 3
JOINS_OPENED = ("{a}? also {b}", "{a}. and {b}", "{a}? and also {b}")
# A fifth draw, the questions numbered or on lines of their own, as learners paste a list of questions, written and
# run once before the round it measures (docs/eval-notes.md, sixteenth round).
SEED_LISTED = 4
JOINS_LISTED = ("{a}?\n{b}", "1) {a}? 2) {b}", "1. {a}\n2. {b}", "- {a}?\n- {b}")


def pairs(
    seed: int = SEED, drawn_before: frozenset = frozenset()
) -> list[tuple[str, frozenset[str], str, frozenset[str]]]:
    """`PAIRS` pairs of sweep questions with disjoint expected sections, each with its expected sections; none of the
    pairs `drawn_before` (question pairs, either way round)."""
    cases = sweep_cases(load_golden(ROOT / "eval" / "golden.jsonl", "dev"))
    questions = [(c.question, frozenset(c.expect.sections)) for c in cases if c.expect.sections]
    rng = random.Random(seed)
    found: list[tuple[str, frozenset[str], str, frozenset[str]]] = []
    while len(found) < PAIRS:
        (a, sa), (b, sb) = rng.sample(questions, 2)
        if not sa & sb and (a, b) not in {(x, y) for x, _, y, _ in found} and frozenset((a, b)) not in drawn_before:
            found.append((a, sa, b, sb))
    return found


def unmarked_pairs() -> list[tuple[str, frozenset[str], str, frozenset[str]]]:
    """The third draw: pairs neither earlier draw holds."""
    before = frozenset(frozenset((a, b)) for seed in (SEED, SEED_AGAIN) for a, _, b, _ in pairs(seed))
    return pairs(SEED_UNMARKED, before)


def opened_pairs() -> list[tuple[str, frozenset[str], str, frozenset[str]]]:
    """The fourth draw: pairs no earlier draw holds."""
    earlier = [pairs(SEED), pairs(SEED_AGAIN), unmarked_pairs()]
    return pairs(SEED_OPENED, frozenset(frozenset((a, b)) for drawn in earlier for a, _, b, _ in drawn))


def listed_pairs() -> list[tuple[str, frozenset[str], str, frozenset[str]]]:
    """The fifth draw: pairs no earlier draw holds."""
    earlier = [pairs(SEED), pairs(SEED_AGAIN), unmarked_pairs(), opened_pairs()]
    return pairs(SEED_LISTED, frozenset(frozenset((a, b)) for drawn in earlier for a, _, b, _ in drawn))


def answered(runtime, drawn: list, joins: tuple[str, ...]) -> list[tuple[str, bool]]:
    """Each drawn pair joined in turn by `joins`, asked as one message: whether the answer cites both halves."""
    found = []
    for index, (a, sa, b, sb) in enumerate(drawn):
        message = joins[index % len(joins)].format(a=a.rstrip(" ?"), b=b)
        cited = sections(ask(runtime, message))
        found.append((message, bool(cited & sa) and bool(cited & sb)))
    return found


def missed(outcomes: list[tuple[str, bool]], draw: str) -> list[str]:
    """The messages of `outcomes` answered in one half or none, printed with the draw's figure."""
    halved = [message for message, both in outcomes if not both]
    print(halved)
    print(f"\n{draw}: {len(outcomes) - len(halved)} of {len(outcomes)} answered in both halves")
    return halved


@pytest.fixture(scope="module")
def outcomes(runtime) -> list[tuple[str, bool]]:
    return answered(runtime, pairs(SEED), JOINS)


def test_the_pairs_are_drawn_from_the_golden_set_alone() -> None:
    draws = [pairs(SEED), pairs(SEED_AGAIN), unmarked_pairs(), opened_pairs(), listed_pairs()]
    assert draws == [pairs(SEED), pairs(SEED_AGAIN), unmarked_pairs(), opened_pairs(), listed_pairs()]
    for drawn in draws:
        assert len(drawn) == PAIRS and all(not sa & sb for _, sa, _, sb in drawn)
    unordered = [{frozenset((a, b)) for a, _, b, _ in drawn} for drawn in draws]
    assert not unordered[0] & unordered[2] and not unordered[1] & unordered[2]
    assert not (unordered[0] | unordered[1] | unordered[2]) & unordered[3]
    assert not (unordered[0] | unordered[1] | unordered[2] | unordered[3]) & unordered[4]
    assert not {(a, b) for a, _, b, _ in draws[0]} & {(a, b) for a, _, b, _ in draws[1]}


def test_both_halves_of_a_joined_question_are_answered(outcomes) -> None:
    halved = missed(outcomes, "joined questions")
    # 9 of 60 when written; 16 of 60 since a comparison's rows leave another part's sentence in place and a
    # calculation's other parts are answered (tests/test_joined_parts.py); 25 in the fourteenth round: a name with
    # digits in it is no figure there, each part's calculator runs with its rule quoted, a long question before a
    # comma stands alone, a situation before a comma is the next question's, "1e24" is a number, two questions joined
    # by no mark are cut where the module answers them from passages of their own, and every part is answered beside
    # a calculation the message asks as a whole. Most of the rest are second questions read with the first ("...,
    # also would 8 H100s ... be enough?"), joins the module answers from one passage, or parts past the third
    # (docs/eval-notes.md, twelfth and fourteenth rounds). 32 in the fifteenth: a part asking for the module's sources
    # is answered from its reading list, a calculation's rule is found for the parts asking it, and a second question
    # leans on the first by its own words, not the "and" joining it. 37 in the sixteenth: a calculation's numbers
    # are its own sentence's, a question beside a calculation is answered (its situation asking the figure, or a rule
    # no calculator computes), each calculation's rule is found for the part asking it, and a terse second question
    # on a subject of its own is read on its own. 39 in the seventeenth: a later part may be cut too, at a comma the
    # reader did not part at as well. A floor, not a target.
    assert len(halved) <= 21, halved


def test_both_halves_of_another_draw_are_answered(runtime) -> None:
    halved = missed(answered(runtime, pairs(SEED_AGAIN), JOINS_AGAIN), "another draw")
    # 17 of 60 when written, on the code before the round it measures; 28 after it (docs/eval-notes.md, fourteenth
    # round); 35 after the fifteenth; 39 after the sixteenth; 41 after the seventeenth. A floor, not a target.
    assert len(halved) <= 19, halved


def test_both_halves_of_a_draw_joined_by_no_mark_are_answered(runtime) -> None:
    halved = missed(answered(runtime, unmarked_pairs(), JOINS_UNMARKED), "joined by no mark")
    # 12 of 60 when written, on the code before the round it measures; 20 since a message joined by no mark is cut
    # where a second question opens and the module answers each half from its own passages (fourteenth round); 27
    # since the cut falls where the halves' first passages differ, in a first part of several too (fifteenth); 37
    # since a second side on a subject of its own, or a half asking for a calculation, may be cut (sixteenth); 40
    # since a comma the reader did not part at may be cut too (seventeenth). A floor, not a target.
    assert len(halved) <= 20, halved


def test_both_halves_of_a_draw_opened_by_a_connecting_word_are_answered(runtime) -> None:
    halved = missed(answered(runtime, opened_pairs(), JOINS_OPENED), "opened by a connecting word")
    # 27 of 60 when written, on the code before the round it measures; 36 after it (docs/eval-notes.md, fifteenth
    # round); 42 after the sixteenth; 43 after the seventeenth. A floor, not a target.
    assert len(halved) <= 17, halved


def test_both_halves_of_a_listed_draw_are_answered(runtime) -> None:
    halved = missed(answered(runtime, listed_pairs(), JOINS_LISTED), "numbered or on lines of their own")
    # 42 of 60 when written, on the code before the round it measures (f3fcfba); 46 after it (docs/eval-notes.md,
    # sixteenth round; its failures were not read to design it); 54 since each item of a list is a question of its
    # own (seventeenth). A floor, not a target.
    assert len(halved) <= 6, halved
