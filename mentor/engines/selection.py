"""Which module sentences answer a question: cut it into parts, score every unit against each part, keep the
units that clear a relevance floor, and say which parts nothing answers.

A unit's score for a part is its embedding similarity to the part plus the weighted share of the part's words it
uses (`ModuleProfile.term_weights`: a rare word like "bubble" counts, a word in every sentence like "GPU"
barely). A part is answered when its best unit clears `FLOOR`; a second unit joins only when it is nearly as
good (`RUNNER_UP`), so one good sentence is never padded with a weaker one. A unit that leans on the sentence
before it ("those 84 GB", "(vs fp16 weights ...)") is quoted with that sentence or not at all. A unit whose subject
is a name the learner wrote ("Chinchilla (2022): ...") scores a little more than one that only mentions it, and a
part naming two of the module's names ("Kaplan", "Chinchilla") gets a unit on each. A part that a unit quoted for
an earlier part answers as well as any ("what does bf16 give up compared with fp32?") gets nothing more. A unit
denying what the learner states ("A large model does not fit in one GPU" to "my model fits on one GPU, which
parallelism?") loses its word credit: similarity cannot see a "not". A calculation's quote states the rule its
calculator applies: it is scored against the calculator's description as well as the question.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from mentor.retrieve import Passage, rarity
from mentor.text import Unit, tokenize
from mentor.text.markers import strip_markers
from mentor.text.profile import ModuleProfile
from mentor.text.units import clauses

FLOOR = 0.55  # a unit scoring below this for every part answers none of them
STRICT = 0.9  # the floor for a part holding a word the module never uses
NOVELTY = 0.2  # a follow-up re-quotes a sentence only when every unsaid one scores this much lower
NEAREST = 0.45  # in scope but nothing clears FLOOR: the nearest unit is quoted, as only that, if it clears this
SURE = 0.8  # a part's best unit scoring this is taken alone unless the next is within RUNNER_UP
UNSURE_RUNNER_UP = 0.06  # ... and below SURE, the next unit joins when within this
RUNNER_UP = 0.02  # a second unit for a part must score within this of the part's best
# Scores closer than this are no preference: int8 vectors differ from fp32's by ~0.01 in cosine.
NOISE = 0.005
LEXICAL_WEIGHT = 0.3
PAIR_WEIGHT = 0.15
RANK_WEIGHT = 0.2  # retrieval ranked whole passages with both signals: a unit of passage [1] gets 0.2, of [4] 0.05
TITLE_WEIGHT = 0.5  # a section title's words count half: "Mixed-precision training" frames its sentences
MIN_WORDS = 4
HEAD_WEIGHT = 0.1  # a unit whose subject (`head_of`) the learner named is about it, not one that mentions it
CLAUSE_WEIGHT = 0.5  # a unit's best clause lifts its score by half the margin it has over the whole unit
# A unit denying what the learner states ("does not fit" when they wrote "it fits") loses its word credit.
POLARITY_WEIGHT = LEXICAL_WEIGHT
# A word this common in English (its `rarity`: Zipf frequency 5.5 and up, "does", "work", "use", "point") asks
# rather than names: a part whose other words are all this common is about the subject it names.
ASKING = 0.5
TOPICAL = 2.5  # a word this specific to a few of the module's units names a topic (its weight: log inverse frequency)
NAME_UNITS = 6  # a name in more of the module's units than this ("GPU", "ZeRO") is its subject, not one thing of two

# "does not fit", "doesn't fit", "can never fit": the word a negation denies.
NEGATED = re.compile(r"(?:\bnot|n't|\bnever|\bcannot)\s+(?:\w+ly\s+)?(\w+)", re.I)
HEAD = re.compile(r"^((?:\S+\s+){0,4}?\S+?)\s*(?::|\s—\s)")
# A unit that cannot stand alone: it points back ("those 84 GB", "that alone", "the same idea") early on, or
# continues the line before it ("(vs fp16 weights ...)", "the optimizer state, not the weights, ...").
POINTS_BACK = re.compile(r"^(?:\W*\w+\W+){0,4}?(?:those|these|that alone|this|the same|it|they)\b", re.I)


@dataclass(frozen=True, slots=True)
class Part:
    """One thing a question asks, as the reader read it (spelling corrected, the module's glossary spelled out):
    its terms (numbers left out: they are arguments) and its adjacent word pairs, numbers in ("stage 2")."""

    text: str
    terms: tuple[str, ...]
    pairs: tuple[tuple[str, str], ...] = ()
    name: str = ""  # how the coverage sentence names it: the part as the learner wrote it
    words: tuple[str, ...] = ()  # every term, numbers and words the module lacks included
    # The module's names the learner wrote ("Kaplan", "Chinchilla", "int4"), but for its subject (a name in more
    # than `NAME_UNITS` units): a part naming two of them wants a unit on each.
    names: frozenset[str] = frozenset()
    # The terms the learner states rather than denies ("my model already fits on one GPU": "fit").
    affirmed: frozenset[str] = frozenset()
    # The word pairs of the module's phrases for the learner's shorthand ("idling" -> "pipeline bubble"): the only
    # handle on what was asked, so a unit using such a phrase is about it.
    phrases: frozenset[tuple[str, str]] = frozenset()
    # How much each term says about what is asked, by how rare the word written is in English (`rarity`): "does"
    # and "work" ask, "ZeRO" and "bubble" name. A term missing here weighs 1.
    rarity: Mapping[str, float] = field(default_factory=dict)
    # The module's names the learner wrote when the part names nothing else specific ("how does ZeRO work?": its
    # other words are common in English), its subject's too: the part is about them, and a unit about them answers.
    about: frozenset[str] = frozenset()

    @classmethod
    def of(cls, text: str, profile: ModuleProfile, name: str = "", meant: Sequence[str] = ()) -> Part:
        name = (name or text).strip(" ,;:?!.")
        words = profile.words(text)
        pairs = tuple(dict.fromkeys(_pairs(words)))
        terms = profile.terms(text)
        affirmed = frozenset(terms) - negated(text)
        phrases = frozenset(pair for phrase in meant for pair in _pairs(profile.words(phrase)))
        part = cls(text, terms, pairs, name, tuple(words), _names(text, profile), affirmed, phrases, rarity(text))
        named = frozenset(t for t in terms if t in profile.names)
        return replace(part, about=named) if part.only(named, profile) else part

    def only(self, subject: frozenset[str], profile: ModuleProfile) -> bool:
        """True when the part names every term of `subject` and nothing else specific: every other word of it the
        module uses is common in English (`ASKING`: "how does ZeRO work?", not "what does ZeRO stage 2 add?")."""
        others = (t for t in self.terms if t in profile.term_weights and t not in subject)
        return bool(subject) and subject <= set(self.terms) and all(self.rarity.get(t, 1.0) <= ASKING for t in others)


@dataclass(frozen=True, slots=True)
class View:
    """Text read for scoring: a whole unit or one of its clauses."""

    vector: np.ndarray
    terms: frozenset[str]
    pairs: frozenset[tuple[str, str]]  # adjacent terms: a phrase of the question found as a phrase

    @classmethod
    def of(cls, text: str, vector: np.ndarray, profile: ModuleProfile) -> View:
        terms = profile.unit_words(text)
        return cls(vector, frozenset(terms), frozenset(_pairs(terms)))


@dataclass(frozen=True, slots=True)
class Candidate:
    """A unit of a retrieved passage, ready to score."""

    passage: Passage
    unit: Unit
    vector: np.ndarray
    terms: frozenset[str]
    pairs: frozenset[tuple[str, str]]  # adjacent terms: a phrase of the question found as a phrase
    title_terms: frozenset[str]
    leans_back: bool
    # The unit's claims when it lists several ("GPTQ minimises ...; AWQ protects ...; both are post-training"):
    # a question about one of them is scored against that claim, not diluted by the others.
    clauses: tuple[View, ...] = ()
    # What the unit is about, when it says so up front: "Chinchilla (2022): ...", "Pipeline parallel (PP) — ...".
    head: frozenset[str] = frozenset()
    denies: frozenset[str] = frozenset()  # what the unit says is not so: "a large model does not fit" -> "fit"


def in_module_order(candidate: Candidate) -> tuple[int, int]:
    """Where a unit stands in the module: its passage's position, then its place in the passage (quotes read in the
    module's order)."""
    return candidate.passage.position, candidate.unit.index


@dataclass(frozen=True, slots=True)
class Selection:
    """The units to quote, in reading order, and the parts of the question none of them answers."""

    chosen: list[Candidate]
    unanswered: list[Part]
    lead: str = ""  # what the answer opens with: a decision's option, a yes/no question's verdict


def _pairs(words: Sequence[str]) -> zip[tuple[str, str]]:
    """Adjacent words: a phrase found as a phrase."""
    return zip(words, words[1:], strict=False)


def _names(written: str, profile: ModuleProfile) -> frozenset[str]:
    """The module's names among the words the learner wrote ("Kaplan", or with a digit: "int4"), but its subject."""
    return frozenset(
        t
        for t in profile.terms(written)
        if (t in profile.names or any(ch.isdigit() for ch in t)) and 0 < profile.unit_counts.get(t, 0) <= NAME_UNITS
    )


@functools.lru_cache(maxsize=4096)  # a module's units recur in every question's candidates
def negated(text: str) -> frozenset[str]:
    """The terms `text` denies: "does not fit in one GPU" -> {"fit"}."""
    return frozenset(t for match in NEGATED.finditer(text) for t in tokenize(match.group(1)))


@functools.lru_cache(maxsize=4096)  # a module's units recur in every question's candidates
def head_of(text: str) -> frozenset[str]:
    """What a unit names as its subject: the words of its lead-in (before its first colon or dash, if that comes
    within the first few words), and the first word of each of its claims ("GPTQ minimises …; AWQ protects …")."""
    match = HEAD.match(text)
    lead = set(tokenize(match.group(1))) if match else set()
    firsts = {terms[0] for claim in (text, *clauses(text)) if (terms := tokenize(claim))}
    return frozenset(lead | firsts)


def leans_back(text: str) -> bool:
    """True for a unit that needs the sentence before it to make sense."""
    return bool(POINTS_BACK.match(text)) or text.lstrip("`").startswith("(")


def unasked_boilerplate(text: str, profile: ModuleProfile, pointing: tuple[str, ...] = ()) -> bool:
    """True for a unit describing the module (its opening, its reading list) rather than teaching it, unless it
    names a module the question is sent to (`pointing`: the reading list's row for it)."""
    return text in profile.boilerplate and not any(m in text for m in pointing)


def candidates(
    passages: Sequence[Passage],
    units_of: Callable[[Passage], tuple[list[Unit], np.ndarray, list[np.ndarray]]],
    profile: ModuleProfile,
    *,
    allow_boilerplate: bool,
    planted: frozenset[str] = frozenset(),
    pointing: tuple[str, ...] = (),
) -> list[Candidate]:
    """Every quotable unit of the passages: no instruction-like text (`planted`: the units the reader reads as
    instructions), no stub, no boilerplate unless asked or naming a module the question is sent to (`pointing`:
    the reading list's row for it)."""
    found: list[Candidate] = []
    seen: set[str] = set()
    for passage in passages:
        units, vectors, clause_vectors = units_of(passage)
        title_terms = frozenset(tokenize(passage.section_title))
        for unit, vector, clause_vector in zip(units, vectors, clause_vectors, strict=True):
            text = unit.text
            if text in seen or text in planted or len(text.split()) < MIN_WORDS:
                continue
            if not allow_boilerplate and unasked_boilerplate(text, profile, pointing):
                continue
            seen.add(text)  # overlapping chunks hold the same sentence twice
            terms = profile.unit_words(text)
            pairs = frozenset(_pairs(terms))
            views = tuple(View.of(c, v, profile) for c, v in zip(clauses(text), clause_vector, strict=True))
            found.append(
                Candidate(
                    passage,
                    unit,
                    vector,
                    frozenset(terms),
                    pairs,
                    title_terms,
                    leans_back(text),
                    views,
                    head_of(text),
                    negated(text),
                )
            )
    return found


def score(candidate: Candidate, part: Part, part_vector: np.ndarray, profile: ModuleProfile) -> float:
    """How well a unit answers a part (`read`), lifted by `CLAUSE_WEIGHT` of what its best clause reads better,
    plus the prior of its passage's retrieval rank."""
    whole = View(candidate.vector, candidate.terms, candidate.pairs)
    prior = RANK_WEIGHT / candidate.passage.rank
    base = read(whole, candidate.title_terms, part, part_vector, profile)
    clauses = (read(view, candidate.title_terms, part, part_vector, profile) for view in candidate.clauses)
    best = max(clauses, default=base)
    about = HEAD_WEIGHT if candidate.head & (part.names | part.about) else 0.0
    denies = POLARITY_WEIGHT if candidate.denies & part.affirmed else 0.0
    return prior + base + CLAUSE_WEIGHT * max(0.0, best - base) + about - denies


def read(view: View, title_terms: frozenset[str], part: Part, part_vector: np.ndarray, profile: ModuleProfile) -> float:
    """Similarity to the part, plus the weighted share of the part's words the text (or its title) uses, plus
    the share of the part's word pairs it uses side by side ("loss scale" in "loss scaling", not "loss falls ...
    Scaling laws"). Words the module never uses count for no unit: what they ask, the coverage sentence says."""
    dense = float(view.vector @ part_vector)
    weights = {t: profile.term_weights[t] * part.rarity.get(t, 1.0) for t in part.terms if t in profile.term_weights}
    if not weights:
        return dense
    total = sum(weights.values())
    shared = sum(w * (1.0 if t in view.terms else TITLE_WEIGHT if t in title_terms else 0) for t, w in weights.items())
    adjacent = sum(pair in view.pairs for pair in part.pairs) / len(part.pairs) if part.pairs else 0.0
    meant = PAIR_WEIGHT if part.phrases & view.pairs else 0.0
    return dense + LEXICAL_WEIGHT * shared / total + PAIR_WEIGHT * adjacent + meant


def best_score(
    parts: Sequence[Part], part_vectors: Sequence[np.ndarray], pool: Sequence[Candidate], profile: ModuleProfile
) -> float:
    """The best score any unit of `pool` reaches for any part (minus infinity for an empty pool)."""
    return max(
        (score(c, part, vector, profile) for part, vector in zip(parts, part_vectors, strict=True) for c in pool),
        default=float("-inf"),
    )


def select(
    parts: Sequence[Part],
    part_vectors: Sequence[np.ndarray],
    pool: Sequence[Candidate],
    profile: ModuleProfile,
    *,
    per_part: int,
    limit: int,
    floor: float = FLOOR,
    lacking: frozenset[str] = frozenset(),
    rule: tuple[Part, np.ndarray] | None = None,
) -> Selection:
    """The units answering each part (at most `per_part` each, `limit` in all), and the parts left unanswered.

    A part holding a word the module never uses (`lacking`: "which schedule, 1F1B or interleaved, ...") is about
    something the module lacks: only a unit clearing `STRICT` answers it, not one sharing a word ("shrinks").
    A calculation's quote states the rule its calculator applies (`rule`: the calculators' own description): of
    the units clearing the floor for the question, each scores the mean of what it answers of the question and
    of the rule ("expected loss for 7B on 1T tokens?" -> "Chinchilla (2022): scale N and D together", not the
    one-liner sharing "tokens" and "param"); the rule never lifts a unit the question leaves below the floor.
    """
    by_key = {_key(c): c for c in pool}
    chosen: dict[tuple[str, int], Candidate] = {}
    unanswered: list[Part] = []
    for part, vector in zip(parts, part_vectors, strict=True):
        part_floor = max(floor, STRICT) if lacking & set(part.words) else floor
        asked = _as_scored(part, lacking)
        scores = {_key(c): score(c, asked, vector, profile) for c in pool}
        leads = scores  # how a fragment's sentence is judged: as relevant as it is to the question
        if rule is not None:
            stated = {key: score(by_key[key], *rule, profile) for key in scores}
            scores = {key: (value + stated[key]) / 2 if value >= part_floor else value for key, value in scores.items()}
            # ... or as the rule it states: "For a 7B model, that alone is: 84 GB" is quoted with the sentence it
            # leans on, "Adam keeps ... about 12 bytes/param", under "can I train a 7B model on one 80GB GPU?".
            leads = {key: max(value, stated[key]) for key, value in scores.items()}
        ranked = sorted(((scores[key], by_key[key]) for key in scores), key=lambda item: -item[0])

        ranked = [(value, c) for value, c in ranked if _quotable(c, by_key, leads, part_floor)]
        if rule is not None and ranked:
            # Units as relevant as the best, within the embedder's noise: the one stating the rule goes first.
            tied = [item for item in ranked if item[0] >= ranked[0][0] - NOISE]
            tied.sort(key=lambda item: -stated[_key(item[1])])
            ranked = [*tied, *ranked[len(tied) :]]
        if not ranked or ranked[0][0] < part_floor:
            unanswered.append(part)
            continue
        close = _close(ranked, asked, part_floor)
        # A unit as good as the part's best is quoted already ("what does bf16 give up compared with fp32?": the
        # bf16 unit naming fp32 answers both sides): it answers this part too, and more would only pad it.
        taken = per_part if any(_key(c) in chosen for c in close) else 0
        if any(c.head & part.names for c in close):
            # Of the close units, one about what the learner named ("Kaplan (2020): ...") answers; one that only
            # mentions something near it ("Weight-only int4 (GPTQ/AWQ) ...") does not join it.
            close = [c for c in close if c.head & part.names]
        for candidate in close:
            if taken == per_part or len(chosen) >= limit:
                break
            if _key(candidate) in chosen:
                taken += 1  # already quoted for an earlier part: it answers this one too
                continue
            if any(_same_point(candidate, other) for other in chosen.values()):
                continue  # the module says this twice (reference, one-liners); once is enough
            _take(candidate, chosen, by_key)
            taken += 1
        _each_name(part, ranked, chosen, by_key, limit=limit, floor=floor)
    ordered = sorted(chosen.values(), key=in_module_order)
    return Selection(ordered, unanswered)


def _as_scored(part: Part, lacking: frozenset[str]) -> Part:
    """The part as units are scored for it: the words of a concept the module lacks name that concept, not the
    module's ("int8" in "llm.int8"), and credit no unit."""
    if not lacking:
        return part
    terms = tuple(t for t in part.terms if t not in lacking)
    return replace(part, terms=terms, pairs=tuple(pair for pair in part.pairs if not lacking & set(pair)))


def _close(ranked: Sequence[tuple[float, Candidate]], asked: Part, floor: float) -> list[Candidate]:
    """The units that may answer a part beside its best (`ranked` first): those within `RUNNER_UP` of a sure best
    or `UNSURE_RUNNER_UP` of a fairly relevant one; and first among them, one within `UNSURE_RUNNER_UP` that answers
    a word of the part the best leaves out ("can I combine it with tensor parallel?": the tensor-parallel row, then
    "real runs combine them")."""
    best, first = ranked[0]
    margin = RUNNER_UP if best >= SURE else UNSURE_RUNNER_UP
    close = [c for value, c in ranked[1:] if value >= max(floor, best - margin)]
    left = set(asked.terms) - first.terms
    adds = [c for value, c in ranked[1:] if value >= max(floor, best - UNSURE_RUNNER_UP) and c.terms & left]
    return [first, *adds, *(c for c in close if not any(c is a for a in adds))]


def _each_name(
    part: Part,
    ranked: Sequence[tuple[float, Candidate]],
    chosen: dict[tuple[str, int], Candidate],
    by_key: Mapping[tuple[str, int], Candidate],
    *,
    limit: int,
    floor: float,
) -> None:
    """A part naming two things the module says apart ("what did Kaplan get wrong that Chinchilla fixed?"): a unit
    for the one the quotes so far leave out beats a second unit about the other, if it clears the usual floor; of
    those, one about it ("Chinchilla (2022): scale N and D together") before one that mentions it ("Deployment
    twist: over-train smaller models past Chinchilla")."""
    named = set(part.names)
    missing = named - {t for c in chosen.values() for t in c.terms} if len(named) > 1 else set()
    ranked = sorted(ranked, key=lambda item: not item[1].head & missing)  # stable: by score within each
    for value, candidate in ranked:
        if not missing or len(chosen) >= limit or value < floor:
            break
        if candidate.terms & missing and not any(_same_point(candidate, o) for o in chosen.values()):
            _take(candidate, chosen, by_key)
            missing -= candidate.terms


def _take(
    candidate: Candidate, chosen: dict[tuple[str, int], Candidate], by_key: Mapping[tuple[str, int], Candidate]
) -> None:
    """Quote `candidate`, with the sentence before it when it leans on that one."""
    lead = by_key.get(_before(candidate)) if candidate.leans_back else None
    if lead is not None:
        chosen.setdefault(_key(lead), lead)
    chosen[_key(candidate)] = candidate


def _key(candidate: Candidate) -> tuple[str, int]:
    return candidate.passage.chunk_id, candidate.unit.index


def _before(candidate: Candidate) -> tuple[str, int]:
    return candidate.passage.chunk_id, candidate.unit.index - 1


def _quotable(
    candidate: Candidate,
    by_key: Mapping[tuple[str, int], Candidate],
    scores: Mapping[tuple[str, int], float],
    floor: float,
) -> bool:
    """A fragment is quoted only with its sentence, and only when that one is relevant too."""
    if not candidate.leans_back:
        return True
    lead = by_key.get(_before(candidate))
    return lead is not None and not lead.leans_back and scores[_key(lead)] >= floor


def _same_point(a: Candidate, b: Candidate) -> bool:
    shared = len(a.terms & b.terms) / len(a.terms | b.terms) if a.terms or b.terms else 0.0
    return float(a.vector @ b.vector) > 0.85 or shared > 0.45


def quoted_before(answers: Sequence[str]) -> str:
    """Earlier answers' text, markers stripped and spaces collapsed, to tell which units they quoted."""
    return " ".join(" ".join(strip_markers(text).split()) for text in answers)
