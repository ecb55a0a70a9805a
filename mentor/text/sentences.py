"""Sentences: one splitter, and the rules each reader splits by.

`split_sentences` cuts text at the boundaries a `SentenceRules` finds. The readers do not agree yet: each rule
set below is the one its reader has always used, named and explained here so the differences are visible in
one place. Moving a reader to `ANSWER` changes what it measures or quotes, so that is a change of its own (with
an eval run), not part of moving the code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mentor.text.markers import NUMBER_LIST


@dataclass(frozen=True, slots=True)
class SentenceRules:
    """Where one reader ends a sentence.

    A match of `boundary` ends a sentence, unless it starts with "." right after one of `abbreviations` ("e.g.",
    "et al."), or after one of `soft_abbreviations` ("etc.") when the next word is not capitalised.
    """

    boundary: re.Pattern[str]
    abbreviations: frozenset[str] = frozenset()
    soft_abbreviations: frozenset[str] = frozenset()


_LAST_WORD = re.compile(r"((?:[A-Za-z]\.)+[A-Za-z]|[A-Za-z]+)\W*$")

# Answers, as the grounding check reads them: an end mark with what closes with it (quotes, a bracket,
# emphasis), and the citation markers right after it ("shards it. [1]"), which belong to that sentence.
ANSWER = SentenceRules(
    boundary=re.compile(
        rf"""[.!?]+["'”’)*_`]*                   # an end mark and what closes with it
            (?P<cites>(?:\s*\[{NUMBER_LIST}\])*)   # markers that belong to the sentence: "shards it. [1]"
            (?=\s+\S|\s*$)""",
        re.VERBOSE,
    ),
    # Never a sentence end: "e.g. 7B", "et al. 2020", "vs. fp16".
    abbreviations=frozenset({"e.g", "i.e", "al", "vs", "cf", "approx", "ca", "fig", "eq", "no", "resp"}),
    soft_abbreviations=frozenset({"etc"}),
)
# The eval's claim sentences (mentor.evaluate.metrics), as every report so far has counted them: four
# abbreviations, case-sensitive; comma-only marker lists; no curly closing quotes. Kept so citation coverage
# stays comparable with earlier reports; it parts from ANSWER on "cf.", "etc.", "[1-3]" or "“…”".
CLAIMS = SentenceRules(
    re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\bal)(?<!\bvs)[.!?]+[\"')*_`]*(?:\s*\[\d+(?:\s*,\s*\d+)*\])*(?=\s+\S|\s*$)")
)
# Module prose as the extractive engine quotes it (mentor.text.units): an end mark right before the space, and a
# word, bracket, quote or emphasis after it, so "x. — y" stays one sentence. The abbreviations are suffixes, so
# "optimal. Next" does not split either. Kept so the engine's quotes, and the eval, do not change.
MODULE = SentenceRules(re.compile(r"(?<!e\.g\.)(?<!i\.e\.)(?<!al\.)(?<!vs\.)(?<=[.!?])\s+(?=[\w(\"'`*~])"))
# A rough cut: every end mark before a space, and every line break. Enough to tell which words an LLM's
# marker stands among (the chat's citations) and to pick a quote (the stub LLM); no abbreviations.
ROUGH = SentenceRules(re.compile(r"(?<=[.!?])\s+|\n+"))


def split_sentences(text: str, rules: SentenceRules = ANSWER) -> list[str]:
    """Cut `text` into stripped, non-empty sentences at the boundaries `rules` finds."""
    pieces: list[str] = []
    start = 0
    for match in rules.boundary.finditer(text):
        if (rules.abbreviations or rules.soft_abbreviations) and _abbreviated(text, start, match, rules):
            continue
        pieces.append(text[start : match.end()].strip())
        start = match.end()
    pieces.append(text[start:].strip())
    return [piece for piece in pieces if piece]


def _abbreviated(text: str, start: int, match: re.Match[str], rules: SentenceRules) -> bool:
    """True when the boundary is the dot of an abbreviation ("e.g."), not a sentence's end."""
    if not match.group().startswith("."):
        return False
    before = _LAST_WORD.search(text, max(start, match.start() - 16), match.start())
    word = before.group(1).lower() if before else ""
    if word in rules.abbreviations:
        return True
    following = text[match.end() :].lstrip()[:1]
    return word in rules.soft_abbreviations and bool(following) and not following.isupper()
