"""Words as retrieval and the grounding check compare them: lower-case, no stop words, Snowball-stemmed."""

from __future__ import annotations

import re

import Stemmer
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

TOKEN = re.compile(r"[a-z0-9]+")
# Scikit-learn's English stop words (the Glasgow IR group's list): the library's rather than a hand-kept one.
STOPWORDS = ENGLISH_STOP_WORDS
# Starts only where a word starts: without the look-behind a long unhyphenated word is retried from each of its
# letters, quadratic in its length (a 4,000-letter message cost 0.2 s a call; it is tokenized several times).
HYPHENATED = re.compile(r"(?<![a-z])[a-z]+(?:-[a-z]+)+")
# "fp-16", "zero-3", "int-4": a name written with a hyphen before its number also yields the joined form ("fp16").
NAME_NUMBER = re.compile(r"(?<![a-z0-9])[a-z]+-[0-9]+(?![a-z0-9])")
BRITISH = re.compile(r"(?<=[a-z]{3})is(ation|ations|e|es|ed|ing|er|ers)$")
_stemmer = Stemmer.Stemmer("english")
# Snowball leaves comparatives alone ("smaller" stays "smaller"); these are the ones a learner compares sizes,
# speeds and costs with.
COMPARATIVES = {
    form: base
    for base, forms in {
        "small": "smaller smallest",
        "large": "larger largest",
        "big": "bigger biggest",
        "fast": "faster fastest",
        "slow": "slower slowest",
        "cheap": "cheaper cheapest",
        "long": "longer longest",
        "short": "shorter shortest",
        "wide": "wider widest",
        "narrow": "narrower narrowest",
        "few": "fewer fewest",
        "high": "higher highest",
        "low": "lower lowest",
        "hard": "harder hardest",
        "easy": "easier easiest",
        "new": "newer newest",
        "old": "older oldest",
    }.items()
    for form in forms.split()
}


def tokenize(text: str) -> list[str]:
    """Lower-case word and number tokens without stop words, Snowball-stemmed ("quantized" -> "quantiz").

    Hyphenated words also yield their joined form, so "over-train" matches a learner's "overtrain".
    """
    lower = text.lower()
    words = [t for t in TOKEN.findall(lower) if t not in STOPWORDS and (len(t) > 1 or t.isdigit())]
    words += [w.replace("-", "") for w in HYPHENATED.findall(lower)]
    words += [w.replace("-", "") for w in NAME_NUMBER.findall(lower)]
    return stems(words)


def stems(words: list[str]) -> list[str]:
    """Lower-case words stemmed as `tokenize` stems them (stop words not removed)."""
    # British and American spellings meet ("quantisation" -> "quantization"), in documents and questions alike;
    # so do an adjective and its comparative ("smaller models" answers "a small model").
    return _stemmer.stemWords([COMPARATIVES.get(w, BRITISH.sub(r"iz\1", w)) for w in words])
