"""A question asking how one of the module's subjects works is answered with a sentence about that subject ("how does
ZeRO work?" quoted "Every technique here is an answer to one of two walls ... split work across devices": the
question's "work" is a word the module uses twice, so it weighed more than "ZeRO", which it uses everywhere).

The cases are generated: every subject the module teaches by a name that names something (`ModuleProfile.subjects`
as `ModuleIndex` keeps them: its table rows' heads, its section titles' parts), asked in the ways learners ask how
something works. The answer must quote a sentence holding every word of the subject's name (its initialism spelled
out counts). Written, and run once, before the change it measures.
"""

from __future__ import annotations

import pytest

from mentor.text import tokenize

from .chat_helpers import ask_module as ask
from .conftest import MODULE_ID

TEMPLATES = (
    "how does {} work?",
    "how does {} work",
    "can you explain how {} works?",
    "so how does {} actually work",
    "i don't get how {} works",
)


def subjects(runtime) -> list[str]:
    """The subjects `ModuleIndex.build` keeps: a name that names something, or one of the module's names."""
    index = runtime.chat.catalog.retriever.modules[MODULE_ID]
    profile = index.profile
    return [
        name
        for name in profile.subjects
        if tokenize(name) and (index.words.names_something(name) or set(tokenize(name)) <= profile.names)
    ]


@pytest.fixture(scope="module")
def outcomes(runtime) -> list[tuple[str, bool]]:
    profile = runtime.chat.catalog.retriever.modules[MODULE_ID].profile
    found = []
    for index, subject in enumerate(subjects(runtime)):
        message = TEMPLATES[index % len(TEMPLATES)].format(subject.lower())
        answered = ask(runtime, message)
        wanted = set(tokenize(subject))
        quotes = [set(profile.unit_words(c.quote)) for c in answered.answer.citations]
        found.append((message, not answered.answer.out_of_scope and any(wanted <= q for q in quotes)))
    return found


def test_the_cases_are_generated(runtime, outcomes) -> None:
    assert "ZeRO" in subjects(runtime)
    assert len(outcomes) >= 10, outcomes


def test_how_a_subject_works_is_answered_about_that_subject(outcomes) -> None:
    off = [message for message, about in outcomes if not about]
    print(f"\nhow does a subject work: {len(outcomes) - len(off)} of {len(outcomes)} answered about it")
    # 9 of 20 when written, and still: a known gap (docs/eval-notes.md, eleventh round). Six of the eleven are
    # section titles no one asks how they work ("worked example", "interview ref"); the others are ZeRO, mixed-
    # precision training, scaling laws, the parallelism strategies and Kaplan vs Chinchilla. A floor, not a target.
    # 10 of 20 since words common in English weigh less (twelfth round): "i don't get how zero works" quotes a
    # sentence on ZeRO ("how does ZeRO work?" is answered in full: tests/test_subject_questions.py); "how does
    # mixed-precision training work?" quotes its section's opening, which names none of its words.
    assert len(off) <= 10, off
