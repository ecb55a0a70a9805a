"""Learners' misspellings corrected by libraries: toward the module's own words first, ordinary English second.

wordfreq (word frequencies of web, books and chat text, in its package) says how common a word is; rapidfuzz finds
the words one or two edits away (optimal string alignment: a letter extra, missing, wrong, or two swapped). Chosen
over symspellpy: one frequency source answers both questions the reader asks ("is this a typo?" and "is this an
ordinary word, not a topic?"), its vocabulary knows chat ("lol", "idk", "thx"), and nothing is precomputed at start
(symspellpy's 82,765-word dictionary with two edits builds its delete index for about a second and 100 MB).

- A word the module uses (or one of its inflections), a number or a glossary term is kept.
- A word more common than `ORDINARY` is kept: "bread" is a word, not a typo of "read".
- Else, the module's nearest word within `edits` is taken ("paralel" -> "parallel", "pipline" -> "pipeline",
  "quantisation" -> "quantization"), in the text retrieval searches.
- Else, a long word (`ENGLISH_LETTERS`) one slip of the keyboard from a far more common English word is taken
  ("mdoule" -> "module", "introuced" -> "introduced", "multilpying" -> "multiplying"), and a shorter one only when
  two of its letters were swapped ("thnig" -> "thing") or, in five letters, one replaced ("wbats" -> "whats");
  otherwise it only tells that it is a typo, not a topic the module lacks (`english_correction`: "teh" is the slip
  of "the", while "peft" would read as "pest").
- A word written without its vowels after the first letter is read as the module's word it shortens ("lss" ->
  "loss"), else as the most common English word it shortens, when that word is common (`COMMON`) and far more common
  than the shorthand ("wht" -> "what", "abt" -> "about", "ppl" -> "people", "shld" -> "should", "sry" -> "sorry":
  doubled letters may be written once); a topic's initialism is not shortened from a common word ("sft" is no
  "soft", "mlp" nothing). No list of abbreviations: the rule is the one learners follow, checked against the
  module's words and wordfreq's (`Speller.shorthand`, `english_shorthand`).
- A name (a capital inside a word not all capitals: "AdamW", "QLoRA") is never corrected, a word with digits never
  toward English.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from rapidfuzz import process
from rapidfuzz.distance import OSA
from wordfreq import top_n_list, zipf_frequency

from mentor.text.tokens import stems
from mentor.understanding.lexicon import Lexicon

LANGUAGE = "en"
ORDINARY = 3.5  # Zipf frequency (log10 per billion words) of an ordinary word: "exam" 4.3, "mentor" 3.9, "qlora" 0
MORE_COMMON = 1.5  # an English correction is this much more common than the word written ("dosent" 2.4 -> "doesnt" 4.1)
ENGLISH_WORDS = 40_000  # the English words a typo may be of: wordfreq's most frequent, letters only
MIN_LETTERS = 4  # shorter words are left alone: "tp" is no typo of "to", "awq" none of "aw"
ENGLISH_LETTERS = 6  # words this long are rewritten toward English too; shorter ones are often names ("peft")
# ... but a five-letter word with one letter replaced is taken too ("wbats" -> "whats"); one added or dropped is not
# ("mamba" is no typo of "mama", "llava" none of "lava"). Typo sweep: 0.945 without, 0.953 with.
REPLACED_LETTERS = 5
# Shorthand: a word of at least `SHORTHAND_LETTERS` letters, no vowel after its first, stands for an English word at
# least this common (Zipf: "what" 6.4, "model" 5.3, "soft" 4.7), one the module does not use already.
COMMON = 5.0
SHORTHAND_LETTERS = 3
VOWELS = frozenset("aeiou")
TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9']*[A-Za-z0-9]")
DIGITS = re.compile(r"\d+")
MAX_CORRECTED = 16  # a pasted page of names is not respelled word by word (each look-up costs a few milliseconds)


@dataclass(frozen=True, slots=True)
class Correction:
    """One word as written and as read."""

    written: str
    read: str


def edits(word: str) -> int:
    """How many edits a word of this length may be from the word it was meant to be."""
    return 1 if len(word) < 8 else 2


@functools.cache
def _english_by_length() -> dict[int, list[str]]:
    """wordfreq's most frequent words, letters only, grouped by length (loaded once, ~15 ms)."""
    by_length: dict[int, list[str]] = {}
    for word in top_n_list(LANGUAGE, ENGLISH_WORDS):
        if word.isalpha():
            by_length.setdefault(len(word), []).append(word)
    return by_length


