"""The offline engine: answers with the module sentences that answer the question, plus calculators.

It never writes a fact of its own. The question is cut into parts (two questions in one, two sides of a
comparison) and each part gets the units that clear a relevance floor (`mentor.engines.selection`), in reading
order, each with its citation. What it cannot answer it says, in one framing sentence before the quotes
(`coverage` "partial"): the question's words the module never uses, and the parts no sentence answers. A
follow-up never re-quotes what the previous answer said unless asked to repeat; a calculation quotes the
module's statement of the rule its calculator applies (as the calculator's description gives it), not its worked
example for another size.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from mentor.answer import Answer, Citation, Question, ToolCall
from mentor.corpus import Chunk
from mentor.embeddings import Embedder, embed_cached
from mentor.engines.figures import checked
from mentor.engines.planner import PlannedCall, plan_part, plan_tools
from mentor.engines.plans import choose, compared_rows
from mentor.engines.selection import (
    FLOOR,
    NEAREST,
    NOVELTY,
    TOPICAL,
    UNSURE_RUNNER_UP,
    Candidate,
    Part,
    Selection,
    best_score,
    candidates,
    in_module_order,
    quoted_before,
    score,
    select,
    unasked_boilerplate,
)
from mentor.engines.tool_calls import run_tool_call
from mentor.framing import HINT_CALC, HINT_CHECK, HINT_QUESTION, PARTIAL_OPENING, SET_ASIDE
from mentor.retrieve import Passage
from mentor.safety import sanitize_markdown
from mentor.text import Unit, split_sentences, split_units
from mentor.text.profile import ModuleProfile
from mentor.text.records import record_of
from mentor.text.units import clauses
from mentor.tools.calculator import Calculator
from mentor.tools.fit import CALCULATION
from mentor.tools.registry import CALCULATORS, description_of, rule_of, title_of
from mentor.understanding import Reading
from mentor.understanding.reading import SURE_KIND
from mentor.understanding.reading import Part as ReadPart

ENGINE = "extractive"
MAX_UNITS = {"explain": 3, "brief": 1, "hint": 1}
# A model size in module text ("7B", "1.4T"): a sentence about another size is the worked example, not the rule.
SIZE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*([BT])\b")
OPENING_MARGIN = 0.1  # another sentence of the opening answers a question about the module if this much better
OWN_TERMS = 2  # a follow-up naming this many topic words is read on its own, not joined to the question before
# ... unless joined it is answered better by this much: joined, the earlier question's words favour the earlier
# answer's neighbours ("why not quantize activations too?" after int4 weight-only got the other weight-only line).
OWN_READING = 0.05
# The kinds of answer a section's opening sentence gives for the subject its title names: what it is, how it works.
DEFINING = ("definition", "explanation")
MAX_NAMED = 3  # the partial-coverage sentence names at most this many missing words or parts
NAMING_UNITS = 2  # a word in more of the module's sentences than this names a topic, not a section


class ExtractiveEngine:
    """Composes answers from passages and calculator results; no network, no model beyond the embedder."""

    name = ENGINE

    def __init__(self, embedder: Embedder, *, cache_dir: Path | None = None) -> None:
        self._embedder = embedder
        self._cache_dir = cache_dir  # where `warm` keeps the units' vectors for the next process
        # Chunk ids are content hashes, so a chunk's units and vectors never change: every engine on the same
        # embedder in a process (a reloaded catalog, a test's app) shares them instead of embedding them again.
        self._units, self._lock = _unit_cache(embedder)

    def answer(self, question: Question, plan: Sequence[PlannedCall]) -> Answer:
        """Answer `question` from its passages, running the planned calculators."""
        tool_calls = [run_planned(call) for call in plan]
        computed = any(call.error is None for call in tool_calls)
        selection, parts = self._choose(question, tool_calls)
        reading = question.reading
        verdict = checked(reading.question, reading.figure, tool_calls) if reading is not None and computed else ""
        if verdict:
            # "so a 70B model wants about 1.4T tokens, right?": the figure the learner wrote, checked, comes first.
            selection = replace(selection, lead=verdict)
        # [n] is the passage's retrieval rank, the same numbering the LLM engine sees.
        citations: dict[int, Citation] = {}
        quoted: list[str] = []
        for candidate in selection.chosen:
            passage, unit = candidate.passage, candidate.unit
            citations.setdefault(
                passage.rank,
                Citation(passage.rank, passage.chunk_id, passage.section_id, passage.section_title, unit.text),
            )
            # Each quote ends as a sentence, so the grounding check reads it as one, and each of its sentences
            # carries the marker ("ZeRO shards … stage 3 also parameters. [1] FSDP is the same idea. [1]").
            text = unit.text if unit.text.endswith((".", "!", "?")) else f"{unit.text}."
            quoted.append(" ".join(f"{sentence} [{passage.rank}]" for sentence in split_sentences(text)))
        # A part without one specific module word ("call me on if needed", "which one n y") is chatter, not a
        # question the module leaves unanswered.
        weights = question.profile.term_weights
        unanswered = [p for p in selection.unanswered if any(weights.get(t, 0) >= TOPICAL for t in p.terms)]
        # A part is named only beside the others: the one part of a question is the question, and naming it whole
        # ("The module does not cover “how does mixed-precision training work”") reads as a refusal of what follows.
        missing = missing_names(question, unanswered if len(parts) > 1 else [], words=not computed)
        answered = len(parts) - len(selection.unanswered)
        if not computed and not answered and about_lacking(question):
            # "how does GaLore cut optimizer memory?" asks about something the module never names, and no
            # sentence answers it: nearby facts about optimizer memory would pass for an answer. Redirect.
            return Answer("", [], [], True, ENGINE, None, None, list(question.passages), coverage="none")
        coverage = "full" if not missing and (computed or answered) else "partial"
        framing = ()
        if coverage == "partial":
            named = ", ".join(dict.fromkeys(missing[:MAX_NAMED])) or "this directly"
            framing = (
                f"{PARTIAL_OPENING} {named}; here is what it does say." if quoted else f"{PARTIAL_OPENING} {named}.",
            )
        body = compose(question.style, quoted, tool_calls)
        if selection.lead and question.style != "hint":
            body = f"{selection.lead} {body}"
        text = sanitize_markdown("\n\n".join([*framing, body]), allowed_urls=question.allowed_urls)
        return Answer(
            text=text,
            citations=[citations[n] for n in sorted(citations)],
            tool_calls=tool_calls,
            out_of_scope=False,
            engine=ENGINE,
            model=None,
            prompt_version=None,
            passages=list(question.passages),
            coverage=coverage,
            framing=framing,
        )

    def _choose(self, question: Question, tool_calls: Sequence[ToolCall]) -> tuple[Selection, list[Part]]:
        """The units to quote and the question's parts (one part, the calculation, when calculators ran)."""
        if not question.passages:
            return Selection([], []), []
        profile, reading = question.profile, question.reading
        about = reading is not None and any(p.module_question for p in reading.parts)
        sent_to = _sent_to(question)
        pool = candidates(
            question.passages, self._units_of, profile, allow_boilerplate=about, planted=question.planted,
            pointing=sent_to,
        )  # fmt: skip
        last = quoted_before([question.history[-1].answer]) if question.history else ""
        if reading is not None and reading.surely("repeat") and last:
            # "sorry, can you say that again?": the last answer's sentences, as they were.
            again = [c for c in pool if " ".join(c.unit.text.split()) in last]
            if again:
                return Selection(again, []), [Part.of(question.text, profile)]
        said = "" if reading is not None and reading.surely("repeat") else last  # a follow-up asks for the unsaid
        computed = [c for c in tool_calls if c.error is None]
        if computed or question.unmodelled:
            # A calculator that does not model what the question names ran not: its rule is quoted alone.
            fresh = [c for c in pool if " ".join(c.unit.text.split()) not in said] if said else pool
            beside = _asked_beside(reading, profile, computed) if question.style != "hint" else []
            # What asks for the calculation: the parts not answered beside it, or the message as a whole.
            calculating = [p.text for p in reading.parts if p not in beside] if beside and reading else []
            calculated = self._calculation(question, computed, fresh or pool, profile, " ".join(calculating))
            return self._beside_calculation(question, fresh or pool, beside, *calculated)
        parts, newly_named = self._parts(question, pool, said)
        limit = max(MAX_UNITS[question.style], len(parts)) if question.style != "hint" else 1
        if not pool:
            return Selection([], parts), parts
        vectors = [self._embedder.embed_query(part.text) for part in parts]
        asks = _module_questions(reading, parts)
        special = self._about_module(asks[0] if all(asks) else "", parts, vectors, pool, profile, limit)
        if special is not None:
            return Selection(special, []), parts
        # "which paper introduced zero, and what keeps the gpus of a pipeline from sitting idle?": a part about the
        # module itself is answered from what describes it, the others from what the module teaches.
        described, rest = self._described(asks, parts, vectors, pool, profile)
        if not rest:
            return Selection(described, []), parts
        taught = _taught(pool, profile, sent_to) if described else pool
        asked, rest_vectors = [parts[i] for i in rest], [vectors[i] for i in rest]
        selection, _ = self._answered(question, asked, rest_vectors, taught, said, newly_named, limit)
        if not described:
            return selection, parts
        chosen = sorted([*described, *(c for c in selection.chosen if c not in described)], key=in_module_order)
        return Selection(chosen, selection.unanswered, selection.lead), parts

    def _described(
        self,
        asks: Sequence[str],
        parts: Sequence[Part],
        vectors: Sequence[np.ndarray],
        pool: Sequence[Candidate],
        profile: ModuleProfile,
    ) -> tuple[list[Candidate], list[int]]:
        """The units answering the parts that ask about the module itself (`asks`: each part's kind of such a
        question, or ""), in the module's order, and the indices of the other parts (and of any such part that
        nothing describing the module answers)."""
        described: list[Candidate] = []
        rest: list[int] = []
        for index, (asked, part, vector) in enumerate(zip(asks, parts, vectors, strict=True)):
            found = self._about_module(asked, [part], [vector], pool, profile, 1) if asked else None
            described += [c for c in found or [] if c not in described]
            if not found:
                rest.append(index)
        return sorted(described, key=in_module_order), rest

    def _answered(
        self,
        question: Question,
        parts: list[Part],
        vectors: list[np.ndarray],
        pool: Sequence[Candidate],
        said: str,
        newly_named: frozenset[str],
        limit: int,
    ) -> tuple[Selection, list[Part]]:
        """The units answering `parts` about what the module teaches, from `pool`, and the parts."""
        profile, reading = question.profile, question.reading
        per_part = 2 if question.style == "explain" else 1
        fresh = [c for c in pool if " ".join(c.unit.text.split()) not in said] if said else pool
        if newly_named:
            # "and what did Kaplan say?" after a Chinchilla question: read with the earlier question, the new name
            # is one word among many, yet it is what is asked. A unit about it answers, if one clears the floor.
            about = [c for c in fresh if c.head & newly_named]
            if about and best_score(parts, vectors, about, profile) >= FLOOR:
                fresh = about
        if said and best_score(parts, vectors, fresh, profile) < best_score(parts, vectors, pool, profile) - NOVELTY:
            # What the last answer left out answers it much worse than what it said: the module has nothing
            # better, so the best sentence is quoted again rather than a lookalike.
            fresh = pool
        lacking = frozenset(t for word in question.lacking for t in profile.words(word))
        pointed = frozenset(question.sent)
        selection = unpointed(parts, vectors, fresh, profile, pointed, per_part=per_part, limit=limit, lacking=lacking)
        # A follow-up's options are the previous question's ("should it go over NVLink or across nodes?"): no table
        # row decides it.
        if reading is not None and not reading.continues:
            selection = decided(selection, reading, parts, vectors, fresh, profile, limit)
            if question.style != "hint":  # a hint points at one sentence
                selection = compared(selection, reading, parts, vectors, fresh, profile, limit)
                selection = defined(selection, reading, parts, fresh, profile)
        if not selection.chosen and lacking and any(covers_more(p, lacking, profile) for p in parts):
            # A part naming a concept the module lacks is held to the strict floor: a sentence merely sharing its
            # words is no answer. When none clears it, the part's other topics the module does teach ("what is the
            # pipeline bubble, and which schedule, 1F1B or interleaved, ...") are answered, and the concept named.
            selection = select(parts, vectors, fresh, profile, per_part=per_part, limit=limit)
        if pointed:
            sent = [(p, v) for p, v in zip(parts, vectors, strict=True) if p.text in pointed]
            selection = sent_elsewhere(selection, pool, sent, _sent_to(question), profile)
            if not selection.chosen and not selection.unanswered:
                return selection, parts  # where the module sends the learner is the whole answer
        if not selection.chosen:
            # In scope, yet no sentence clears the floor: quote the nearest one and say it is only that.
            nearest = select(parts[:1], vectors[:1], pool, profile, per_part=1, limit=1, floor=NEAREST)
            return Selection(nearest.chosen, list(parts)), parts
        return selection, parts

    def _parts(self, question: Question, pool: Sequence[Candidate], said: str) -> tuple[list[Part], frozenset[str]]:
        """The parts to answer, and the names a follow-up read with its question writes itself.

        A follow-up asks one thing, what the earlier answer did not say: in its own words when they name a topic
        of their own ("and tensor parallelism?"), else joined to the question it follows ("and the next stage?").
        """
        profile, reading = question.profile, question.reading
        if reading is None or not reading.continues:
            parts: list[Part] = []
            for read in reading.parts if reading is not None else ():
                part = Part.of(read.text, profile, read.written, read.meant)
                # "why?" or "what happens then?", read with the part before it, adds no topic of its own.
                if not parts or not set(part.terms) <= set(parts[-1].terms):
                    parts.append(part)
            return parts or [Part.of(question.text, profile)], frozenset()
        own = Part.of(reading.question, profile, reading.message)
        # Joined, the earlier question lends its topic; the names it wrote ("what did Chinchilla recommend?" before
        # "and what did Kaplan say?") were answered then, and are not asked for again.
        joined = replace(Part.of(reading.query, profile, reading.message), names=own.names)
        if len(own.terms) < OWN_TERMS:
            return [joined], own.names
        # Read both ways; keep the reading that what the last answer left unsaid answers better.
        unsaid = [c for c in pool if " ".join(c.unit.text.split()) not in said] if said else list(pool)
        own_best, joined_best = (
            best_score([p], [self._embedder.embed_query(p.text)], unsaid, profile) for p in (own, joined)
        )
        return ([joined], own.names) if joined_best > own_best + OWN_READING else ([own], frozenset())

    def _beside_calculation(
        self,
        question: Question,
        pool: Sequence[Candidate],
        read: Sequence[ReadPart],
        selection: Selection,
        parts: list[Part],
    ) -> tuple[Selection, list[Part]]:
        """A calculation's `selection` and `parts`, with the message's other parts (`read`, `_asked_beside`)
        answered as any part is."""
        profile = question.profile
        # Each in its own words: read after a calculation it leans on, a part would be answered with that rule again.
        rest = [Part.of(p.asking or p.text, profile, p.written, p.meant) for p in read]
        asks = [p.module_question for p in read]
        if not rest:
            return selection, parts
        vectors = [self._embedder.embed_query(part.text) for part in rest]
        # A part asking for the module's sources ("..., and which paper introduced zero?") is answered from them.
        described, others = self._described(asks, rest, vectors, pool, profile)
        taught = _taught(pool, profile, _sent_to(question)) if described else pool
        asked = [rest[i] for i in others]
        more = select(asked, [vectors[i] for i in others], taught, profile, per_part=1, limit=len(asked))
        taken = {(c.passage.chunk_id, c.unit.index) for c in selection.chosen}
        new = [c for c in [*described, *more.chosen] if (c.passage.chunk_id, c.unit.index) not in taken]
        chosen = sorted([*selection.chosen, *new], key=in_module_order)
        return Selection(chosen, [*selection.unanswered, *more.unanswered], selection.lead), [*parts, *rest]

    def _calculation(
        self,
        question: Question,
        computed: Sequence[ToolCall],
        pool: Sequence[Candidate],
        profile: ModuleProfile,
        asking: str = "",
    ) -> tuple[Selection, list[Part]]:
        """A calculation's quote: the module's rule behind it, not its worked example for another model size; one
        for each calculator that ran, when two did ("loss scale 2^12 ...: underflow? ZeRO-3 with 128 GPUs ..."). The
        rule is found for the question, or for what of it `asking` for the calculation when it asks more."""
        sizes = set(SIZE.findall(question.text)) | {s for c in computed for s in SIZE.findall(c.explanation)}
        pool = [c for c in pool if not _other_example(c.unit.text, sizes)]
        query = asking or (question.reading.query if question.reading is not None else question.text)
        ran = list(dict.fromkeys(call.name for call in computed))
        calculations = [[c for c in computed if c.name == name] for name in ran] if len(ran) > 1 else [computed]
        chosen: list[Candidate] = []
        parts: list[Part] = []
        for calls in calculations:
            named = [*(c.name for c in calls), *question.unmodelled]
            topics = " ".join(dict.fromkeys(title_of(name) for name in named))
            # Of two, each is quoted for its own rule, with the words of the part asking for it alone ("and also fp16
            # spends how many bits on its exponent?": "Number format" names no word of the sentence saying so): the
            # message as a whole asks the other one too.
            own = "" if len(calculations) == 1 else _asking_for(question.reading, calls[0].name)
            part = Part.of(f"{query} {topics}" if len(calculations) == 1 else f"{own} {topics}".strip(), profile)
            parts.append(part)
            if not pool or question.style == "brief":
                continue
            rule = self._rule([*(rule_of(c.name, c.result) for c in calls), *question.unmodelled], profile)
            # A calculation is the answer; its quote only names the rule, so the floor is the nearest one's.
            vectors = [self._embedder.embed_query(part.text)]
            quote = select([part], vectors, pool, profile, per_part=1, limit=1, floor=NEAREST, rule=rule).chosen
            chosen += [c for c in quote if c not in chosen]
        return Selection(sorted(chosen, key=in_module_order), []), parts

    def _about_module(
        self,
        kind: str,
        parts: Sequence[Part],
        vectors: Sequence[np.ndarray],
        pool: Sequence[Candidate],
        profile: ModuleProfile,
        limit: int,
    ) -> list[Candidate] | None:
        """The answer to a question about the module rather than a topic (`kind`: "sources", "overview"): the
        section it names, its reading list, or its opening; None for any other question."""
        named = named_section(parts, pool, profile)
        if named:
            # "give me the interview one-liners" names a section: quote it rather than a lookalike sentence.
            return named[:limit]
        if kind == "overview":
            # "quick summary of the module": its opening sentence, which says what it covers; "who is it for?",
            # "what do I need first?": the opening's line naming its prerequisites, when that answers much better.
            first = [c for c in pool if profile.opening and c.unit.text == profile.opening[0]]
            audience = [c for c in pool if c.unit.text in profile.audience]
            if not first:
                return audience[:1] or None
            if (
                audience
                and _best(audience[0], parts, vectors, profile)
                > _best(first[0], parts, vectors, profile) + OPENING_MARGIN
            ):
                return audience[:1]
            return first
        if kind != "sources":
            return None
        if not any(part.terms for part in parts):
            # "where does this idea come from?" names no topic: the answer is the module's reading list.
            listed = [c for c in pool if c.unit.text in profile.sources]
            if listed:
                return listed
        return self._reading_list(parts, vectors, pool, profile) or None

    def _rule(self, names: Sequence[str], profile: ModuleProfile) -> tuple[Part, np.ndarray]:
        """What the calculators `names` compute, in their own descriptions: the rule a calculation's quote states."""
        described = Part.of(" ".join(dict.fromkeys(description_of(name) for name in names)), profile)
        return described, self._embedder.embed_query(described.text)

    def _reading_list(
        self,
        parts: Sequence[Part],
        vectors: Sequence[np.ndarray],
        pool: Sequence[Candidate],
        profile: ModuleProfile,
    ) -> list[Candidate]:
        """The reading-list rows behind what a question asks about: find the module sentence that answers it,
        then the rows nearest to that sentence and the question together ("which paper should I cite for the
        20-tokens-per-parameter rule?" -> the Chinchilla sentence -> Hoffmann et al. 2022)."""
        listed = [c for c in pool if c.unit.text in profile.sources]
        # What the module teaches, not what describes it: "Curated resources on ... quantization" (the list's own
        # opening line) shares the question's words and points at no row in particular.
        content = [c for c in pool if c.unit.text not in profile.boilerplate]
        if not listed:
            return []
        # A row the question names ("citing micikevicius", "the kaplan one") is the answer, whatever else is near.
        asked = {t for part in parts for t in part.terms if profile.term_weights.get(t, 0) >= TOPICAL}
        named = [c for c in listed if asked & c.terms]
        if named and len(named) < len(listed):
            return named
        about = select(parts, vectors, content, profile, per_part=1, limit=len(parts)).chosen
        if not about:
            return listed
        rows: list[Candidate] = []
        for candidate in about:
            # A row naming what the sentence names ("GPTQ/AWQ", "Chinchilla", "ZeRO") is its source; only
            # without one does the nearest row stand in ("memory-bound decode" is not a citation).
            named = [c for c in listed if c.terms & candidate.terms & profile.names]
            target = Part.of(f"{' '.join(p.text for p in parts)} {candidate.unit.text}", profile)
            vector = self._embedder.embed_query(target.text)
            scored = sorted(((score(c, target, vector, profile), c) for c in named or listed), key=lambda x: -x[0])
            chosen = scored[0][1]
            if not named and len(scored) > 1 and scored[0][0] - scored[1][0] <= UNSURE_RUNNER_UP:
                # No row is nearer than the others ("on which hardware is bf16 the usual choice?" is about no
                # paper): the sentence that answers is the answer, not a reference it does not come from.
                chosen = candidate
            if chosen not in rows:
                rows.append(chosen)
        return sorted(rows, key=in_module_order)

    def warm(self, chunks: Sequence[Chunk]) -> None:
        """Embed the quotable units of `chunks` and their clauses now, in one batch, and each calculator's rule, so
        no learner's question waits for them."""
        for calculator in CALCULATORS:
            self._rule([calculator.name], ModuleProfile())  # its vector is what a calculation asks for
        cold = [c for c in chunks if c.id not in self._units]
        units = [split_units(c.text) for c in cold]
        texts = [text for part in units for text in _texts(part)]
        vectors = embed_cached(self._embedder, texts, self._cache_dir, kind="units") if texts else np.zeros((0, 1))
        start = 0
        with self._lock:
            for chunk, part in zip(cold, units, strict=True):
                size = len(_texts(part))
                self._units[chunk.id] = _vectors_of(part, vectors[start : start + size])
                start += size

    def _units_of(self, passage: Passage) -> UnitVectors:
        cached = self._units.get(passage.chunk_id)
        if cached is None:
            units = split_units(passage.text)
            texts = _texts(units)
            cached = _vectors_of(units, self._embedder.embed_documents(texts) if texts else np.zeros((0, 1)))
            with self._lock:
                self._units[passage.chunk_id] = cached
        return cached


