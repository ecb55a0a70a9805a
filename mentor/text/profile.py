"""What a module's quotable units say about each other, worked out once per module version (no model needed).

- `term_weights`: inverse document frequency of each word over the module's units. A word in every other
  sentence ("GPU", "model") says little about which sentence answers a question; one in two sentences
  ("bubble") says a lot. Units, not chunks: a module has a dozen chunks but a hundred units.
- `boilerplate`: units that describe the module rather than teach it: the opening section's sentences, their
  restatements elsewhere (a reference section's first line), and a reading list's rows. They match every topic
  word and answer none, so they are quoted only when a learner asks about the module or its sources.
- `sources`: the reading list's rows, the answer to "where does this idea come from?".
- `names`: words the module always capitalises, inside a sentence too ("Kaplan", "Chinchilla", "GPTQ"): the
  names of things it says apart, so a question naming two of them wants a sentence about each.
- `opening`, `audience`: the opening's units, and those naming a prerequisite module (its front matter's ids):
  what a question about the module itself is answered with.
- `leads`: the unit each teaching section opens with, and the subject its title names first ("2 — Mixed-precision
  training (q22)": "Keep most math in 16-bit, protect sensitive parts in fp32."): what the module says that subject is.
- `subjects`: what the module teaches, by the names it gives them: its table rows' heads ("Tensor parallel (TP)":
  "Tensor parallel", "TP"; "Sequence / context": each) and its section titles' parts ("1 — Parallelism strategies &
  ZeRO (q16)": "Parallelism strategies", "ZeRO"), as written.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from mentor.text.records import record_of
from mentor.text.sentences import split_sentences
from mentor.text.tokens import stems, tokenize
from mentor.text.units import split_units

# A section whose title names a reading list ("Go further", "Further reading", "Resources"); "Reference face"
# (a quick-scan summary) is not one.
SOURCES_TITLE = re.compile(r"\b(go further|further reading|reading list|resources|bibliography|sources)\b", re.I)
WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")
RESTATEMENT = 0.6  # share of words a sentence must share with an opening sentence to count as its restatement
ASIDE = re.compile(r"\(([^()]*)\)")  # a name's abbreviation or a title's note: "Tensor parallel (TP)", "(q16)"
# Where a title or a row head names several things: "1 — Parallelism strategies & ZeRO", "Scaling laws: Kaplan vs
# Chinchilla", "Sequence / context"; a hyphen joins words ("Mixed-precision training"), so it never cuts.
TITLE_PARTS = re.compile(r"[:&/—–]")
INITIALS = re.compile(r"[\s-]+")  # the words whose initials an initialism is made of: "post-training quantization"


class Piece(Protocol):
    """A chunk as this module reads it."""

    position: int
    section_title: str
    text: str


@dataclass(frozen=True, slots=True)
class ModuleProfile:
    """Word weights and the units that are about the module rather than its topics."""

    term_weights: Mapping[str, float] = field(default_factory=dict)
    unit_counts: Mapping[str, int] = field(default_factory=dict)  # how many units use each word
    boilerplate: frozenset[str] = frozenset()
    sources: frozenset[str] = frozenset()
    names: frozenset[str] = frozenset()
    opening: tuple[str, ...] = ()  # the opening's units in reading order: the first says what the module covers
    audience: frozenset[str] = frozenset()  # the opening's units naming a prerequisite: whom it is for
    subjects: tuple[str, ...] = ()  # what it teaches, as its rows and titles name it
    # What the module's initialisms stand for, as terms: "dp" -> ("data", "parallel") (its glossary's entries whose
    # term is the initials of what it stands for), so a unit writing "combine DP/TP/PP" is found by a learner who
    # writes "tensor parallel".
    shorthand: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    leads: Mapping[str, frozenset[str]] = field(default_factory=dict)  # a section's first unit -> its subject's terms

    def words(self, text: str) -> list[str]:
        """A question's terms, in order ("stage", "2" kept): read already (`mentor.understanding`), so spelt as the
        module spells them."""
        return tokenize(text)

    def unit_words(self, text: str) -> list[str]:
        """A unit's terms in order, then the terms its shorthand stands for, each expansion in its own order."""
        terms = tokenize(text)
        return terms + [t for term in dict.fromkeys(terms) for t in self.shorthand.get(term, ())]

    def terms(self, text: str) -> tuple[str, ...]:
        """The topic terms of a learner's text: its `words` without numbers, each once."""
        return tuple(dict.fromkeys(t for t in self.words(text) if not t[:1].isdigit() and len(t) > 1))

    @classmethod
    def of(
        cls,
        chunks: Sequence[Piece],
        *,
        prerequisites: Sequence[str] = (),
        glossary: Iterable[tuple[str, str]] = (),
    ) -> ModuleProfile:
        """Profile a module from its chunks in reading order (position 0 opens the module); the units of its
        opening that name one of its `prerequisites` (module ids) say whom it is for and what comes first; the
        `glossary`'s initialisms ("DP": "data parallel", "PTQ": "post-training quantization") give the `shorthand`."""
        units = [(chunk, unit.text) for chunk in chunks for unit in split_units(chunk.text)]
        terms = [set(tokenize(text)) for _, text in units]
        frequency = Counter(term for unit_terms in terms for term in unit_terms)
        weights = {term: math.log((len(units) + 1) / (count + 0.5)) for term, count in frequency.items()}
        opening = [unit_terms for (chunk, _), unit_terms in zip(units, terms, strict=True) if chunk.position == 0]
        # The list's rows ("Reference — resource: Kaplan et al. (2020), ..."), not its heading sentence.
        sources = frozenset(
            text for chunk, text in units if SOURCES_TITLE.search(chunk.section_title) and " — " in text
        )
        boilerplate = {text for chunk, text in units if describes_module(chunk)}
        for (_, text), unit_terms in zip(units, terms, strict=True):
            if unit_terms and any(len(unit_terms & o) / len(unit_terms | o) >= RESTATEMENT for o in opening if o):
                boilerplate.add(text)
        opening_units = [text for chunk, text in units if chunk.position == 0]
        audience = frozenset(text for text in opening_units if any(p in text for p in prerequisites))
        names = _names(text for _, text in units)
        subjects = _subjects([c for c in chunks if not describes_module(c)])
        # An initialism that is a stop word as well ("IT", "US") is no term to read a unit by.
        shorthand = {
            key[0]: tuple(tokenize(expansion))
            for term, expansion in glossary
            if initialism(term, expansion) and (key := tokenize(term))
        }
        return cls(
            weights,
            dict(frequency),
            frozenset(boilerplate),
            sources,
            names,
            tuple(opening_units),
            audience,
            subjects,
            shorthand,
            _leads(units),
        )


