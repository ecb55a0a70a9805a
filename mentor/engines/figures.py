"""A figure the learner writes, checked against the calculation: the verdict a yes/no question about a number gets.

"so a 70B model wants about 1.4T tokens, right?" states the answer it wants checked: the Chinchilla calculation
gives 1.4T tokens, so the answer opens "**Yes**: the calculation gives 1.4T tokens." "is 700B tokens enough for a
70B model?" asks about a budget: the need, 1.4T, is above it, so "**No**". What a figure is to its question is the
reader's decision, learned from labelled examples (`Reading.figure`); a figure that is neither ("why does it need
112 GB?") gets no verdict.

Which result a figure is about is formal syntax, with no word of any subject: its unit ("GB", "FLOPs") or the word
written after it ("tokens", "days") names a result of the same dimension ("total_bytes", "tokens"). Of several (the
weights', gradients', optimizer state's and total bytes), the one whose other words the question writes
("optimizer"), else the largest, the whole. A figure equal to an argument of the call ("7B params") is what the
question computes with, not a claim. A figure equals a result when the result rounds to it at the precision it is
written with: "1.12 TB" for 1,120,000,000,000 bytes, "1.4T" for 1.4e12, but "110 GB" is not 112 GB. A calculation
that decides for itself (a fit, a comparison: its result holds a verdict) states its own.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from mentor.answer import ToolCall
from mentor.grounding import BYTES, FLOPS, PERCENT, Quantity, quantities
from mentor.text import split_sentences
from mentor.text.tokens import stems
from mentor.tools import units
from mentor.understanding.reading import STATES, SUFFICES

NEXT_WORD = re.compile(r"[ \u00a0]*([A-Za-z]+)")
WORDS = re.compile(r"[A-Za-z]+")
STEP = "; "  # between a worked calculation's steps, inside a sentence: "weights = …; total = …"
DECIDES = "verdict"  # the result key of a calculator that decides for itself (memory_fit, compare_allocations)
RATE = "_per_"  # a result per something: "bytes_per_param", "bytes_per_token"
GB_ARGUMENT = "_gb"  # an argument in GB ("gpu_memory_gb"): 10^9 bytes each


@dataclass(frozen=True, slots=True)
class Claim:
    """A figure the learner wrote, the dimension it is in, and the word that named it ("tokens"; "" for a unit)."""

    quantity: Quantity
    dimension: str
    word: str = ""


def checked(text: str, figure: str, calls: Sequence[ToolCall]) -> str:
    """The verdict the question's figure gets from the calculation, as the sentence an answer opens with; "" when
    the question states no figure to check, or no calculation settles it."""
    if figure not in (STATES, SUFFICES):
        return ""
    claims = [claim for q in quantities(text) if (claim := _claim(text, q)) is not None]
    asked = frozenset(stems([w.lower() for w in WORDS.findall(text)]))
    for call in calls:
        if call.error is not None or not call.result or DECIDES in call.result:
            continue
        arguments = list(_arguments(call))
        results = list(_results(call))
        found = []
        for claim in claims:
            stated = claim.quantity.mention.value
            if any(d == claim.dimension and abs(v - stated) <= claim.quantity.tolerance for d, v in arguments):
                continue  # what the question computes with ("7B params"), not a claim
            keys = [(k, v) for k, v in results if _dimension_of(k) == claim.dimension and _rate(text, claim, k)]
            if keys:
                found.append(Checked.of(claim, keys, asked))
        if found:
            return _verdict(found, figure, call.explanation)
    return ""


@dataclass(frozen=True, slots=True)
class Checked:
    """A claim beside the result it is about: the one whose name the question writes ("optimizer state … 84 GB"),
    else the whole (the largest: "training a 7B model needs 14 GB" is about the total, not the weights); and whether
    the claim equals it (at the precision it is written with)."""

    claim: Claim
    value: Fraction
    equal: bool

    @classmethod
    def of(cls, claim: Claim, keys: list[tuple[str, Fraction]], asked: frozenset[str]) -> Checked:
        stated, tolerance = claim.quantity.mention.value, claim.quantity.tolerance
        named = [value for key, value in keys if _key_words(key) & asked]
        about = named or [max((value for _, value in keys), key=abs)]
        equal = [value for value in about if abs(value - stated) <= tolerance]
        return cls(claim, equal[0] if equal else about[0], bool(equal))

    @property
    def distance(self) -> float:
        """How far apart the claim and its result are, in orders of magnitude: of several figures ("~20 tokens a
        param, so about 1.4T tokens"), the one nearest the calculation's is the one about it."""
        stated = self.claim.quantity.mention.value
        return abs(math.log10(float(stated) / float(self.value))) if stated > 0 and self.value > 0 else math.inf


def _verdict(found: Sequence[Checked], figure: str, explanation: str) -> str:
    """The opening sentence: Yes or No, then the step of the calculation that gives the figure it rests on."""
    if figure == STATES:
        equal = [c for c in found if c.equal]
        chosen = equal[0] if equal else min(found, key=lambda c: c.distance)
        yes = bool(equal)
    else:  # SUFFICES: the need is within the budget the learner names
        chosen = min(found, key=lambda c: c.distance)
        yes = chosen.value <= chosen.claim.quantity.mention.value + chosen.claim.quantity.tolerance
    return f"**{'Yes' if yes else 'No'}**: {_step(explanation, chosen)}."


def _step(explanation: str, chosen: Checked) -> str:
    """The step of the worked calculation that ends in the figure ("total = 7B params × 16 bytes/param = 112 GB
    (≈104.3 GiB)"): the verdict restates the calculator, as the grounding check reads it; without one, the figure."""
    for step in (step for sentence in split_sentences(explanation) for step in sentence.split(STEP)):
        if any(abs(q.mention.value - chosen.value) <= q.tolerance for q in quantities(step)):
            return step.strip().rstrip(".")
    return f"the calculation gives {_shown(chosen.value, chosen.claim)}"


def _claim(text: str, quantity: Quantity) -> Claim | None:
    """The figure's dimension: its unit's (as the grounding check reads units), or the word written right after it;
    None for a percentage or a figure without either."""
    if quantity.dimension == PERCENT:
        return None
    if quantity.dimension:
        return Claim(quantity, quantity.dimension)
    word = NEXT_WORD.match(text, quantity.end)
    if word is None:
        return None
    return Claim(quantity, stems([word.group(1).lower()])[0], word.group(1))


def _rate(text: str, claim: Claim, key: str) -> bool:
    """True when a result and a claim are alike in being a rate or an amount: "bytes_per_param" is checked against
    "16 bytes/param" or "16 bytes per param" (the key's own words after the figure), never against "112 GB"."""
    _, per, denominator = key.lower().partition(RATE)
    if not per:
        return True
    after = text[claim.quantity.end :]
    words = [w.lower() for w in WORDS.findall(after)[:2]]
    joined = after.lstrip().startswith("/") or words[:1] == [per.strip("_")]  # "/param", " per param"
    return joined and stems([denominator])[0] in stems(words)


def _results(call: ToolCall) -> Iterator[tuple[str, Fraction]]:
    """The call's numeric results, exactly as the calculator returned them."""
    for key, value in (call.result or {}).items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            yield key, Fraction(repr(value)) if isinstance(value, float) else Fraction(value)


def _arguments(call: ToolCall) -> Iterator[tuple[str, Fraction]]:
    """The call's numeric arguments, each with its dimension, in base units: "gpu_memory_gb": 80 is 80e9 bytes."""
    for key, value in call.arguments.items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            number = Fraction(repr(value)) if isinstance(value, float) else Fraction(value)
            if key.endswith(GB_ARGUMENT):
                yield BYTES, number * 10**9
            else:
                yield _dimension_of(key), number


def _dimension_of(key: str) -> str:
    """A result's dimension from its name: "total_bytes" and "bytes_per_param" are bytes, "compute_flops" FLOPs,
    "tokens" tokens (stemmed, as a claim's word is)."""
    words = key.lower().split("_")
    if BYTES in words:
        return BYTES
    if FLOPS in words:
        return FLOPS
    return stems(words)[-1] if len(words) == 1 else ""


def _key_words(key: str) -> frozenset[str]:
    """A result's name but its dimension: "optimizer_bytes" -> {"optim"}, "bytes_per_param" -> {"param"}."""
    words = [w for w in key.lower().split("_") if w not in (BYTES, FLOPS) and w not in ENGLISH_STOP_WORDS]
    return frozenset(stems(words))


def _shown(value: Fraction, claim: Claim) -> str:
    """The calculation's figure as its calculators write one of its dimension."""
    if claim.dimension == BYTES:
        return units.nbytes(value)
    if claim.dimension == FLOPS:
        return units.flops(value)
    shown = units.count(value) if value.denominator == 1 and value >= 1000 else units.number(value)
    return f"{shown} {claim.word}"