# A chunk's units, their vectors, and for each unit the vectors of its clauses (`mentor.text.units.clauses`).
UnitVectors = tuple[list[Unit], np.ndarray, list[np.ndarray]]


def _texts(units: Sequence[Unit]) -> list[str]:
    """What to embed for a chunk: every unit, then every clause of every unit, in order."""
    return [u.text for u in units] + [c for u in units for c in clauses(u.text)]


def _vectors_of(units: list[Unit], vectors: np.ndarray) -> UnitVectors:
    """Cut the vectors of `_texts(units)` back into the units' own and each unit's clauses'."""
    start = len(units)
    by_unit: list[np.ndarray] = []
    for unit in units:
        size = len(clauses(unit.text))
        by_unit.append(vectors[start : start + size])
        start += size
    return units, vectors[: len(units)] if units else np.zeros((0, 1)), by_unit


def _best(candidate: Candidate, parts: Sequence[Part], vectors: Sequence[np.ndarray], profile: ModuleProfile) -> float:
    """The best score `candidate` reaches for any part."""
    return max(score(candidate, p, v, profile) for p, v in zip(parts, vectors, strict=True))


def unpointed(
    parts: Sequence[Part],
    vectors: Sequence[np.ndarray],
    pool: Sequence[Candidate],
    profile: ModuleProfile,
    pointed: frozenset[str],
    **kwargs: Any,
) -> Selection:
    """`select` for the parts not on a topic the module leaves to another module (`pointed`); those are left
    unanswered for `sent_elsewhere`: a unit about their topic only mentions it ("Weight-only int4 … ideal for
    memory-bound decode" under "why is decode memory-bound?")."""
    kept = [i for i, part in enumerate(parts) if part.text not in pointed]
    selection = select([parts[i] for i in kept], [vectors[i] for i in kept], pool, profile, **kwargs)
    return replace(selection, unanswered=[*selection.unanswered, *(p for p in parts if p.text in pointed)])


