"""How a decision's answer opens (`mentor.understanding.reading.KINDS`: "choice"): the option first, then the
module's sentences that make the case for it; and what a comparison of a table's rows quotes: both rows.

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

from mentor.engines.selection import FLOOR, LEXICAL_WEIGHT, NAME_UNITS, Candidate, Part, in_module_order, read, score
from mentor.text.profile import ModuleProfile, names_in
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
    split it with?"), or None when the module gives none: between the table rows and the names the learner writes
    (`mixed_choice`: "zero or pipeline parallel?"), between names (`named_choice`), else among a table's rows
    (`row_choice`)."""
    rows = _named_rows(part, pool)
    if rows:
        options = {**rows, **_section_names(part, pool, profile, rows)}
        if len(options) >= 2:
            return mixed_choice(part, vector, options, profile)
    named = _named_options(part, pool, profile)
    if len(named) >= 2:
        return named_choice(part, vector, named, profile)
    return row_choice(part, vector, pool, profile)


def compared_rows(part: Part, pool: Sequence[Candidate]) -> list[Candidate]:
    """The rows of one table a comparison names, each side once and in the table's order ("dp vs pp?": the data
    parallel and the pipeline parallel rows: the same attributes for both); none unless it names two."""
    tables: dict[str, dict[str, Candidate]] = {}
    for head, units in _named_rows(part, pool).items():
        for unit in units:
            tables.setdefault(unit.passage.section_id, {}).setdefault(head, unit)
    sides = max(tables.values(), key=len, default={})
    return sorted(sides.values(), key=in_module_order) if len(sides) >= 2 else []


def mixed_choice(
    part: Part, vector: np.ndarray, options: dict[str, list[Candidate]], profile: ModuleProfile
) -> Option | None:
    """Between options the learner names, table rows among them: the one whose own units (a row, or the sentences
    about a name) answer the question best, if one clears the floor. A row is never taken over a name the learner
    offered beside it just because rows are what a table lists ("to shard the optimizer state: zero or pipeline
    parallel?" is ZeRO's case, not the pipeline row's)."""
    ranked = [(score(unit, part, vector, profile), label, unit) for label, units in options.items() for unit in units]
    if not ranked:
        return None
    value, label, unit = max(ranked, key=lambda item: item[0])
    return Option(label, unit, value) if value >= FLOOR else None


def _named_rows(part: Part, pool: Sequence[Candidate]) -> dict[str, list[Candidate]]:
    """The table rows the learner names, by their head as the module writes it ("Tensor parallel (TP)"): its words
    ("tensor parallel"), one of its alternatives ("Sequence / context"), or its abbreviation ("TP")."""
    written = set(part.words)
    rows: dict[str, list[Candidate]] = {}
    for candidate in pool:
        record = record_of(candidate.unit.text)
        if record is None or len(record.cells) < ROW_CELLS:
            continue
        if any((terms := set(tokenize(name))) and terms <= written for name in names_in(record.head)):
            rows.setdefault(record.head, []).append(candidate)
    return rows


def _section_names(
    part: Part, pool: Sequence[Candidate], profile: ModuleProfile, rows: dict[str, list[Candidate]]
) -> dict[str, list[Candidate]]:
    """The module's names the learner writes beside a table's rows that no row holds but the table's section is
    about too ("ZeRO shards ..." beside the parallelism table; not "GPU", which rows hold, nor "Adam", which the
    section never names): each with the sentences about it (whose subject it is)."""
    held = {t for units in rows.values() for c in units for t in c.terms}
    sections = {c.passage.section_id for units in rows.values() for c in units}
    names = {t for t in part.terms if t in profile.names and t not in held}
    about = {
        name: [c for c in pool if name in c.head and record_of(c.unit.text) is None]
        for name in names
    }  # fmt: skip
    return {
        _written(name, units[0].unit.text): units
        for name, units in about.items()
        if units and any(c.passage.section_id in sections for c in units)
    }


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
