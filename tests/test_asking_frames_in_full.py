"""The questions of `tests/test_asking_frames.py`, held to more: answered about their subject *in full*, not as "the
module does not cover this directly; here is what it does say" over a sentence of the right section ("what is
mixed-precision training?" quoted the fp16 sentence that way). Written, and run once, before the change it measures.
"""

from __future__ import annotations

import pytest

from .test_asking_frames import asked


@pytest.fixture(scope="module")
def outcomes(runtime) -> list[tuple[str, bool]]:
    return [(message, about and answer.coverage == "full") for message, answer, about in asked(runtime)]


def test_a_subject_is_answered_in_full_however_it_is_asked(outcomes) -> None:
    off = [message for message, full in outcomes if not full]
    print(off)
    print(f"\nasking frames, in full: {len(outcomes) - len(off)} of {len(outcomes)}")
    # 77 of 100 when written: the nineteen of `test_asking_frames.py`, and mixed-precision training four ways; 78
    # since a section's opening says what its subject is ("what is mixed-precision training?"; the three other
    # ways of asking are read as no sure definition or explanation) and one meta question went the other way. 77
    # since "pls" is read as "please" (2026-12-07, thirteenth round): "can you explain mixed-precision training pls"
    # and "... where the training memory actually goes pls" are read as asking for an overview (0.25, 0.42), and "can
    # you explain one mental model to keep pls" is answered in full; the same questions without "pls" read alike.
    assert len(off) <= 23, off
