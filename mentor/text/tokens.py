"""Words as retrieval and the grounding check compare them: lower-case, no stop words, Snowball-stemmed."""

from __future__ import annotations

import re
from importlib import resources

import Stemmer

TOKEN = re.compile(r"[a-z0-9]+")
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having he her
    here hers him his how i if in into is it its itself just me more most my no nor not now of off on once only
    or other our ours out over own same she should so some such than that the their theirs them then there these
    they this those through to too under until up very was we were what when where which while who whom why will
    with would you your yours explain tell please mean means whats what's hi hey thanks work works use used
    using good best better thing things way get make need know understand example question help like find say
    said give show list choose choosing pick decide difference different differ compare comparison versus vs name hello
    mail email phone contact thank regards cheers doesn don isn aren wasn weren won wouldn shouldn couldn didn
    ll ve re pls plz lol thx ok okay hmm btw tldr tl dr eli5 quick module lesson chapter section course topic""".split()
)
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


# Words of asking, pleading and pasted logs: they say how a learner asks, not what about, so they neither count
# as a topic the module covers nor as one it lacks. "my fp16 run keeps giving inf losses, any tips?" is about
# fp16 and loss; "Attempted loss scale: 65536, reducing to 32768 — why?" is about loss scale.
ASKING_WORDS = """actually advice anyone attempt attempted basically bother case cause caused causes change changes
        clarify come comes confused confusing correct currently does doing done exactly fix fixing go goes going
        guess happen happening happens hold holds idea ideas improve instead issue keep keeps kind lot mean
        meaning moment might mine need option options overall part parts point possible practice practical
        probably problem problems really reason reasons recommend recommended reducing reduce reduced right run
        running runs save saves saving see seem seems setting setup simple simply someone something sometimes
        sort start step steps still stuck suggest suggestion sure take takes tip tips trick tricks trouble true
        try trying tried typical typically usually want wanted warning whole wrong yes yet giving gives given
        uses compared comparing next previous another else more other keeps kept getting gets got tried asks
        asked card cards box paper papers author authors wrote written write read reading book books source
        sources cite cited citation citations diff sorry call email mail phone ssn git clone http https url btw
        cheers regards pls plz solve solves solved solving address addresses addressed purpose help helps deal buy
        buys wat wut thx abt lol lmao idk tbh imo summarize summarise recap tldr eli5 mentor ty tysm exam exams
        tomorrow today tonight think thought dumb stupid silly hour hours minute minutes week understand understood
        understanding study studying homework assignment class"""
# Stemmed like a question's words, stop words included: "needed" stems to "need", a stop word only as written.
ASKING = frozenset(tokenize(ASKING_WORDS)) | frozenset(_stemmer.stemWords(ASKING_WORDS.split()))

# Ordinary English words ("already", "size", "speed"): never named as a topic the module lacks. Topic words are
# rarer ("fp8", "slower", "throughput"). Derived from wordfreq; see the file's header.
COMMON_WORDS = frozenset(
    line
    for line in resources.files("mentor.text").joinpath("common_words.txt").read_text(encoding="utf-8").splitlines()
    if line and not line.startswith("#")
)