def initialism(term: str, expansion: str) -> bool:
    """True when `term` is the initials of `expansion`'s words: "TP" of "tensor parallel", "PTQ" of
    "post-training quantization"; not "OOM" of "memory hog" nor "DDP" of "data parallel"."""
    initials = "".join(word[:1] for word in INITIALS.split(expansion.strip().lower()))
    return term.isalpha() and len(term) > 1 and term.lower() == initials


def describes_module(piece: Piece) -> bool:
    """True for the module's opening and its reading list: they describe the module rather than teach it."""
    return piece.position == 0 or bool(SOURCES_TITLE.search(piece.section_title))


def _subjects(chunks: Sequence[Piece]) -> tuple[str, ...]:
    """The names of what `chunks` teach: each table row's head with its abbreviation ("Tensor parallel (TP)") and
    each section title without its note ("(q16)"), cut at alternatives ("Sequence / context") and separators;
    without numbers alone ("1 — ...")."""
    heads = [record.head for chunk in chunks for unit in split_units(chunk.text) if (record := record_of(unit.text))]
    titles = dict.fromkeys(chunk.section_title for chunk in chunks)
    names = [*(n for head in heads for n in names_in(head)), *(n for t in titles for n in names_in(t, asides=False))]
    return tuple(dict.fromkeys(names))


def _leads(units: Sequence[tuple[Piece, str]]) -> dict[str, frozenset[str]]:
    """The unit opening each teaching section (`units`: each chunk's units, in reading order), with the terms of the
    first name its title holds (`names_in`): "Scaling laws" of "3 — Scaling laws: Kaplan vs Chinchilla (q28)"."""
    found: dict[str, frozenset[str]] = {}
    before: Piece | None = None
    for chunk, text in units:
        if chunk is before:
            continue  # not the chunk's first unit
        opens = before is None or chunk.section_title != before.section_title
        before = chunk
        names = names_in(chunk.section_title, asides=False)
        terms = frozenset(tokenize(names[0])) if names else frozenset()
        # A table opening the section is no statement of what its subject is: its first row is one of its items.
        if opens and terms and not describes_module(chunk) and record_of(text) is None:
            found.setdefault(text, terms)
    return found


def names_in(name: str, *, asides: bool = True) -> list[str]:
    """The names a row head or a title holds: its parts cut at alternatives and separators ("Sequence / context",
    "Parallelism strategies & ZeRO"), and the abbreviation in its brackets ("Tensor parallel (TP)": "TP"), or
    without it (`asides=False`: a title's note, "(q16)"); no part without a letter ("1 — ...")."""
    found = [*(ASIDE.findall(name) if asides else ()), *TITLE_PARTS.split(ASIDE.sub(" ", name))]
    return [part.strip() for part in found if WORD.search(part)]


def _names(texts: Iterable[str]) -> frozenset[str]:
    """The stems of words never written in lower case, and capitalised at least once inside a sentence or with a
    capital after their first letter (an acronym or a cased name, "BRIN", "ZeRO", even opening a sentence)."""
    lower: set[str] = set()
    inside: set[str] = set()
    for text in texts:
        for sentence in split_sentences(text):
            words = WORD.findall(sentence)
            for position, (word, stem) in enumerate(zip(words, stems([w.lower() for w in words]), strict=True)):
                if word.islower():
                    lower.add(stem)
                elif (position > 0 and word[0].isupper()) or any(ch.isupper() for ch in word[1:]):
                    inside.add(stem)
    return frozenset(inside - lower)
