"""`mentor.engines.figures`: a figure the learner wrote, checked against a calculator's result, exactly.

Each case runs the real calculator; the expected verdicts are worked out from the rules (16 bytes/param for
mixed-precision Adam, 20 tokens/param, b/8 bytes a weight of b bits).
"""

from __future__ import annotations

import pytest

from mentor.engines.figures import BYTES, _arguments, checked
from mentor.engines.tool_calls import run_tool_call
from mentor.understanding.reading import STATES, SUFFICES

TRAINING_7B = run_tool_call("training_memory", {"params": "7B", "optimizer": "adam"})
CHINCHILLA_70B = run_tool_call("chinchilla_optimal", {"params": "70B"})
INT8_7B = run_tool_call("quantized_size", {"params": "7B", "bits": 8})
TOTAL_7B = "total = 7B params × 16 bytes/param = 112 GB (≈104.3 GiB)"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("so training a 7B model with adam needs 112 GB, right?", f"**Yes**: {TOTAL_7B}."),
        ("training a 7B model with adam needs 104.3 GiB, right?", f"**Yes**: {TOTAL_7B}."),  # GiB, exactly
        ("training a 7B model with adam needs 0.112 TB, right?", f"**Yes**: {TOTAL_7B}."),
        # The weights alone are not the whole: the question names no part, so it asks about the total.
        ("so training a 7B model with adam needs 14 GB, right?", f"**No**: {TOTAL_7B}."),
        # Equal at the precision written: 112 GB is not "110 GB".
        ("so training a 7B model with adam needs 110 GB, right?", f"**No**: {TOTAL_7B}."),
        # A part the question names is the one checked.
        (
            "for a 7b model with adam, is the optimizer state 84 GB?",
            "**Yes**: optimizer state = 7B params × 12 bytes (fp32 master copy 4 + Adam momentum + variance 8) = 84 GB"
            " (≈78.23 GiB).",
        ),
    ],
)
def test_a_stated_figure_is_checked_against_the_result_it_names(text: str, expected: str) -> None:
    assert checked(text, STATES, [TRAINING_7B]) == expected


def test_of_several_figures_the_one_nearest_the_result_is_checked() -> None:
    """ "~20 tokens a param" is a rate, not the 1.4T tokens the calculation gives; the figure after it is."""
    step = "D = 20 tokens/param × 70B params = 1.4T tokens"
    right = "chinchilla is ~20 tokens a param, so a 70b model wants about 1.4T tokens, right?"
    wrong = "chinchilla is ~20 tokens a param, so a 70b model wants about 140B tokens, right?"
    assert checked(right, STATES, [CHINCHILLA_70B]) == f"**Yes**: {step}."
    assert checked(wrong, STATES, [CHINCHILLA_70B]) == f"**No**: {step}."


def test_a_budget_is_enough_when_the_need_is_within_it() -> None:
    step = "D = 20 tokens/param × 70B params = 1.4T tokens"
    assert checked("is 2T tokens enough for a 70b model?", SUFFICES, [CHINCHILLA_70B]) == f"**Yes**: {step}."
    assert checked("is 1.4T tokens enough for a 70b model?", SUFFICES, [CHINCHILLA_70B]) == f"**Yes**: {step}."
    assert checked("is 700B tokens enough for a 70b model?", SUFFICES, [CHINCHILLA_70B]) == f"**No**: {step}."


def test_a_figure_the_question_computes_with_is_no_claim() -> None:
    """ "7B" is the size computed with; "7 GB" (equal to 7e9 too, but bytes) is the claim."""
    assert checked("so 7b weights at 8 bits come to 7 GB?", STATES, [INT8_7B]).startswith("**Yes**: size = 7B")
    assert checked("so 7b params at 8 bits, right?", STATES, [INT8_7B]) == ""
    fit = run_tool_call("memory_fit", {"params": "7B", "gpu_memory_gb": 80})
    assert (BYTES, 80 * 10**9) in list(_arguments(fit))


@pytest.mark.parametrize(
    ("text", "figure", "calls"),
    [
        ("why does training a 7B model with adam need 112 GB?", "other", [TRAINING_7B]),  # only mentioned
        ("so training a 7B model with adam needs 112 GB, right?", "", [TRAINING_7B]),  # no figure read
        ("so training a 7B model with adam needs 112, right?", STATES, [TRAINING_7B]),  # no unit, no word
        ("7B on one 80 GB GPU needs 112 GB, right?", STATES, [run_tool_call("memory_fit", {"params": "7B",
                                                                                           "gpu_memory_gb": 80})]),
        ("so training a 7B model with adam needs 112 GB, right?", STATES, []),  # nothing computed
    ],
)  # fmt: skip
def test_no_verdict_without_a_figure_a_calculation_settles(text: str, figure: str, calls: list) -> None:
    """A fit decides for itself ("No: ... short"), so its result is not checked again."""
    assert checked(text, figure, calls) == ""


def test_a_named_part_is_checked_against_that_part_only() -> None:
    """ "the optimizer state is 112 GB" is wrong even though the total is 112 GB; a size in GB is no rate per
    param, and a rate is checked as one."""
    step = "optimizer state = 7B params × 12 bytes (fp32 master copy 4 + Adam momentum + variance 8) = 84 GB"
    assert checked("for a 7b model with adam, is the optimizer state 112 GB?", STATES, [TRAINING_7B]).startswith(
        f"**No**: {step}"
    )
    total = "so training a 7B params model with adam needs 112 GB, right?"
    assert checked(total, STATES, [TRAINING_7B]) == f"**Yes**: {TOTAL_7B}."
    rate = "so adam training takes 16 bytes per param for a 7B model, right?"
    assert checked(rate, STATES, [TRAINING_7B]) == "**Yes**: total = 7B params × 16 bytes/param = 112 GB (≈104.3 GiB)."
