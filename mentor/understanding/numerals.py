"""Numbers written in words: which words write them, and the digits a run of them stands for ("a seventy billion
param model" -> "a 70 billion param model", "on eight GPUs" -> "on 8 GPUs", "ZeRO-three" -> "ZeRO-3").

The words are num2words' own: its spelling of 1-99, of the powers of ten, of a decimal point and of the joiner in
"one hundred and one", so no number word is typed here (num2words is imported on first use). Zero is left as written:
the word is the module's ZeRO far more often than a count. So is one standing alone, a pronoun as often ("which one
is better?"; "on one GPU" means the same either way, one GPU being every calculator's default). A number is valued as
it is spoken ("one hundred and twenty-eight" is 128, "one point four trillion" 1.4 trillion); words side by side that
are no one number are several ("two eighty GB" is "2 80 GB"), and a word that starts none ("point", a scale counting
nothing: "1.3 billion") stays as written.

Read where numbers are needed, never in place of the learner's words: the calculators' plan
(`mentor.engines.planner`) and the grounding check's evidence (`mentor.grounding`).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from mentor.understanding.lexicon import WORD

SCALE_POWERS = (2, 3, 6, 9, 12)  # hundred, thousand, million, billion, trillion, as num2words names them
NUMBERS_SPELT = (*range(100), *(10**power for power in SCALE_POWERS))  # every number word is in one of these
LONGEST = 16  # words in the longest number read ("nine hundred and ninety-nine billion ..."): bounds the work


@dataclass(frozen=True, slots=True)
class _Words:
    units: dict[str, int]  # a one-word number below a hundred: "eight" -> 8, "seventy" -> 70
    scales: dict[str, int]  # "hundred" -> 100, "billion" -> 10**9
    point: str  # the word between a number and its decimals
    joiner: str  # the word between a hundred and what follows ("one hundred and one")
    runs: re.Pattern[str]  # number words joined by spaces or hyphens ("seventy-three", "one point four")


@functools.cache
def number_words() -> frozenset[str]:
    """The words English writes numbers with ("seventy", "thirteen", "billion"), as num2words spells them: a
    quantity, like "70B", not a topic."""
    from num2words import num2words

    return frozenset(word for number in NUMBERS_SPELT for word in WORD.findall(num2words(number)))


@functools.cache
def _words() -> _Words:
    from num2words import num2words

    def new(number: float, *parts: float) -> str:
        """The one word num2words writes for `number` that none of `parts` has ("point" in 1.5)."""
        (word,) = set(num2words(number).split()).difference(*(num2words(part).split() for part in parts))
        return word

    units = {spelt: n for n in range(1, 100) if WORD.fullmatch(spelt := num2words(n))}
    scales = {num2words(10**power).split()[-1]: 10**power for power in SCALE_POWERS}
    point, joiner = new(1.5, 1, 5), new(101, 100, 1)
    word = "|".join(sorted([*units, *scales, point], key=len, reverse=True))
    runs = re.compile(rf"\b(?:{word})(?:[\s-]+(?:{joiner}[\s-]+)?(?:{word}))*\b", re.IGNORECASE)
    return _Words(units, scales, point, joiner, runs)


def digits(text: str) -> str:
    """`text` with the numbers it writes in words written in digits; a number ending in a scale word keeps it
    ("seventy billion" -> "70 billion"), as "70 billion" is written."""
    if not any(word in number_words() for word in WORD.findall(text.lower())):
        return text
    words = _words()
    return words.runs.sub(lambda run: _written(run[0], words), text)


def _written(run: str, words: _Words) -> str:
    """A run of number words with each number in it in digits, the longest from each word on ("two eighty" ->
    "2 80"); a word that starts none ("point"), and one alone, stay."""
    pieces = re.split(r"([\s-]+)", run)
    tokens, gaps = pieces[::2], [*pieces[1::2], ""]
    out, at = [], 0
    while at < len(tokens):
        for end in range(min(len(tokens), at + LONGEST), at, -1):
            number = _valued(tokens[at:end], words)
            if number is not None and number != "1":  # one alone stays: "which one", "the one to use"
                out.append(number + gaps[end - 1])
                at = end
                break
        else:
            out.append(tokens[at] + gaps[at])
            at += 1
    return "".join(out)


def _valued(tokens: list[str], words: _Words) -> str | None:
    """The digits for number words, or None when they are not one number. One ending in a scale word above a
    hundred keeps it ("seventy billion" -> "70 billion", "one point four trillion" -> "1.4 trillion")."""
    *head, tail = [token.lower() for token in tokens]
    if words.scales.get(tail, 0) > 100 and head and not any(words.scales.get(token, 0) > 100 for token in head):
        mantissa = _spoken(head, words)
        return f"{mantissa} {tokens[-1]}" if mantissa else None
    return _spoken([*head, tail], words)


def _spoken(tokens: list[str], words: _Words) -> str | None:
    """The digits of a number spoken in `tokens` (lowercase), with its decimals, if it is one number."""
    if words.point not in tokens:
        integer = _integer(tokens, words)
        return None if integer is None else str(integer)
    at = tokens.index(words.point)
    integer, decimals = _integer(tokens[:at], words), tokens[at + 1 :]
    if integer is None or not decimals or any(words.units.get(token, 10) >= 10 for token in decimals):
        return None
    return f"{integer}." + "".join(str(words.units[token]) for token in decimals)


def _integer(tokens: list[str], words: _Words) -> int | None:
    """The whole number spoken in `tokens` ("one hundred and twenty-eight" -> 128), or None."""
    whole, current, last = 0, 0, ""
    for at, token in enumerate(tokens):
        if token in words.units:
            value, before = words.units[token], words.units.get(last)
            # Tens then a unit is one number ("seventy three"); any other two in a row are two numbers.
            if before is not None and not (before % 10 == 0 and before > 10 and value < 10):
                return None
            # After a thousand or more, the joiner or a hundreds group goes on ("two thousand and forty-eight", "two
            # thousand three hundred"); "a seventy billion one" is a number and a pronoun.
            following = tokens[at + 1] if at + 1 < len(tokens) else ""
            if words.scales.get(last, 0) > 100 and words.scales.get(following, 0) != 100:
                return None
            current += value
        elif token == words.joiner and last in words.scales:
            pass
        elif token in words.scales and not current:
            return None  # a scale counts something before it: "1.3 billion" is the learner's digits' own
        elif words.scales.get(token) == 100:
            current *= 100
        elif token in words.scales:
            whole, current = whole + current * words.scales[token], 0
        else:
            return None
        last = token
    return whole + current if tokens and last != words.joiner else None
