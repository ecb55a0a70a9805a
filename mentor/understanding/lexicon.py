"""What the reader knows of one module's words: the words it uses (spelling is corrected toward them first), their
stems, and its glossary (the module's shorthand as learners write it, from the module's front matter).

A glossary entry is matched on whole words, in any case, with hyphens and spaces inside a term ignored and
inflections alike: the entry "zero-3" matches "ZeRO3", "zero 3" and "Zero-3"; "idle" matches "idling". What it
stands for is added beside the learner's words ("DP: what does each GPU hold? (data parallel)"), never in their
place, so both the learner's term and the module's are searched.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from mentor.text.tokens import stems

WORD = re.compile(r"[a-z0-9]+(?:_[a-z0-9]+)*")  # a word as the glossary and the speller read it: "torch_dtype" is one
# "30B", "80GB", "4k", "1e24": a number (in scientific notation too) and its unit, not a word
QUANTITY = re.compile(r"\d+(?:\.\d+)?(?:[eE][+-]?\d+)?[A-Za-z]{0,3}")
COMPOUND = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)+")  # "over-train", "weight-only": also written as one word
LONGEST = 4  # words in the longest glossary term a learner writes ("one token at a time" is five: it is its own key)


@dataclass(frozen=True, slots=True, eq=False)
class Lexicon:
    """One module's words, their stems, and its glossary (normalised term -> the module's words for it)."""

    words: frozenset[str] = frozenset()
    stems: frozenset[str] = frozenset()
    glossary: Mapping[str, str] = field(default_factory=dict)
    longest: int = 1  # words in the longest glossary term
    # `expansions` is asked of every word of a message, several times (spelling, lacking, coverage), and of the
    # message: kept per lexicon, and gone with it when the module is indexed anew.
    _expanded: Callable[[str], tuple[str, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_expanded", functools.lru_cache(maxsize=16384)(self._expand))

    @classmethod
    def of(cls, texts: Iterable[str], glossary: Iterable[tuple[str, str]] = ()) -> Lexicon:
        """The lexicon of a module's texts (its chunks) and its glossary entries."""
        texts = [text.lower() for text in texts]
        # A hyphenated word is also known as one word ("over-train": "overtrained", "overtraining").
        joined = {c.replace("-", "") for text in texts for c in COMPOUND.findall(text)}
        words = frozenset(w for text in texts for w in WORD.findall(text)) | joined
        terms = {_key(term): expansion for term, expansion in glossary}
        longest = max((len(WORD.findall(term.lower())) for term, _ in glossary), default=1)
        known = words | {w for term, _ in glossary for w in WORD.findall(term.lower())}
        return cls(known, frozenset(stems(sorted(known))), terms, longest)

    def expansions(self, text: str) -> tuple[str, ...]:
        """What the glossary terms in `text` stand for, in order of appearance, each once."""
        return self._expanded(text)

    def _expand(self, text: str) -> tuple[str, ...]:
        tokens = WORD.findall(text.lower())
        if not self.glossary or not tokens:
            return ()
        stemmed = stems(tokens)
        found: dict[str, None] = {}
        for start in range(len(tokens)):
            for size in range(min(self.longest, len(tokens) - start), 0, -1):
                expansion = self.glossary.get("".join(stemmed[start : start + size]))
                if expansion is not None:
                    found.setdefault(expansion, None)
                    break
        return tuple(found)

    def spell_out(self, text: str) -> str:
        """`text` with what its glossary terms stand for added in brackets: "z3?" -> "z3? (ZeRO stage 3)"."""
        found = self.expansions(text)
        return f"{text} ({', '.join(found)})" if found else text


def _key(term: str) -> str:
    """A glossary term as it is looked up: its words stemmed and joined ("zero-3" -> "zero3")."""
    return "".join(stems(WORD.findall(term.lower())))
