"""Learners' spellings mapped onto a module's words: "paralel" -> "parallel", "zero3" -> "zero", "3",
"scailing" -> "scaling".

Retrieval, the scope decision and the extractive engine's sentence choice read a question's terms the same way
(`module_terms`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Set
from string import ascii_lowercase

from mentor.text.tokens import COMMON_WORDS, stems, tokenize

LETTERS_DIGITS = re.compile(r"[a-z]+|\d+")
WORD = re.compile(r"[A-Za-z]+")
MIN_TYPO_LENGTH = 6  # "bread" is not a misspelt "read": short words are left alone
# Unknown words a text gets respelled at most: a question holds a typo or two, and a pasted page of names would
# otherwise cost ~40 candidate stems per word (35 ms for 4,000 characters of them).
MAX_RESPELLED = 16


def module_terms(text: str, vocab: Set[str]) -> list[str]:
    """The stemmed terms of a learner's `text`, its misspellings of the module's words corrected."""
    return correct(tokenize(respell(text, vocab)), vocab)


def respell(text: str, vocab: Set[str]) -> str:
    """`text` with each long word the module does not use replaced by the module word it becomes without one
    extra letter, with two neighbours swapped back or with a missing letter put in ("scailing", "sacling" ->
    "scaling", "precison" -> "precision"), or else by the ordinary English word a missing letter makes it.

    Done on the word as written, before stemming: the stems of a typo and of its word can differ by more than
    the one edit `correct` allows ("scailing" stems to "scail", "scaling" to "scale"). Ordinary English words
    are never respelled: "filing" is a word, not a typo of "filling".
    """

    tried = 0

    def fixed(match: re.Match[str]) -> str:
        nonlocal tried
        word = match.group(0)
        lower = word.lower()
        if tried >= MAX_RESPELLED or len(lower) < MIN_TYPO_LENGTH or lower in COMMON_WORDS:
            return word
        if stems([lower])[0] in vocab:
            return word
        tried += 1
        edits = list(zip(one_edit(lower), one_edit_stems(lower), strict=True))
        found = next((c for c, stem in edits if stem in vocab), None)
        if found is None:  # "diffrence": a word missing a letter of ordinary English is that word, not a topic
            found = next((c for c, _ in edits if len(c) > len(lower) and c in COMMON_WORDS), word)
        return found

    return WORD.sub(fixed, text)


def one_edit(word: str) -> list[str]:
    """The spellings one typo away from `word`: a letter extra ("scailing"), two neighbours swapped ("sacling"),
    then a letter missing ("precison")."""
    dropped = [word[:i] + word[i + 1 :] for i in range(len(word))]
    swapped = [word[:i] + word[i + 1] + word[i] + word[i + 2 :] for i in range(len(word) - 1)]
    missing = [word[:i] + letter + word[i:] for i in range(len(word) + 1) for letter in ascii_lowercase]
    return dropped + swapped + missing


@functools.lru_cache(maxsize=256)  # stemming a word's ~260 neighbours takes ~0.7 ms, and a question is read often
def one_edit_stems(word: str) -> tuple[str, ...]:
    """The stems of `one_edit(word)`, in its order."""
    return tuple(stems(one_edit(word)))


def near(a: str, b: str) -> bool:
    """True when `a` and `b` differ by at most one edit (insert, delete, substitute or swap)."""
    if a == b:
        return True
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (
            len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]
        )
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    i = 0
    while i < len(short) and short[i] == long_[i]:
        i += 1
    return short[i:] == long_[i + 1 :]


def expand_unknown(terms: list[str], vocab: Set[str]) -> list[str]:
    """Split a term the module does not use at letter/digit seams: "zero3" -> "zero", "3"."""
    out: list[str] = []
    for term in terms:
        parts = LETTERS_DIGITS.findall(term)
        out.extend(parts if term not in vocab and len(parts) > 1 else [term])
    return out


def correct(terms: Iterable[str], vocab: Set[str]) -> list[str]:
    """Terms with unknown letter/digit compounds split and one-edit typos of long module words corrected."""
    corrected: list[str] = []
    for term in expand_unknown(list(terms), vocab):
        if term not in vocab and len(term) >= MIN_TYPO_LENGTH - 1:
            # "paralel", "optimzer", "tensr": one edit away from a long module word is a typo, not a new topic.
            # A five-letter word maps only onto a longer one ("tensr" -> "tensor", never "bread" -> "read").
            shortest = MIN_TYPO_LENGTH if len(term) < MIN_TYPO_LENGTH else 5
            term = next((v for v in sorted(vocab) if len(v) >= shortest and near(term, v)), term)
        elif term not in vocab and len(term) == MIN_TYPO_LENGTH - 2 and term.isalpha():
            # A four-letter stem missing an inner letter of a module word: "tokns" stems to "tokn" -> "token".
            term = next((v for v in sorted(vocab) if len(v) == len(term) + 1 and _dropped_inside(term, v)), term)
        corrected.append(term)
    return corrected


def _dropped_inside(short: str, word: str) -> bool:
    """True when `short` is `word` without one letter that is neither its first nor its last."""
    return any(word[:i] + word[i + 1 :] == short for i in range(1, len(word) - 1))