def decided(
    selection: Selection,
    reading: Reading,
    parts: Sequence[Part],
    vectors: Sequence[np.ndarray],
    pool: Sequence[Candidate],
    profile: ModuleProfile,
    limit: int,
) -> Selection:
    """`selection` opening with the option a part surely asking for a choice should take, quoting the sentence that
    makes the case for it; other parts keep theirs. The options are weighed against the whole question: the
    learner's situation may be a part before the part that asks which ("many layers; cross-node scaling: pipeline
    or data parallel?")."""
    choosing = reading.surely_part("choice")
    if choosing is None or reading.lacking:
        # "should i use adafactor or pipeline parallel?": the module cannot weigh what it lacks against what it has,
        # so no option leads (it led with "**Pipeline parallel (PP)**", a case the module never makes).
        return selection
    whole = (parts[0], vectors[0]) if len(parts) == 1 else (Part.of(reading.question, profile), reading.vector)
    option = choose(*whole, pool, profile)
    if option is None:
        return selection
    others = (c for c in selection.chosen if c is not option.unit) if len(parts) > 1 else ()
    chosen = [option.unit, *others][:limit]
    ordered = sorted(chosen, key=in_module_order)
    lead = f"**{option.label}** [{option.unit.passage.rank}]."
    return Selection(ordered, [p for p in selection.unanswered if p.text != choosing.text], lead)