def consonants(word: str) -> str:
    """`word`'s first letter and its consonants after it: "about" -> "abt", "people" -> "ppl"."""
    return word[0] + "".join(ch for ch in word[1:] if ch not in VOWELS)


def _abbreviated(word: str) -> bool:
    """True for a word that may be another written without its vowels: letters only, none after the first a vowel."""
    return len(word) >= SHORTHAND_LETTERS and word.isalpha() and not VOWELS & set(word[1:])


def _once(letters: str) -> str:
    """`letters` with each run of one letter written once: "srry" -> "sry"."""
    return "".join(ch for i, ch in enumerate(letters) if i == 0 or ch != letters[i - 1])


@functools.cache
def _shorthands() -> tuple[dict[str, str], dict[str, str]]:
    """Each shorthand of a common English word (`COMMON`) to the most common word it shortens: as its consonants
    ("mdl": "model"), and with doubled letters once ("sry": "sorry"), the first preferred ("mdl" is not "middle").
    Built once, from wordfreq's list in order of frequency (~2,000 words)."""
    exact: dict[str, str] = {}
    once: dict[str, str] = {}
    for word in top_n_list(LANGUAGE, ENGLISH_WORDS):
        if frequency(word) < COMMON:
            break
        short = consonants(word) if word.isalpha() else word
        if short != word and len(short) >= SHORTHAND_LETTERS:
            exact.setdefault(short, word)
            once.setdefault(_once(short), word)
    return exact, once


@functools.lru_cache(maxsize=4096)
def english_shorthand(word: str) -> str | None:
    """The common English word `word` shortens by leaving out its vowels ("wht" -> "what"), if there is one far
    more common than `word` itself (`MORE_COMMON`)."""
    if not _abbreviated(word):
        return None
    exact, once = _shorthands()
    meant = exact.get(word) or once.get(word)
    return meant if meant is not None and frequency(meant) >= frequency(word) + MORE_COMMON else None


@functools.lru_cache(maxsize=8192)
def frequency(word: str) -> float:
    """The word's Zipf frequency in English (0 for a word wordfreq never saw)."""
    return zipf_frequency(word, LANGUAGE)


@functools.lru_cache(maxsize=4096)
def english_correction(word: str) -> str | None:
    """The much more common English word that `word` is one slip of the keyboard away from, if there is one.

    A slip keeps the first letter (few typos change it: "flora" is no typo of "qlora"), and does not swap the last
    one for another ("lora" is no typo of "lord"); a three-letter word only swaps two letters ("teh").
    """
    own = frequency(word)
    lists = _english_by_length()
    candidates = [w for size in (len(word) - 1, len(word), len(word) + 1) for w in lists.get(size, ())]
    found = [w for w, _, _ in process.extract(word, candidates, scorer=OSA.distance, score_cutoff=1, limit=None)]
    slips = [w for w in found if w != word and _slip(word, w)]
    best = max(slips, key=frequency, default=None)
    return best if best is not None and frequency(best) >= own + MORE_COMMON else None


def _slip(written: str, meant: str) -> bool:
    """True when `written` is `meant` with one slip of the keyboard (see `english_correction`)."""
    if written[0] != meant[0]:
        return False
    if len(written) != len(meant):
        return len(written) >= MIN_LETTERS
    swapped = sorted(written) == sorted(meant)
    return swapped or (len(written) >= MIN_LETTERS and written[-1] == meant[-1])


