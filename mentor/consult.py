"""What an answer stands on: the message read once (`mentor.understanding`), the module's passages for it, and the
calculators it asks for.

The learner's words go through one `Scrubber` first, the conversation's earlier questions with the message, then the
earlier answers: what it leaves is what is searched, planned and sent to an LLM (`Grounds.said`, `Grounds.history`),
so a detail given in one turn ("I'm Janeth Doerfler") is gone from the others too. Each earlier question is read as
the message is, its orders left out (`Turn.asked`): mentor read a stored one when it was asked; one the client holds
is read here (the reader caches it for the thread's next question).

One hybrid search for the question (after the earlier one it continues), and one more per part when it has
several, each with the vector the reader already made: a part the module does not cover is set aside, and the
passages of the parts it does are answered from. A question about the module's sources reads its reading list; one
about the module itself, its opening; any other leaves both out (they share every topic's words and answer none).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from mentor.answer import Turn
from mentor.corpus import Chunk, Pointer
from mentor.engines.planner import PlannedCall, plan_part, plan_tools
from mentor.privacy import Scrubber, without_placeholders
from mentor.retrieve import MAX_QUERY_CHARS, Passage, Retrieval, Retriever
from mentor.text.profile import describes_module
from mentor.text.tokens import tokenize
from mentor.tools.registry import CALCULATORS
from mentor.understanding import Reader, Reading
from mentor.understanding.reader import MAX_PARTS, Cut
from mentor.understanding.reading import ABOUT_MODULE, Part
from mentor.understanding.words import ModuleWords

BOILERPLATE_SLACK = 2  # passages read beyond `top_k`: a module's opening and its reading list


@dataclass(frozen=True, slots=True)
class Grounds:
    """What the answer stands on: the reading, the passages, the calculator plan."""

    reading: Reading
    retrieval: Retrieval
    plan: list[PlannedCall]
    set_aside: bool = False  # a part of the message the module does not cover was left out
    covered: str = ""  # with a part set aside, the parts the module covers (what an engine is asked)
    unmodelled: tuple[str, ...] = ()  # calculators asked for that do not model a concept the question names
    said: str = ""  # the message with personal details replaced ("[EMAIL]", "[NAME]", ...)
    # The earlier turns, details replaced the same way, each question as read (`Turn.asked`: its orders left out).
    history: tuple[Turn, ...] = ()
    # Where the module sends a learner for what the question, or one of its parts, is about (its front matter's
    # pointers), and the parts (as read) on such a topic.
    pointers: tuple[Pointer, ...] = ()
    sent: tuple[str, ...] = ()

    @property
    def question(self) -> str:
        """What an engine is asked: the question as read, or only its covered parts when one was set aside."""
        return self.covered or self.reading.question

    @property
    def answerable(self) -> bool:
        """Whether the module covers it: relevant passages, a calculation about its topics, or a question about
        the module itself (its sources, what it is) that names no concept the module lacks."""
        reading = self.reading
        about = reading.about_module and any(reading.surely(k) for k in ABOUT_MODULE) and not reading.lacking
        asks_calculation = bool(self.plan or self.unmodelled)
        sent = bool(self.sent)  # the module says where its topic is taught: that much it answers
        return bool(reading.question) and (self.retrieval.in_scope or asks_calculation or about or sent)


def consult(
    message: str,
    history: tuple[Turn, ...],
    *,
    module_id: str,
    reader: Reader,
    retriever: Retriever,
    top_k: int,
    pointed: Callable[[np.ndarray], tuple[Pointer, ...]] = lambda vector: (),
) -> Grounds:
    """Read `message` after its conversation, search the module for it, and plan its calculators (blocking).

    `pointed` gives where this module sends a learner for the topic of a vector (its front matter's pointers): a
    part on such a topic is answered by where the module sends it, and the passage whose row names that module (its
    reading list) joins the passages."""
    index = retriever.modules[module_id]
    said, history = scrubbed(message, history)
    history = tuple(_read(turn, reader, index.words) for turn in history)
    previous = history[-1].asked if history else ""
    reading = reader.read(without_placeholders(said) or said, previous=previous, words=index.words)
    retrieval = _search(retriever, reading.query, reading, module_id, top_k)
    if not reading.question and not reading.instructed and retrieval.in_scope:
        reading = reader.as_question(reading, index.words)  # terse, not chat: "zero in one sentence"
    # "which paper introduced zero and does the mxfp4 format change how int4 weight quantization works?"; a half may
    # hold two questions itself ("which paper introduced zero, how does gptq round and what's the mental model").
    while len(reading.parts) < MAX_PARTS and (cut := _cut(retriever, reader, reading, module_id, top_k)):
        reading = cut
    grounded = partial(
        _grounded, retriever=retriever, module_id=module_id, top_k=top_k, pointed=pointed, said=said, history=history
    )
    grounds = grounded(reading, retrieval)
    if grounds.answerable or (unglued := _unglued(retriever, reader, reading, module_id, top_k)) is None:
        return grounds
    # "hey quick question tl;dr on the memory hog thing": chat glued to the question dilutes it.
    return grounded(*unglued)


def _grounded(
    reading: Reading,
    retrieval: Retrieval,
    *,
    retriever: Retriever,
    module_id: str,
    top_k: int,
    pointed: Callable[[np.ndarray], tuple[Pointer, ...]],
    said: str,
    history: tuple[Turn, ...],
) -> Grounds:
    """The grounds of a message as read and first searched: its parts' passages, a concept beside a subject, where
    the module sends it, and its calculators."""
    index = retriever.modules[module_id]
    set_aside, asked = False, ""
    if len(reading.parts) > 1:
        searched = [(p, _search(retriever, p.text, reading, module_id, top_k, p)) for p in reading.parts]
        covered = [r for _, r in searched if r.in_scope]
        # Every part is a question of its own ("What's the capital of France? And how does ZeRO-3 work?"): chat
        # beside a question is none, and a question leaning on the one before it is read with it (the reader).
        kept = [(p, r) for p, r in searched if _covers(p, r)]
        set_aside = bool(covered) and len(kept) < len(searched)
        if covered:
            # A part set aside leaves the search for the whole message too: only the covered parts' passages, and
            # those of a part asking for a calculation (its rule is among them: "p=4, m=16, what's the bubble?").
            first = retrieval if retrieval.in_scope and not set_aside else covered[0]
            retrieval = _merged(first, [r for _, r in kept], top_k)
            if any(p.module_question for p, r in searched if r.in_scope):
                # A part asking for the module's sources ("..., and which paper introduced zero?") keeps what
                # describes the module, ranked after the passages the merge kept.
                retrieval = with_chunks(retrieval, [c for c in index.chunks if describes_module(c)], module_id)
        if set_aside:
            asked = " ".join(p.text for p, _ in kept)
    if reading.question and reading.lacking and not retrieval.in_scope:
        retrieval = _beside_a_subject(retriever, reading, module_id, top_k) or retrieval
    by_part = [(p.text, pointed(p.vector)) for p in reading.parts]
    sent = tuple(text for text, found in by_part if found)
    if sent:
        modules = {p.module_id for _, found in by_part for p in found}
        retrieval = with_chunks(retrieval, [c for c in index.chunks if any(m in c.text for m in modules)], module_id)
    whole = pointed(reading.vector) if reading.question else ()
    pointers = tuple(dict.fromkeys([*whole, *(p for _, found in by_part for p in found)]))
    # Only a question that continues the conversation borrows its numbers ("and for 70B?"); a new one does not
    # ("who won the World Cup in 2014?" after a calculation is no calculation).
    earlier = tuple(turn.asked or turn.question for turn in history) if reading.continues else ()
    plan = _planned(reading, asked, earlier)
    # A calculator runs only for what it models: "how much memory to QLoRA-finetune a 7B model?" names a method the
    # training-memory calculator does not (its figure would be full Adam training's, a false claim).
    # A word some calculator is described in ("flops", "microbatches", "epsilon") is a quantity of theirs, not a method.
    unmodelled_concepts = [c for c in reading.lacking if not any(calc.models(c) for calc in CALCULATORS)]
    modelled = [] if unmodelled_concepts else plan
    unmodelled = tuple(dict.fromkeys(call.name for call in plan)) if unmodelled_concepts else ()
    return Grounds(reading, retrieval, modelled, set_aside, asked, unmodelled, said, history, pointers, sent)


def _planned(reading: Reading, asked: str, earlier: tuple[str, ...]) -> list[PlannedCall]:
    """The calculators the message asks for: the question's, then each part's own that the question's plan lacks.
    The planner takes the first calculator that recognises a text, so a message asking two calculations ("loss
    scale 2^12, fp16, gradient = 1e-9: underflow? ZeRO-3 with 128 GPUs for a 70B model") is planned part by part
    too; a part set aside (`asked` holds the others) plans nothing, and a follow-up is planned whole."""
    if not reading.question:
        return []
    plan = plan_tools(asked or reading.question, earlier, kind=reading.kind)
    if len(reading.parts) < 2 or reading.continues:
        return plan
    names = {call.name for call in plan}
    for part in reading.parts:
        if asked and part.text not in asked:
            continue
        for call in plan_part(part):
            if call.name not in names:
                names.add(call.name)
                plan.append(call)
    return plan


def scrubbed(message: str, history: tuple[Turn, ...]) -> tuple[str, tuple[Turn, ...]]:
    """The message and the turns before it with personal details replaced, by one `Scrubber`: the learner's words
    first (so a detail from any of them is known), the answers, which may echo them, last."""
    scrub = Scrubber()
    questions = [scrub.text(turn.question) for turn in history]
    said = scrub.text(message)
    turns = tuple(
        Turn(question, scrub.text(turn.answer), scrub.text(turn.asked))
        for turn, question in zip(history, questions, strict=True)
    )
    return said, turns


def _read(turn: Turn, reader: Reader, words: ModuleWords) -> Turn:
    """An earlier turn with its question as read: stored with the turn, or read now (a conversation the client holds
    arrives without it)."""
    if turn.asked:
        return turn
    return replace(turn, asked=reader.read(without_placeholders(turn.question), words=words).question)


def _search(
    retriever: Retriever, query: str, reading: Reading, module_id: str, top_k: int, part: Part | None = None
) -> Retrieval:
    """One hybrid search, for the question or one `part` of it; the module's opening and reading list only when
    what is searched asks about them."""
    if not query:
        query = reading.message.strip() or "?"
        vector = None
    else:
        vector = reading.vector if part is None else part.vector
    # A follow-up is searched with the question it continues; two long turns (notes pasted before each) exceed
    # what a search takes, and the end of the pair (the new question) is kept.
    query = query[-MAX_QUERY_CHARS:]
    retrieval = retriever.search(query, module_id, top_k + BOILERPLATE_SLACK, vector=vector)
    asking = part if part is not None else next(iter(reading.parts), None)  # the whole: as its first part asks
    if asking is not None and asking.module_question:
        # A question about the module's sources or the module itself is answered from what describes it: its
        # reading list and its opening join the passages, whatever their rank.
        index = retriever.modules[module_id]
        return with_chunks(retrieval, [c for c in index.chunks if describes_module(c)], module_id)
    retrieval = without_boilerplate(retrieval)
    return replace(retrieval, passages=retrieval.passages[:top_k])


def _covers(part: Part, retrieval: Retrieval) -> bool:
    """True when the module answers a part of a message: its search is in scope, or it asks for a calculation (as a
    message asking for one is the module's: `Grounds.answerable`)."""
    return retrieval.in_scope or bool(plan_part(part))


def _cut(retriever: Retriever, reader: Reader, reading: Reading, module_id: str, top_k: int) -> Reading | None:
    """The message with each part that reads as two questions (`Reader.joined`) cut where the module answers both
    halves from a passage of its own: both in scope, their first passages apart (deeper down, a half's passages may
    hold the other's first: the module's opening shares every topic's words), and no calculation of the part lost;
    of several such cuts of one part, the one whose halves the module covers best; never more parts than `MAX_PARTS`.
    None when no cut fits."""
    best: dict[int, tuple[float, Cut]] = {}
    for cut in reader.joined(reading, retriever.modules[module_id].words):
        if not _keeps_calculations(reading.parts[cut.index], cut.halves):
            continue
        found = [_search(retriever, p.text, reading, module_id, top_k, p) for p in cut.halves]
        if not all(_covers(p, r) and r.passages for p, r in zip(cut.halves, found, strict=True)):
            continue
        if found[0].passages[0].chunk_id == found[1].passages[0].chunk_id:
            continue
        covered = min(r.relevance for r in found)
        if cut.index not in best or covered > best[cut.index][0]:
            best[cut.index] = (covered, cut)
    # As many as `MAX_PARTS` has room for, those whose halves the module covers best.
    taken = sorted(best, key=lambda index: -best[index][0])[: MAX_PARTS - len(reading.parts)]
    if not taken:
        return None
    parts = reading.parts
    for index in sorted(taken, reverse=True):  # from the last, so each cut's place still holds its part
        parts = best[index][1].into(parts)
    return replace(reading, parts=parts)


def _keeps_calculations(part: Part, halves: tuple[Part, Part]) -> bool:
    """True when cutting `part` into `halves` loses none of its calculations: each it plans, a half plans with the same
    arguments (a comma may list a calculation's quantities: "zero-1 on 16 devices, 20B model, memory per device?")."""

    def planned(parts: Sequence[Part]) -> set[tuple[str, str]]:
        return {(call.name, repr(sorted(call.arguments.items()))) for p in parts for call in plan_part(p)}

    return planned([part]) <= planned(halves)


def _unglued(
    retriever: Retriever, reader: Reader, reading: Reading, module_id: str, top_k: int
) -> tuple[Reading, Retrieval] | None:
    """The message read as the question the module answers best once chat glued to it is cut off, with its
    passages, if the module covers it (`Reader.glued`); None otherwise. Asked of a message that would be refused:
    one that plans a calculation, or that the module sends elsewhere, is answered as written."""
    words = retriever.modules[module_id].words
    searched = [
        (retriever.search(read, module_id, top_k, vector=vector), written)
        for written, read, vector in reader.glued(reading, words)
    ]
    found, written = max(searched, key=lambda pair: pair[0].relevance, default=(None, ""))
    if found is None or not found.in_scope:
        return None
    unglued = replace(reader.read(written, previous=reading.previous, words=words), message=reading.message)
    return unglued, _search(retriever, unglued.query, unglued, module_id, top_k)


def _beside_a_subject(retriever: Retriever, reading: Reading, module_id: str, top_k: int) -> Retrieval | None:
    """The passages for a question setting a concept the module lacks beside a subject it teaches, by name, in what
    it asks ("is qlora basically a form of tensor parallel?"): partly covered, searched without that concept. None
    when it names no subject there: a question about the concept alone ("how much activation memory does gradient
    checkpointing save?") stays out of scope, and so does one naming the subject only as context ("Explain
    FlashAttention. I already understand tensor parallelism.")."""
    index = retriever.modules[module_id]
    lacking = {t for concept in reading.lacking for t in tokenize(concept)}
    terms = {t for part in reading.parts if part.lacking for t in tokenize(part.asking or part.text)} - lacking
    if not any(subject <= terms for subject in index.subjects):
        return None
    rest = reading.question
    for concept in reading.lacking:
        rest = re.sub(re.escape(concept), " ", rest, flags=re.IGNORECASE)
    found = without_boilerplate(
        retriever.search(" ".join(rest.split()) or reading.question, module_id, top_k + BOILERPLATE_SLACK)
    )
    return replace(found, passages=found.passages[:top_k], in_scope=True)


def _merged(first: Retrieval, parts: list[Retrieval], top_k: int) -> Retrieval:
    """The question's passages with each covered part's best ones added (so every part has its own), renumbered."""
    passages: dict[str, Passage] = {}
    for depth in range(top_k):
        for retrieval in (first, *parts):
            if depth < len(retrieval.passages) and len(passages) < top_k + len(parts):
                passages.setdefault(retrieval.passages[depth].chunk_id, retrieval.passages[depth])
    ranked = [replace(p, rank=rank) for rank, p in enumerate(passages.values(), start=1)]
    relevance = max(r.relevance for r in (first, *parts))
    return replace(first, passages=ranked, relevance=relevance, in_scope=True)


def with_chunks(retrieval: Retrieval, chunks: list[Chunk], module_id: str) -> Retrieval:
    """`retrieval` with `chunks` added after its passages (those it lacks), ranked after them."""
    have = {p.chunk_id for p in retrieval.passages}
    added = [c for c in chunks if c.id not in have]
    start = len(retrieval.passages) + 1
    extra = [
        Passage(
            c.id, module_id, c.module_version, c.section_id, c.section_title, c.position, c.text, rank, 0.0, 0.0, 0.0
        )
        for rank, c in enumerate(added, start=start)
    ]
    return replace(retrieval, passages=[*retrieval.passages, *extra])


def without_boilerplate(retrieval: Retrieval) -> Retrieval:
    """`retrieval` without the module's opening and reading-list passages, the rest renumbered from 1."""
    kept = [p for p in retrieval.passages if not describes_module(p)]
    return replace(retrieval, passages=[replace(p, rank=rank) for rank, p in enumerate(kept, start=1)])