def compared(
    selection: Selection,
    reading: Reading,
    parts: Sequence[Part],
    vectors: Sequence[np.ndarray],
    pool: Sequence[Candidate],
    profile: ModuleProfile,
    limit: int,
) -> Selection:
    """`selection` answering a part that surely compares rows of a table ("dp vs pp?") with those rows, both sides
    with the same attributes, where the best sentence alone was one listing every row; a unit answering another part
    better keeps its place ("tp vs dp? why did models like gpt-3 end up under-trained?" keeps the Kaplan sentence)."""
    comparing = reading.surely_part("comparison")
    if comparing is None:
        return selection
    part = next((p for p in parts if p.text == comparing.text), None)
    rows = compared_rows(part, pool) if part is not None else []
    if not rows:
        return selection
    # Another row of the table is no answer beside the rows compared ("pipline vs tensor paralel, whats split in
    # each": not the data-parallel row).
    others = [c for c in selection.chosen if record_of(c.unit.text) is None] if len(parts) > 1 else []
    # The others answering another part first, then those the rows answer in their place, as room allows.
    others.sort(key=lambda c: _answers(c, parts, vectors, profile) is part)
    chosen = [*rows, *others][: max(limit, len(rows) + len(parts) - 1)]
    ordered = sorted(chosen, key=in_module_order)
    return Selection(ordered, [p for p in selection.unanswered if p is not part], selection.lead)


