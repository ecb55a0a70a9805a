"""How a decision's answer opens (`mentor.understanding.reading.KINDS`: "choice"): the option first, then the
module's sentences that make the case for it.

Nothing here names a module's topics: options are what the module's own sentences are about (their subjects) or
the rows of its tables (`mentor.text.records`). A yes/no question gets its verdict only from a calculator that settles
it (`memory_fit`): whether a module sentence says yes or no to a question needs an entailment model, and none can be
loaded here (no weights ship with a package).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from mentor.engines.selection import FLOOR, LEXICAL_WEIGHT, NAME_UNITS, Candidate, Part, read, score
from mentor.text.profile import ModuleProfile
from mentor.text.records import Record, record_of
from mentor.text.tokens import tokenize

WORD = re.compile(r"\w[\w-]*\w|\w")  # a word as written, hyphens inside: "bf16", "ZeRO", "weight-only"
ROW_CELLS = 2  # a record with this many attributes describes its option (what it is, when to use it)


@dataclass(frozen=True, slots=True)
class Option:
    """An option a decision picks: how the module writes it, and the sentence that makes the case for it."""

    label: str
    unit: Candidate
    score: float


def choose(part: Part, vector: np.ndarray, pool: Sequence[Candidate], profile: ModuleProfile) -> Option | None:
    """The option a decision question should take ("bf16 or fp16 on A100s?", "a single layer is too big, what do I
    split it with?"), or None when the module gives none: between options the learner names (`named_choice`), else
    among the rows of a table (`row_choice`)."""
    named = _named_options(part, pool, profile)
    if len(named) >= 2:
        return named_choice(part, vector, named, profile)
    return row_choice(part, vector, pool, profile)


def named_choice(
    part: Part, vector: np.ndarray, named: dict[str, list[Candidate]], profile: ModuleProfile
) -> Option | None:
    """Between the module's names the learner wrote: the one a sentence naming several of them is about ("bf16 >
    fp16 for stability", "ZeRO shards the optimizer state (Adam) across the DP group"), else the one whose own
    sentences (naming no other option: "int8/int4 cut memory" makes no case for either) answer best. A sentence
    whose subjects are several of them ("GPTQ minimises …; AWQ protects …") makes no case for either."""
    options = named.keys()
    both = [c for units in named.values() for c in units if len(options & c.terms) >= 2 and len(options & c.head) == 1]
    if both:
        best = max(both, key=lambda c: score(c, part, vector, profile))
        order = {t: i for i, t in reversed(list(enumerate(tokenize(best.unit.text))))}
        first = min(best.head & named.keys(), key=lambda t: order.get(t, len(order)))
        return Option(_written(first, best.unit.text), best, score(best, part, vector, profile))
    ranked: list[tuple[float, str, Candidate]] = []
    for name, units in named.items():
        own = [c for c in units if len(c.terms & named.keys()) == 1]
        if own:
            unit = max(own, key=lambda c: score(c, part, vector, profile))
            ranked.append((score(unit, part, vector, profile), name, unit))
    if not ranked:
        return None
    value, name, unit = max(ranked, key=lambda item: item[0])
    return Option(_written(name, unit.unit.text), unit, value) if value >= FLOOR else None


def row_choice(part: Part, vector: np.ndarray, pool: Sequence[Candidate], profile: ModuleProfile) -> Option | None:
    """The table row whose attributes match the learner's situation best: a row's attributes are its clauses
    ("Tensor parallel (TP) — when it wins: a single layer is too big"), and the best-fitting one decides."""
    rows = [(c, record) for c in pool if (record := record_of(c.unit.text)) and len(record.cells) >= ROW_CELLS]
    # What the learner says is not so is no part of the situation ("... and never sort": not a sorting index).
    part = replace(part, terms=tuple(t for t in part.terms if t in part.affirmed))
    fits = [
        (max((read(view, c.title_terms, part, vector, profile) for view in c.clauses), default=0.0), c, record)
        for c, record in rows
    ]
    if not fits:
        return None
    # Of rows that fit about as well, the one whose own condition the learner states most of ("a single layer is
    # too big" over "model fits on one GPU" for "a single layer of my model is too big for one gpu").
    value, unit, record = max(fits, key=lambda item: item[0] + LEXICAL_WEIGHT * _stated(item[2], part, profile))
    return Option(record.head, unit, value) if value >= FLOOR else None


def _stated(record: Record, part: Part, profile: ModuleProfile) -> float:
    """The largest weighted share of one attribute's words (its subject's aside) that the part uses."""
    head = set(tokenize(record.head))
    shares = []
    for _, value in record.cells:
        terms = {t for t in tokenize(value) if t not in head}
        total = sum(profile.term_weights.get(t, 0.0) for t in terms)
        if total:
            shares.append(sum(profile.term_weights.get(t, 0.0) for t in terms if t in part.terms) / total)
    return max(shares, default=0.0)


def _named_options(part: Part, pool: Sequence[Candidate], profile: ModuleProfile) -> dict[str, list[Candidate]]:
    """The module's names the learner wrote (or words with a digit: "int4"), each with the sentences naming it; not
    its subject (a name in more than `NAME_UNITS` of its sentences: "GPU"), which is no option."""
    named = {
        t
        for t in part.terms
        if (t in profile.names or any(ch.isdigit() for ch in t)) and profile.unit_counts.get(t, 0) <= NAME_UNITS
    }
    # A name and its plural are one option ("gpu", "gpus").
    named = {t for t in named if not (t.endswith("s") and t[:-1] in named)}
    options: dict[str, list[Candidate]] = {}
    for candidate in pool:
        for name in candidate.terms & named:
            options.setdefault(name, []).append(candidate)
    return options


def _written(term: str, text: str) -> str:
    """The option as the module writes it: the word of `text` whose token is `term` ("bf16", "ZeRO")."""
    for word in WORD.findall(text):
        if tokenize(word) == [term]:
            return word
    return term
