"""Read a learner's message once, into a `Reading`: its clauses and what each does, the question as read, its
parts and the kind of answer each wants, whether it continues the previous question, and the concepts it names
that the module lacks.

The message is cut into clauses, and clauses into pieces at their commas and colons, by formal syntax alone
(`clauses.py`); its spelling is corrected toward the module's words (`spelling.py`) and the module's shorthand spelled
out (`lexicon.py`); then every text a decision needs (each piece, the whole message, the previous question and the
message after it) is embedded in one forward pass, and every decision is read off those vectors (`decisions.py`).
Only a message whose question is not the whole of it (an order or chat left out) or that holds several questions
pays a second pass, for the question's or the parts' own vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mentor.embeddings import Embedder, embed_cached
from mentor.understanding.clauses import TEMPLATE, normalise, pieces_of, split_clauses
from mentor.understanding.decisions import Decisions
from mentor.understanding.reading import CHATTER, INSTRUCTION, QUESTION, Clause, Part, Reading
from mentor.understanding.words import ModuleWords

MAX_CLAUSES = 12  # a longer message reads its last clauses as one (a pasted log is one clause of its question)
MAX_PARTS = 3  # more questions in one message are answered as the last part together
# The probability from which a message may instruct, and from which a piece of such a message is an order. An
# ordinary question with an order-like word ("is it safe to bypass loss scaling?") is never dropped: the message as
# a whole reads as a question. `mentor calibrate` reports how often the example questions cross them.
SUSPECT_FLOOR = 0.3
INSTRUCTION_FLOOR = 0.8
PART_FLOOR = 0.8  # a comma parts two questions when each side reads as a question this surely ...
ALONE_FLOOR = 0.7  # ... and the first stands alone this surely ("if my model fits on one GPU, which ...?" does not)
PLANTED_FLOOR = 0.8  # a module sentence reads as an instruction this surely: module prose is no learner's chat
# The probability from which a message continues the previous question: the balanced 0.5. On the dev split's 18
# follow-ups the model gives 0.55 to 0.99, on the robustness sweep's 32 new topics 0.05 to 0.31 (0.7 was needed
# before the decisions read words beside vectors: a new question glued to the last one is the costlier mistake).
CONTINUES_FLOOR = 0.5
DEPENDS_FLOOR = 0.5  # a part leaning this surely on the part before it is read with it
UNSURE = 0.6  # a clause read as a question less surely than this, naming nothing of the module, is chat


@dataclass(slots=True)
class _Piece:
    """A piece of a clause on its way through the reader (a clause cut at its commas and colons): as written, as
    read, its clause, the mark before it in that clause, its vector and what it does."""

    written: str
    read: str
    clause: int
    mark: str
    vector: np.ndarray
    act: str = QUESTION
    confidence: float = 1.0


class Reader:
    """Reads messages; built once per process with the embedder and the decisions."""

    def __init__(self, embedder: Embedder, decisions: Decisions) -> None:
        self.embedder = embedder
        self.decisions = decisions

    def read(self, message: str, *, previous: str = "", words: ModuleWords) -> Reading:
        """Read `message`, after the `previous` question as read ("" when it opens the conversation)."""
        text = normalise(message)
        clauses = _bounded(split_clauses(text) or [text.strip() or message])
        cut = [(i, mark, written) for i, clause in enumerate(clauses) for mark, written in pieces_of(clause)]
        corrected = [words.speller.correct(written) for _, _, written in cut]
        corrections = tuple((c.written, c.read) for _, found in corrected for c in found)
        whole = words.lexicon.spell_out(" ".join(piece for piece, _ in corrected))
        batch = [*(piece for piece, _ in corrected), whole, *(previous, f"{previous} {whole}")[: 2 if previous else 0]]
        vectors = dict(zip(batch, self.embedder.embed_queries(batch), strict=True))
        pieces = [
            _Piece(written, piece, clause, mark, vectors[piece])
            for (clause, mark, written), (piece, _) in zip(cut, corrected, strict=True)
        ]
        guarded = self._acts(pieces, whole, vectors[whole], words, templated=bool(TEMPLATE.search(text)))
        asked = [p for p in pieces if p.act == QUESTION]
        question = words.lexicon.spell_out(_joined(asked, read=True)) if asked else ""
        parts = self._parts(asked, vectors, words) if asked else []
        vector = self._vector(question or whole, vectors)
        continues = bool(previous and question) and self._continues(question, vector, vectors[previous])
        query = f"{previous} {question}" if continues else question
        return Reading(
            message=message,
            clauses=tuple(Clause(p.written, p.act, p.confidence) for p in pieces),
            parts=tuple(parts),
            question=question,
            query=query,
            vector=self._vector(query, vectors) if query else vector,
            continues=continues,
            previous=previous if continues else "",
            corrections=corrections,
            guarded=guarded,
        )

    def _acts(
        self, pieces: list[_Piece], whole: str, vector: np.ndarray, words: ModuleWords, *, templated: bool
    ) -> bool:
        """Decide what each piece does; True when the message may instruct (its words are then never echoed).

        A piece is taken for an order only when the message as a whole may instruct: a piece read alone is easily
        misread ("I keep forgetting this one:" before a question is no order). Chat naming nothing of the module is
        left out of the question; a message of such chat alone is chat ("thanks!"). A message written in a chat
        template's syntax ("<system>...</system>") may instruct, whatever it reads as.
        """
        acts = self.decisions.acts
        labels = acts.labels
        suspect = templated or acts.probability(whole, vector, INSTRUCTION) >= SUSPECT_FLOOR
        rows = acts.probabilities([p.read for p in pieces], np.asarray([p.vector for p in pieces]))
        for piece, row in zip(pieces, rows, strict=True):
            scores = dict(zip(labels, row, strict=True))
            if TEMPLATE.search(piece.written) or (suspect and scores[INSTRUCTION] >= INSTRUCTION_FLOOR):
                piece.act, piece.confidence = INSTRUCTION, float(scores[INSTRUCTION])
                continue
            asks = scores[QUESTION] + (scores[INSTRUCTION] if not suspect else 0.0)  # an order-like word, no order
            piece.act = CHATTER if scores[CHATTER] > asks else QUESTION
            if piece.act == QUESTION and asks < UNSURE and not words.names_something(piece.written):
                piece.act = CHATTER  # "ssn btw.", "call me on if needed" with the number taken out
            piece.confidence = float(asks if piece.act == QUESTION else scores[CHATTER])
        # Chat that names a module word or a number is the question's context ("my model is 13B."), or, with no
        # question beside it, the question itself ("grads are all zeros in fp16 after backward").
        for piece in pieces:
            if piece.act == CHATTER and words.names_something(piece.written):
                piece.act = QUESTION
        return suspect

    def _parts(self, asked: Sequence[_Piece], vectors: dict[str, np.ndarray], words: ModuleWords) -> list[Part]:
        """The questions the asking pieces hold: a clause's pieces read together, but where a question of its own
        ends at a comma and another begins; a question leaning on the one before it ("..., and how does it
        compare?") read with it; at most `MAX_PARTS` (the last ones read as one)."""
        groups: list[list[_Piece]] = []
        for piece in asked:
            if groups and groups[-1][-1].clause == piece.clause and not self._parted(groups[-1][-1], piece):
                groups[-1].append(piece)
            else:
                groups.append([piece])
        if len(groups) > MAX_PARTS:
            groups = [*groups[: MAX_PARTS - 1], [p for group in groups[MAX_PARTS - 1 :] for p in group]]
        standalone = self.decisions.standalone
        texts: list[str] = []
        for i, group in enumerate(groups):
            own = words.lexicon.spell_out(_joined(group, read=True))
            leans = i and standalone.probability(group[0].read, group[0].vector, "depends") >= DEPENDS_FLOOR
            texts.append(f"{texts[-1]} {own}" if leans else own)
        missing = [text for text in dict.fromkeys(texts) if text not in vectors]
        vectors = {**vectors, **dict(zip(missing, self._embed(missing), strict=True))} if missing else vectors
        parts = []
        for text, group in zip(texts, groups, strict=True):
            written = _joined(group, read=False)
            kind, sure = self.decisions.kinds.decide(text, vectors[text])
            alone = standalone.probability(group[0].read, group[0].vector, "self")
            lacking = self.decisions.lacking.lacking(written, words.speller)
            asks = min(p.confidence for p in group)
            meant = tuple(words.lexicon.expansions(written))
            parts.append(Part(text, written, kind, vectors[text], lacking, asks, alone, sure, meant))
        return parts

    def _parted(self, before: _Piece, after: _Piece) -> bool:
        """True when a comma ends a question of its own and begins another ("which paper for Chinchilla, and who
        wrote the ZeRO paper?"), not a condition ("if my model fits on one GPU, which parallelism?") or a list."""
        acts, standalone = self.decisions.acts, self.decisions.standalone
        asks = min(acts.probability(p.read, p.vector, QUESTION) for p in (before, after))
        return asks >= PART_FLOOR and standalone.probability(before.read, before.vector, "self") >= ALONE_FLOOR

    def _vector(self, text: str, vectors: dict[str, np.ndarray]) -> np.ndarray:
        return vectors[text] if text in vectors else self._embed([text])[0]

    def planted(self, units: Sequence[str], *, cache_dir: Path | None = None) -> frozenset[str]:
        """The module sentences that read as instructions to the assistant (a poisoned passage): never quoted by
        the extractive engine, cut out of what the LLM reads. Decided once per module, from the clause examples."""
        if not units:
            return frozenset()
        vectors = embed_cached(self.embedder, list(units), cache_dir, kind="units-acts")
        acts = self.decisions.acts
        instruct = acts.probabilities(list(units), vectors)[:, acts.labels.index(INSTRUCTION)]
        return frozenset(unit for unit, p in zip(units, instruct, strict=True) if p >= PLANTED_FLOOR)

    def _continues(self, question: str, vector: np.ndarray, previous: np.ndarray) -> bool:
        return self.decisions.continues.probability(question, vector, previous) >= CONTINUES_FLOOR

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.embedder.embed_queries(list(texts))


def _joined(pieces: Sequence[_Piece], *, read: bool) -> str:
    """Pieces put back together with the marks between them (a new clause after a space)."""
    out = ""
    for i, piece in enumerate(pieces):
        text = piece.read if read else piece.written
        if i == 0:
            out = text
        elif piece.clause == pieces[i - 1].clause and piece.mark:
            out = f"{out}{piece.mark}{text}"
        else:
            out = f"{out} {text}"
    return out


def _bounded(clauses: list[str]) -> list[str]:
    """At most `MAX_CLAUSES` clauses: the rest read as one with the last."""
    if len(clauses) <= MAX_CLAUSES:
        return clauses
    return [*clauses[: MAX_CLAUSES - 1], " ".join(clauses[MAX_CLAUSES - 1 :])]