def _answers(
    candidate: Candidate, parts: Sequence[Part], vectors: Sequence[np.ndarray], profile: ModuleProfile
) -> Part:
    """The part `candidate` answers best."""
    scored = zip(parts, vectors, strict=True)
    return max(scored, key=lambda pair: score(candidate, pair[0], pair[1], profile))[0]


def defined(
    selection: Selection,
    reading: Reading,
    parts: Sequence[Part],
    pool: Sequence[Candidate],
    profile: ModuleProfile,
) -> Selection:
    """`selection` opening with the unit a section opens with, for each part that surely asks what a subject is or
    how it works and names the subject the section's title names first ("what is mixed-precision training?": "Keep
    most math in 16-bit, protect sensitive parts in fp32."): the module's own first word on it answers the part."""
    asked = {p.text for p in reading.parts if p.kind in DEFINING and p.kind_confidence >= SURE_KIND}
    chosen = list(selection.chosen)
    answered: set[str] = set()
    for part in (p for p in parts if p.text in asked):
        leads = [c for c in pool if part.only(profile.leads.get(c.unit.text, frozenset()), profile)]
        if not leads:
            continue
        lead = max(leads, key=lambda c: len(profile.leads[c.unit.text]))
        answered.add(part.text)
        if all(c is not lead for c in chosen):
            chosen.insert(0, lead)
    if not answered:
        return selection
    # One opening more per part it answers: the selection's units for the other parts keep their places.
    ordered = sorted(chosen, key=in_module_order)
    return Selection(ordered, [p for p in selection.unanswered if p.text not in answered], selection.lead)


