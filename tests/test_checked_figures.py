"""A figure the learner states is checked against the calculation: "so a 70B model wants about 1.4T tokens,
right?" gets "Yes", "training a 7B model with Adam takes 14 GB, right?" gets "No" and the figure that is right.

The questions are generated from templates (ways of asking × model sizes × a right or a wrong figure), written
before the engine read them; the expected verdicts are worked out here from the module's rules, not read back
from the calculators: mixed-precision Adam holds 16 bytes/param, Chinchilla wants 20 tokens/param, a weight of b
bits takes b/8 bytes. The wrong figures are the usual slips: the weights alone (2 bytes/param) for the whole
training state, 2 tokens/param, the 16-bit size for a quantized one. A question asking whether the data it has is
enough is answered by comparing, not by equality. A question that only mentions the right figure while asking
something else ("why does ... need 112 GB?") gets no verdict.
"""

from __future__ import annotations

import asyncio
from fractions import Fraction

import pytest

from mentor.answer import ChatInput
from mentor.evaluate.metrics import states_verdict

from .conftest import MODULE_ID

SIZES = (7, 13, 70)  # billions of parameters


def gb(value: Fraction) -> str:
    """A byte figure as a learner writes it: GB below a thousand, TB above."""
    return f"{float(value / 1000):g} TB" if value >= 1000 else f"{float(value):g} GB"


def tokens(billions: Fraction) -> str:
    return f"{float(billions / 1000):g}T" if billions >= 1000 else f"{float(billions):g}B"


MEMORY = (
    "so training a {n}B model with adam needs {x}, right?",
    "{n}b params, full finetune with adam -> {x} of gpu memory in total, correct?",
    "am i right that adam training of a {n}B model takes about {x}?",
    "is it {x} to train a {n}B model with adam in mixed precision?",
)
DATA = (
    "chinchilla says a {n}B model should see about {x} tokens, right?",
    "so the compute-optimal data for {n}b params is {x} tokens?",
    "is {x} tokens the chinchilla-optimal amount for a {n}B model?",
)
QUANTIZED = (
    ("a {n}B model in int4 is {x}, correct?", 4),
    ("so {n}b weights at 8 bits come to {x}?", 8),
)
ENOUGH = (
    "is {x} tokens enough data to train a {n}B model chinchilla-optimally?",
    "i have {x} tokens, is that enough for a compute-optimal {n}b model?",
)
NO_VERDICT = (
    "why does training a {n}B model with adam need {x}?",
    "explain where the {x} for adam training of a {n}B model comes from",
)


def stated_cases() -> list[tuple[str, str]]:
    """(question, the verdict it should open with)."""
    cases = []
    for n in SIZES:
        size = Fraction(n)
        for template in MEMORY:
            cases.append((template.format(n=n, x=gb(16 * size)), "yes"))
            cases.append((template.format(n=n, x=gb(2 * size)), "no"))  # the weights alone
            cases.append((template.format(n=n, x=gb(32 * size)), "no"))
        for template in DATA:
            cases.append((template.format(n=n, x=tokens(20 * size)), "yes"))
            cases.append((template.format(n=n, x=tokens(2 * size)), "no"))
        for template, bits in QUANTIZED:
            cases.append((template.format(n=n, x=gb(size * bits / 8)), "yes"))
            cases.append((template.format(n=n, x=gb(2 * size)), "no"))  # the 16-bit size
        for template in ENOUGH:
            cases.append((template.format(n=n, x=tokens(40 * size)), "yes"))  # more than 20 tokens/param
            cases.append((template.format(n=n, x=tokens(10 * size)), "no"))  # fewer
    return cases


def answer_of(runtime, message: str) -> str:
    answered = asyncio.run(runtime.chat.ask(ChatInput(message=message, module_id=MODULE_ID)))
    assert answered.grounding.grounded, answered.answer.text
    return answered.answer.text


# Measured misses, kept as strict expected failures (a fix turns them into failures to remove from here): the
# reader reads these wordings as only mentioning their figure ("other"), so no verdict is given. Three wordings
# and one 70B variant of each of two more; every one of them is asked at each size with right and wrong figures.
MISSES = {
    *(t.format(n=n, x=x) for n in SIZES for x in (gb(16 * Fraction(n)), gb(2 * Fraction(n)), gb(32 * Fraction(n)))
      for t in MEMORY[1:2]),
    *(DATA[0].format(n=n, x=tokens(k * Fraction(n))) for n in (7, 70) for k in (20, 2)),
    MEMORY[0].format(n=70, x=gb(Fraction(32 * 70))),
    QUANTIZED[0][0].format(n=70, x=gb(Fraction(35))),
    QUANTIZED[0][0].format(n=70, x=gb(Fraction(140))),
}  # fmt: skip


def stated_params() -> list:
    return [
        pytest.param(q, v, marks=pytest.mark.xfail(strict=True, reason="read as only mentioning its figure"))
        if q in MISSES
        else (q, v)
        for q, v in stated_cases()
    ]


@pytest.mark.parametrize(("question", "verdict"), stated_params())
def test_a_stated_figure_is_checked(runtime, question: str, verdict: str) -> None:
    text = answer_of(runtime, question)
    other = "no" if verdict == "yes" else "yes"
    assert states_verdict(text, verdict) and not states_verdict(text, other), text
    # The verdict leads, in bold: "(no per-group scales counted)" in a quantized size's first sentence is no "No"
    # (tightened after the first run, where it let one answer without a verdict pass).
    assert text.startswith(f"**{verdict.capitalize()}**: "), text


@pytest.mark.parametrize("question", [t.format(n=n, x=gb(Fraction(16 * n))) for t in NO_VERDICT for n in SIZES])
def test_a_figure_only_mentioned_gets_no_verdict(runtime, question: str) -> None:
    text = answer_of(runtime, question)
    assert not states_verdict(text, "yes") and not states_verdict(text, "no"), text
