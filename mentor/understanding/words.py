"""What the reader needs of one module's words: its lexicon (words, stems, glossary), the speller over it, and which
of its terms its sentences name together."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from mentor.text.tokens import stems
from mentor.understanding.lexicon import WORD, Lexicon
from mentor.understanding.spelling import Speller, frequency

SPECIFIC = 4.5  # Zipf frequency below which a word the module uses names something of it ("inference" 3.4)


@dataclass(frozen=True, slots=True, eq=False)
class ModuleWords:
    """What the reader needs of one module: its lexicon and the speller over it."""

    lexicon: Lexicon
    speller: Speller
    # Each term's stem -> the module's sentences (units) that name it, by number: which terms go together.
    together: Mapping[str, frozenset[int]] = field(default_factory=dict)

    @classmethod
    def of(cls, lexicon: Lexicon, units: Iterable[str] = ()) -> ModuleWords:
        """The words of a module whose text is `lexicon`'s, with its quotable units (sentences, table rows)."""
        found: dict[str, set[int]] = {}
        for number, unit in enumerate(units):
            for stem in set(stems(WORD.findall(unit.lower()))):
                found.setdefault(stem, set()).add(number)
        return cls(lexicon, Speller(lexicon), {stem: frozenset(numbers) for stem, numbers in found.items()})

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

    def apart(self, message: str, previous: str) -> bool:
        """True when `message` names nothing but terms of the module ("bf16?", "what about awq?"), and no sentence of
        the module names one of them beside a term of the `previous` question: the module never discusses them
        together ("bf16?" after "pipeline vs tensor parallel, what's split in each?"; not "awq?" after "does gptq
        need retraining?", which one sentence answers for both). Both are read already."""
        own, before = self._terms(message, only=True), self._terms(previous, only=False)
        if not self.together or not own or not before or own & before:
            return False  # without the module's sentences, nothing says they are apart
        return self._never_together(own, before)

    def own_subject(self, second: str, first: str) -> bool:
        """True when a second question names terms of the module the first does not, and no sentence of the module
        names one of them beside a term of the first: a subject of its own ("W8A8 - why so hard?" after "which
        split helps most when the model has very many layers spread over nodes"), not one the first question's
        holds ("and what about fsdp?" after "what does zero stage 1 shard": one sentence names ZeRO and FSDP). A
        first question naming no term of the module ("what is ring attention, and how does it compare with sequence
        parallelism?") gives nothing to keep apart from: the second leans on it as its words say."""
        own, before = self._terms(second, only=False), self._terms(first, only=False)
        return bool(own - before) and bool(before) and self._never_together(own - before, before)

    def _never_together(self, these: set[str], those: set[str]) -> bool:
        """True when no sentence of the module names one of `these` terms beside one of `those`."""
        together = self.together
        return not any(together.get(a, frozenset()) & together.get(b, frozenset()) for a in these for b in those)

    def _terms(self, text: str, *, only: bool) -> set[str]:
        """The stems of the module's terms in `text`: its specific words (`names_something`'s sense, numbers aside),
        its glossary terms and the module's words they stand for; with `only`, none unless every word that is no
        stop word or number is one of them."""
        found = [w for w in WORD.findall(text.lower()) if w not in ENGLISH_STOP_WORDS and not w[0].isdigit()]
        spelled = {w for expansion in self.lexicon.expansions(text) for w in WORD.findall(expansion.lower())}
        terms = [
            w
            for w in found
            if w in spelled or self.lexicon.expansions(w) or (self.speller.knows(w) and frequency(w) < SPECIFIC)
        ]
        if only and len(terms) < len(found):
            return set()
        return set(stems(terms))