def sent_elsewhere(
    selection: Selection,
    pool: Sequence[Candidate],
    sent: Sequence[tuple[Part, np.ndarray]],
    sent_to: tuple[str, ...],
    profile: ModuleProfile,
) -> Selection:
    """The parts on a topic the module leaves to another module (`sent`, with their vectors), answered: by the
    module's own line sending the learner there, the one naming that module nearest the part ("In-app — … Inference
    & serving, for why decode is memory-bound", not "Prerequisites: Inference & serving"), and by the sentence
    naming where the module points (`mentor.framing.with_pointers`)."""
    taken = {(c.passage.chunk_id, c.unit.index) for c in selection.chosen}
    naming = [
        c for c in pool if any(m in c.unit.text for m in sent_to) and (c.passage.chunk_id, c.unit.index) not in taken
    ]
    rows = [max(naming, key=lambda c: max(score(c, p, v, profile) for p, v in sent))] if naming else []
    pointed = {part.text for part, _ in sent}
    chosen = [*selection.chosen, *rows]
    ordered = sorted(chosen, key=in_module_order)
    unanswered = [p for p in selection.unanswered if p.text not in pointed]
    return Selection(ordered, unanswered, selection.lead)


def covers_more(part: Part, lacking: frozenset[str], profile: ModuleProfile) -> bool:
    """True when a part names, besides what the module lacks, a topic specific to the module (a rare word of it)."""
    return any(t not in lacking and profile.term_weights.get(t, 0.0) >= TOPICAL for t in part.terms)


