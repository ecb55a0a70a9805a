"""How learners write the numbers calculators need: the patterns and readers every recogniser shares.

A calculator's recogniser (next to the calculator, e.g. `memory.recognise_kv_cache`) reads a learner's question
and returns the call to make. The wording only one calculator needs lives beside its recogniser; what several
need ("13B", "1.4T tokens", "on 64 GPUs", "8k context") lives here. Counts are kept as the calculators' own
strings ("13B"), so turning text into exact values stays in `mentor.tools.parsing`.

Every pattern here and beside a recogniser must stay linear in the text: none may start a number inside a digit
run (a leading (?<![\\w.]) or (?<!\\d)). Without that, r"(\\d+)\\s*accumulation" retried every suffix of a long run
and a 3,990-digit message took 0.7 s of CPU (measured); tests/test_planner.py times every pattern.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

# The scale words a learner's count may carry; "mn" and "tn" are read only by the calculators, not here.
SCALE = r"(?:k|thousand|m|million|b|bn|billion|t|trillion)"
PARAMS = re.compile(
    rf"(?<![\w.])(\d+(?:\.\d+)?(?:e\d+)?)\s*({SCALE})\b(?![\s-]*(?:tokens?|flops?|gpus?|context|seq))"
    rf"|(?<![\w.])(\d+(?:\.\d+)?(?:e\d+)?)\s*({SCALE})?\s*(?:params?|parameters?)\b",
    re.I,
)
# "20 tokens per parameter" and "20 tokens/param" are a ratio, not a token count.
TOKENS = re.compile(
    rf"(?<![\w.])(\d+(?:\.\d+)?(?:e\d+)?)\s*({SCALE})?\s*tokens?\b(?!\s*(?:per|/|for each|an?)\s*(?:param|weight))",
    re.I,
)
GPUS = re.compile(
    r"(?<![\w.])(\d+)\s*(?:x\s*)?(?:gpus?|devices?|ranks?|accelerators?|a100s?|h100s?|v100s?|workers?)\b", re.I
)
TP = re.compile(
    r"\b(?:tp|tensor[\s-]*parallel(?:ism)?)\s*(?:=|of|degree|size)?\s*(\d+)|(?<!\d)(\d+)[\s-]*way\s*tensor", re.I
)
MICRO_BATCH = re.compile(r"micro[\s-]*batch(?:[\s-]*size)?\s*(?:of|=|:)?\s*(\d+)|\bmbs\s*=?\s*(\d+)", re.I)
BATCH = re.compile(r"\bbatch(?:[\s-]*size)?\s*(?:of|=|:)?\s*(\d+)", re.I)
SEQ_LEN = re.compile(
    r"\b(?:seq(?:uence)?(?:[\s-]*len(?:gth)?)?|context(?:[\s-]*length)?)\s*(?:of|=|:)?\s*(\d+)(k?)\b|"
    r"(?<!\d)(\d+)(k?)\s*(?:context|tokens? (?:of )?context|seq(?:uence)?)\b",
    re.I,
)
HEADS = re.compile(r"(?<![\w.])(\d+)\s*(?:attention\s*)?heads\b|\bheads\s*(?:=|:)?\s*(\d+)", re.I)
LAYERS = re.compile(r"(?<![\w.])(\d+)\s*layers\b|\blayers\s*(?:=|:)?\s*(\d+)", re.I)
# Memory named by a word or by a byte unit a size is written in ("1.12 TB", "900 MB", not only "GB").
MEMORY_WORDS = re.compile(
    r"\b(memory|bytes?|[mgt]i?b|fit|vram|hbm|footprint|how (?:much|big)|optimi[sz]er state|ram)\b", re.I
)
EXAMPLE_PARAMS = "7B"  # the module's worked example
# A width as learners write it: "int4", "8-bit", "4 bits", "w8a8" (the weights' 8).
BITS = re.compile(r"\bint\s?(\d{1,2})\b|(?<![\w.])(\d{1,2})[\s-]*bits?\b|\bw(\d)a\d+\b", re.I)
# The word after a width; a match never starts inside a gap, so a run of spaces is scanned once.
NEXT_WORD = re.compile(r"(?<![\s-])[\s-]*([a-z]+)", re.I)


@dataclass(frozen=True, slots=True)
class PlannedCall:
    """A calculator to run, with the arguments read from the question and what had to be assumed."""

    name: str
    arguments: dict[str, Any]
    assumed: tuple[str, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class PlanContext:
    """What a recogniser may lean on besides the question: the conversation's earlier questions, joined, the kind of
    answer the reader read the question as wanting (`mentor.understanding.reading.KINDS`; "" unread), and the
    question as written ("" unknown)."""

    earlier: str = ""
    kind: str = ""
    written: str = ""  # the question as the learner wrote it, numbers in words as words (the text has them in digits)

    def params_or_assume(self, text: str, *, allow_example: bool = True) -> tuple[str | None, tuple[str, ...]]:
        """The model size in `text`, else from earlier turns, else the worked example's; and what was assumed."""
        found = find_params(text)
        if found:
            return found, ()
        found = find_params(self.earlier)
        if found:
            return found, (f"params {found} from earlier in this conversation",)
        if allow_example:
            return EXAMPLE_PARAMS, (f"params {EXAMPLE_PARAMS}: the module's worked example",)
        return None, ()