def _replaced(written: str, meant: str) -> bool:
    """True when two letters were swapped, or (in a word of `REPLACED_LETTERS` or more) one replaced."""
    return sorted(written) == sorted(meant) or (len(written) >= REPLACED_LETTERS and len(written) == len(meant))


class Speller:
    """Corrects a learner's words toward one module's words."""

    def __init__(self, lexicon: Lexicon) -> None:
        self.lexicon = lexicon
        self._candidates = sorted(w for w in lexicon.words if w.isalnum() and len(w) >= MIN_LETTERS)
        self._module = functools.lru_cache(maxsize=4096)(self._nearest_module_word)
        # Asked of every word of every message, several times (spelling, lacking, coverage): a stem a call.
        self._known = functools.lru_cache(maxsize=8192)(self._knows)
        _shorthands()  # built once per process, at start rather than on a learner's message (~0.1 s)
        # The module's own words by their shorthand, before English's ("lss" is this module's "loss", not "less").
        self._shorthands: dict[str, str] = {}
        for word in sorted(lexicon.words, key=frequency, reverse=True):
            if word.isalpha() and len(short := consonants(word)) >= SHORTHAND_LETTERS and short != word:
                self._shorthands.setdefault(short, word)
                self._shorthands.setdefault(_once(short), word)

    def correct(self, text: str) -> tuple[str, tuple[Correction, ...]]:
        """`text` with its misspelt words replaced, and what was corrected."""
        corrections: list[Correction] = []

        def fix(match: re.Match[str]) -> str:
            written = match.group(0)
            if len(corrections) >= MAX_CORRECTED:
                return written
            found = self.correction(written)
            if found is not None:
                corrections.append(found)
                return found.read
            return written

        return TOKEN.sub(fix, text), tuple(corrections)

    def correction(self, written: str) -> Correction | None:
        """The correction of one word, or None when it is kept as written."""
        word = written.lower()
        if written[1:].islower() and not self.knows(word) and (short := self.shorthand(word)) is not None:
            return Correction(written, short)
        if len(word) < MIN_LETTERS or "'" in word or word.isdigit() or self.knows(word) or frequency(word) >= ORDINARY:
            return None
        if any(ch.isupper() for ch in written[1:]) and not written.isupper():
            return None  # a name as its author writes it ("AdamW", "QLoRA"), not a misspelling (or a shout)
        nearest = self._module(word)
        if nearest is not None:
            return Correction(written, nearest)
        if not word.isalpha():
            return None
        english = english_correction(word)
        if english is None or (len(word) < ENGLISH_LETTERS and not _replaced(word, english)):
            return None  # a shorter word is taken toward English only for letters swapped or one replaced
        return Correction(written, english)

    def shorthand(self, word: str) -> str | None:
        """The word `word` shortens by leaving out its vowels: the module's own first ("lss": "loss"), unless `word`
        is an ordinary English word itself, else a common English word (`english_shorthand`)."""
        if not _abbreviated(word):
            return None
        # An ordinary English word is that word, as for any correction ("on the fly" is no "fully").
        own = self._shorthands.get(word) if frequency(word) < ORDINARY else None
        return own or english_shorthand(word)

    def knows(self, word: str) -> bool:
        """True for a word the module uses, in this form or another of the same stem ("gradient", "gradients")."""
        return self._known(word)

    def _knows(self, word: str) -> bool:
        return word in self.lexicon.words or stems([word])[0] in self.lexicon.stems

    def _nearest_module_word(self, word: str) -> str | None:
        """The module's word within `edits` of `word`, never one with other digits ("h100s" is "h100"; "int2" is
        not "int4")."""
        digits = DIGITS.findall(word)
        found = process.extract(word, self._candidates, scorer=OSA.distance, score_cutoff=edits(word), limit=5)
        return next((w for w, _, _ in found if DIGITS.findall(w) == digits), None)