def about_lacking(question: Question) -> bool:
    """True when what the question asks about is a concept the module lacks: every part names one ("how does
    GaLore cut optimizer memory?"), so the module's nearby facts would only pass for an answer."""
    reading = question.reading
    return reading is not None and bool(reading.parts) and all(part.lacking for part in reading.parts)


def _asked_beside(reading: Reading | None, profile: ModuleProfile, computed: Sequence[ToolCall]) -> list[ReadPart]:
    """The parts of a message answered beside its calculation as any part is: those no calculator reads alone
    ("what does each GPU keep under plain data parallelism, also chinchila optimal data for a 400M model?"; "compute
    optimal tokns per param rule; what does bf16 give away to get fp32's range?"), but one asking for the figure
    computed beside it (`_asks_computed`); every part when the calculation is the message's as a whole ("pipeline
    parallelism: what gets split? fp16 training goes nan ..., what should i try?"). Of a message of one part, the
    part when only its context asks for the figure: "expected loss for 7B params trained on 1T tokens; whats the one
    mental model i should keep from all this" reads the first clause as the second's situation."""
    if reading is None or not reading.parts:
        return []
    if len(reading.parts) == 1:
        (part,) = reading.parts
        beside = part.kind != CALCULATION and part.asking and part.asking != part.own
        return [part] if beside and not plan_tools(part.asking, kind=part.kind) else []
    ran = [calculator for calculator in CALCULATORS if calculator.name in {call.name for call in computed}]
    return [p for p in reading.parts if not plan_part(p) and not _asks_computed(p, profile, ran)]


def _asks_computed(part: ReadPart, profile: ModuleProfile, ran: Sequence[Calculator]) -> bool:
    """True for a part asking for a figure in the words of a calculator that ran: "how many GB do weights, grads
    and adam states take for a 30B model?" asks in its first part for the training memory computed beside it."""
    terms = profile.terms(part.own or part.text)
    return part.kind == CALCULATION and any(term in calculator.vocabulary for calculator in ran for term in terms)


def _asking_for(reading: Reading | None, name: str) -> str:
    """The words of the message's part that asks for calculator `name` on its own ("" when none does alone)."""
    parts = reading.parts if reading is not None and len(reading.parts) > 1 else ()
    return next((p.own or p.text for p in parts if name in {c.name for c in plan_part(p)}), "")


def _taught(pool: Sequence[Candidate], profile: ModuleProfile, sent_to: tuple[str, ...]) -> list[Candidate]:
    """The units of `pool` that teach, not describe the module (`candidates` without boilerplate)."""
    return [c for c in pool if not unasked_boilerplate(c.unit.text, profile, sent_to)]