# What a recogniser returns: None when the question is not about its calculator (the planner asks the next
# one), else the call or calls to make; an empty list claims the question but plans nothing (the planner stops).
Recognised = PlannedCall | list[PlannedCall] | None
Recogniser = Callable[[str, PlanContext], Recognised]


def widths(text: str) -> Iterator[tuple[int, re.Match[str] | None]]:
    """Each width `text` names, in order, with the word right after it, which it may qualify ("8-bit Adam": 8 and
    "Adam"; "8-bit scales": 8 and "scales")."""
    for match in BITS.finditer(text):
        yield int(next(group for group in match.groups() if group)), NEXT_WORD.match(text, match.end())


def first(pattern: re.Pattern[str], text: str) -> str | None:
    """The first non-empty group of the first match: patterns offer several spellings, one group each."""
    match = pattern.search(text)
    if match is None:
        return None
    return next((group for group in match.groups() if group), None)


def count_text(number: str, scale: str | None) -> str:
    """Keep counts as the calculators' own strings ("13B", "1.4T"), so parsing stays in one place."""
    number = number.replace(",", "")
    # The suffix the calculators parse: "thousand" is K (its first letter, T, read 13 thousand as 13 trillion).
    suffix = {"thousand": "K", "bn": "B"}.get(scale.lower(), scale.upper()[0]) if scale else ""
    return f"{number}{suffix}"


def find_params(text: str) -> str | None:
    """A model size: "13B", "70 billion parameters", "7e9 params"."""
    for match in PARAMS.finditer(text):
        number, scale = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
        if scale or "e" in number.lower() or float(number.replace(",", "")) >= 1e6:
            return count_text(number, scale)
    return None


def find_tokens(text: str) -> str | None:
    """A token count: "1.4T tokens", "300 billion tokens"."""
    match = TOKENS.search(text)
    if match is None:
        return None
    return count_text(match.group(1), match.group(2))


def seq_len(text: str) -> int | None:
    """A sequence length in tokens: "seq 2048", "8k context" (k is 1024 here, as context lengths are)."""
    match = SEQ_LEN.search(text)
    if match is None:
        return None
    number, kilo = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
    return int(number) * (1024 if kilo else 1)


def eval_power(text: str) -> str:
    """Turn "2^16" or "1 x 10^24" into a decimal string; leave other numbers alone."""
    compact = text.replace(" ", "")
    power = re.fullmatch(r"(\d+(?:\.\d+)?)?[x×*]?10\^(\d+)", compact)
    if power:
        return f"{power.group(1) or 1}e{power.group(2)}"
    two = re.fullmatch(r"2\^(\d+)", compact)
    if two:
        return str(2 ** int(two.group(1)))
    return compact
