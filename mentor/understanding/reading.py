"""What a learner's message says, read once, before retrieval: the typed record every later stage takes.

Retrieval searches `query` with `vector`, once for the whole question and once more per part when there are
several; the planner reads `question`; the engines answer `parts` by their `kind` and name what is `lacking`;
the grounding check and the signal record read `question` (the question as read). Nothing downstream parses
the message again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

SURE_KIND = 0.35  # a kind decided at least this surely (of ten) changes what is searched (`Reading.surely`)
# What a clause does.
QUESTION, INSTRUCTION, CHATTER = "question", "instruction", "chatter"
ACTS = (QUESTION, INSTRUCTION, CHATTER)
# What a message of chat alone does socially (`Reading.social`); "other" chat gets no reply of its own.
GREETING, THANKS, FAREWELL, OTHER = "greeting", "thanks", "farewell", "other"
# What a figure the learner writes is to the question: the answer they want checked ("so it comes to 112 GB,
# right?"), a budget they ask about ("is 500B tokens enough?"), or neither (`mentor.engines.figures`).
STATES, SUFFICES = "states", "suffices"
# The kind of answer a part wants.
KINDS = (
    "definition",
    "explanation",
    "comparison",
    "choice",
    "verdict",
    "calculation",
    "procedure",
    "sources",
    "overview",
    "repeat",
)
ABOUT_MODULE = ("sources", "overview")  # kinds answered from what describes the module: its reading list, its opening


@dataclass(frozen=True, slots=True)
class Clause:
    """A clause of the message as written, and what it does (`ACTS`), with the decision's probability."""

    text: str
    act: str
    confidence: float


@dataclass(frozen=True, slots=True, eq=False)
class Part:
    """One thing the message asks: its text as read (spelling corrected, the module's glossary spelled out, after
    the part it leans on), as written, the kind of answer it wants, its vector, and the concepts it names that the
    module lacks."""

    text: str
    written: str
    kind: str
    vector: np.ndarray = field(repr=False)
    lacking: tuple[str, ...] = ()
    asks: float = 1.0  # how surely it is a question (not chat)
    alone: float = 1.0  # how surely it stands on its own (not a follow-up of the part before it)
    kind_confidence: float = 1.0  # how surely it wants that kind of answer
    # The module's own words for the learner's shorthand in it (its glossary: "idling" -> "pipeline bubble"): the
    # only handle on what was asked, so a sentence using that phrase is about it.
    meant: tuple[str, ...] = ()
    on_module: float = 0.0  # how surely it asks about the module itself, not a subject it names
    figure: str = ""  # what a figure it writes is to it (STATES, SUFFICES, "other"); "" when it writes no digit
    asking: str = ""  # what of it asks, as read, its context aside ("I already understand tensor parallelism.")
    # Its own words as read, its context included, without the part it leans on: where a calculation's numbers are
    # ("p=4, m=16, interleaved with v=2, what's the bubble?": the numbers are context to "what's the bubble?")
    own: str = ""

    def surely(self, kind: str) -> bool:
        """True when the part surely wants this kind of answer (`SURE_KIND`)."""
        return self.kind == kind and self.kind_confidence >= SURE_KIND

    @property
    def module_question(self) -> str:
        """The kind of question about the module itself the part surely asks (`ABOUT_MODULE`: "which paper should I
        cite for ...", "give me the big picture of this module"), "" for any other."""
        return next((kind for kind in ABOUT_MODULE if self.surely(kind)), "")


@dataclass(frozen=True, slots=True, eq=False)
class Reading:
    """A message, read once."""

    message: str
    clauses: tuple[Clause, ...]
    parts: tuple[Part, ...]
    # The question as read: the asking clauses, corrected and spelled out; "" when the message asks nothing.
    question: str
    # What retrieval searches and the scope decision reads: the question, after the earlier one it continues.
    query: str
    vector: np.ndarray = field(repr=False)
    continues: bool = False
    previous: str = ""  # the earlier question, as read, that this one continues ("" for a new topic)
    corrections: tuple[tuple[str, str], ...] = ()  # (as written, as read)
    # The message may instruct the mentor: an answer never repeats its words (a planted word would be echoed as
    # "not covered"), and what it leaves out is named as "the rest of your message".
    guarded: bool = False
    # For chat alone ("hi", "thanks!", "bye"): GREETING, THANKS or FAREWELL when it surely is one; "" otherwise.
    social: str = ""

    @property
    def kind(self) -> str:
        """The kind of answer the message wants: its first part's ("other" when it asks nothing)."""
        return self.parts[0].kind if self.parts else "other"

    def surely(self, kind: str) -> bool:
        """True when the message surely wants this kind of answer (`SURE_KIND`): what a kind changes in retrieval
        (the module's reading list or opening joins the passages) is only worth doing when it is clear."""
        return bool(self.parts) and self.parts[0].surely(kind)

    @property
    def figure(self) -> str:
        """What the first figure-bearing part's figure is to it (`STATES`, `SUFFICES`, "other"); "" for none."""
        return next((part.figure for part in self.parts if part.figure), "")

    def surely_part(self, kind: str) -> Part | None:
        """The first part that surely wants this kind of answer (`SURE_KIND`): the situation before a choice may be
        a part of its own ("many layers and cross-node scaling; | pipeline or data parallel?")."""
        return next((p for p in self.parts if p.surely(kind)), None)

    @property
    def about_module(self) -> bool:
        """True when the message asks about the module itself ("who is this for?"), not a subject it names."""
        return bool(self.parts) and self.parts[0].on_module >= 0.5

    @property
    def instructions(self) -> tuple[str, ...]:
        """The clauses that try to instruct the mentor: kept out of every later step."""
        return tuple(c.text for c in self.clauses if c.act == INSTRUCTION)

    @property
    def instructed(self) -> bool:
        """True when the message holds an instruction to the mentor."""
        return any(c.act == INSTRUCTION for c in self.clauses)

    @property
    def chatter_only(self) -> bool:
        """True for a message that only chats ("hi", "thanks!"): no question, no instruction."""
        return bool(self.clauses) and all(c.act == CHATTER for c in self.clauses)

    @property
    def lacking(self) -> tuple[str, ...]:
        """The concepts the message names that the module lacks, each once."""
        return tuple(dict.fromkeys(name for part in self.parts for name in part.lacking))

    def summary(self) -> dict[str, object]:
        """The reading as the API, the signal record and the eval show it."""
        return {
            "question": self.question,
            "kind": self.kind,
            "parts": [{"text": p.written, "kind": p.kind, "lacking": list(p.lacking)} for p in self.parts],
            "continues": self.continues,
            "instructed": self.instructed,
            "lacking": list(self.lacking),
            "corrections": [list(pair) for pair in self.corrections],
            "figure": self.figure,
        }
