"""What the reader needs of one module's words: its lexicon (words, stems, glossary) and the speller over it."""

from __future__ import annotations

from dataclasses import dataclass

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from mentor.understanding.lexicon import WORD, Lexicon
from mentor.understanding.spelling import Speller, frequency

SPECIFIC = 4.5  # Zipf frequency below which a word the module uses names something of it ("inference" 3.4)


@dataclass(frozen=True, slots=True, eq=False)
class ModuleWords:
    """What the reader needs of one module: its lexicon and the speller over it."""

    lexicon: Lexicon
    speller: Speller

    @classmethod
    def of(cls, lexicon: Lexicon) -> ModuleWords:
        return cls(lexicon, Speller(lexicon))

    def read(self, text: str) -> tuple[str, tuple[tuple[str, str], ...]]:
        """`text` as read: misspellings of the module's words corrected, its shorthand spelled out."""
        corrected, corrections = self.speller.correct(text)
        return self.lexicon.spell_out(corrected), tuple((c.written, c.read) for c in corrections)

    def knows(self, word: str) -> bool:
        """True for a word the module uses (in any inflection) or a term of its glossary."""
        return self.speller.knows(word) or bool(self.lexicon.expansions(word))

    def knows_any(self, text: str) -> bool:
        """True when `text` holds a word the module uses that is no stop word ("memory"; not "Q1", "ok")."""
        return any(w not in ENGLISH_STOP_WORDS and self.knows(w) for w in WORD.findall(text.lower()))

    def names_something(self, text: str) -> bool:
        """True when `text` holds a number ("13B", "2 nodes"; not "base64"), a term of the module's glossary ("TP",
        "OOM"), a word the module uses that is rare in English ("inference", not "group" or "here"), or two of its
        words side by side ("loss scale", "the scaling-laws part"): context for a question, not chat."""
        found = WORD.findall(text.lower())
        content = [w not in ENGLISH_STOP_WORDS and self.speller.knows(w) for w in found]
        return any(a and b for a, b in zip(content, content[1:], strict=False)) or any(
            word[0].isdigit()
            or self.lexicon.expansions(word)
            or (self.speller.knows(word) and frequency(word) < SPECIFIC)
            for word in found
        )