def _sent_to(question: Question) -> tuple[str, ...]:
    """The modules the question, or a part of it, is sent to (the front matter's pointers)."""
    return tuple(p.module_id for p in question.pointers) if question.sent else ()


def _module_questions(reading: Reading | None, parts: Sequence[Part]) -> list[str]:
    """What each part asks about the module itself (`understanding.Part.module_question`: "sources", "overview",
    ""): one part asks as the message's first part does."""
    if reading is None or not reading.parts:
        return ["" for _ in parts]
    if len(parts) == 1:
        return [reading.parts[0].module_question]
    asked = {read.text: read.module_question for read in reading.parts}
    return [asked.get(part.text, "") for part in parts]


def named_section(parts: Sequence[Part], pool: Sequence[Candidate], profile: ModuleProfile) -> list[Candidate]:
    """The units of the section a question names, best-ranked passage first: its title holds every topic word
    of the question, and those words are rare in the module's sentences ("interview", not "ZeRO": a question
    about ZeRO is about the topic, not a request for the section titled with it) and name nothing ("what did
    Kaplan find?" asks about Kaplan, not for the section titled "Kaplan vs Chinchilla")."""
    terms = {term for part in parts for term in part.terms}
    if any(part.names for part in parts) or any(profile.unit_counts.get(t, 0) > NAMING_UNITS for t in terms):
        return []
    named = [c for c in pool if terms and terms <= c.title_terms]
    first = min((c.passage.rank for c in named), default=None)
    return [c for c in named if c.passage.rank == first]


def missing_names(question: Question, unanswered: Sequence[Part] = (), *, words: bool = True) -> list[str]:
    """What the partial-coverage sentence names: the words the module never uses, then each unanswered part
    that holds none of them (a part is named by its own words, "“fp8”", not the whole question), unless the
    answer is a calculation (`words` false); and "the rest of your message" when a question beside this one was
    left out (`SET_ASIDE`: its words are not repeated)."""
    names: list[str] = []
    guarded = question.reading is not None and question.reading.guarded
    if guarded and (question.lacking or unanswered):
        return [SET_ASIDE]  # a message that may instruct: none of its words is repeated
    if words:
        names = [f"“{word}”" for word in question.lacking]
        lacking = {term for word in question.lacking for term in question.profile.words(word)}
        names += [f"“{part.name}”" for part in unanswered if not lacking & set(part.terms)]
    names += [SET_ASIDE] if question.set_aside else []
    return list(dict.fromkeys(names))


_UNIT_CACHES: dict[int, tuple[Embedder, dict[str, UnitVectors], threading.Lock]] = {}
_UNIT_CACHES_LOCK = threading.Lock()


def _unit_cache(embedder: Embedder) -> tuple[dict[str, UnitVectors], threading.Lock]:
    """The process's cache of unit vectors for `embedder` (held with it, so its id is never reused meanwhile)."""
    with _UNIT_CACHES_LOCK:
        entry = _UNIT_CACHES.get(id(embedder))
        if entry is None or entry[0] is not embedder:
            entry = _UNIT_CACHES[id(embedder)] = (embedder, {}, threading.Lock())
    return entry[1], entry[2]


def _other_example(text: str, sizes: set[tuple[str, str]]) -> bool:
    """True for a sentence about a model size the question and its calculations never mention."""
    mentioned = set(SIZE.findall(text))
    return bool(mentioned) and bool(sizes) and not (mentioned & sizes)


def jaccard(a: set[str], b: set[str]) -> float:
    """Shared words over all words of two sentences."""
    return len(a & b) / len(a | b) if a or b else 0.0


def run_planned(call: PlannedCall) -> ToolCall:
    """Run one planned calculator; a calculator's refusal becomes a ToolCall with `error`."""
    return run_tool_call(call.name, call.arguments, assumed=call.assumed)


def compose(style: str, quoted: Sequence[str], tool_calls: Sequence[ToolCall]) -> str:
    """Lay out the answer for its style; a hint never states the calculators' results."""
    ok = [c for c in tool_calls if c.error is None]
    failed = [c for c in tool_calls if c.error is not None]
    if style == "hint":
        parts = [HINT_CALC if tool_calls else HINT_QUESTION]
        if quoted:
            parts.append(f"First step: {quoted[0]}")
        if tool_calls:
            parts.append(HINT_CHECK)
        return "\n\n".join(parts)
    calculations = [f"**{title_of(c.name)}:** {c.explanation}" for c in ok]
    problems = [f"I could not compute `{c.name}`: {c.error}" for c in failed]
    if style == "brief":
        body = calculations[:1] or list(quoted[:1])
        return "\n\n".join([*body, *problems])
    sections = []
    if calculations:
        sections.append("\n\n".join(calculations))
    if quoted:
        sections.append(" ".join(quoted))
    sections.extend(problems)
    return "\n\n".join(sections)
