"""Citation markers: the "[n]" after a sentence that names the retrieved passage it comes from.

One grammar, `MARKER`: a number or a list of them in brackets, "[1]", "[1, 3]", "[2-4]". Readers differ in
which markers they take (a list, or one passage only) and say so by argument, not by a pattern of their own.
"""

from __future__ import annotations

import re
from collections.abc import Container

# The numbers inside one marker; also embedded where a marker may follow a sentence's end (mentor.text.sentences).
NUMBER_LIST = r"\d+(?:\s*[,;–-]\s*\d+)*"
MARKER = re.compile(rf"\[({NUMBER_LIST})\]")
# A range names at most this many passages past its first: "[1-99999]" must not build a 100,000-number set.
MAX_RANGE = 50
# retrieve.search returns at most 50 passages, so a rank has one or two digits: "[2020]" is a year, not a rank.
RANK_DIGITS = 2


def _is_rank(numbers: str) -> bool:
    """True for the inside of a marker that names one passage by its rank: "3", not "1, 3" or "2020"."""
    return numbers.isdigit() and len(numbers) <= RANK_DIGITS


def cited(text: str) -> set[int]:
    """Return every passage number the markers in `text` name: [1], [1, 3], [2-4] (ranges expanded)."""
    found: set[int] = set()
    if "[" not in text:
        return found
    for match in MARKER.finditer(text):
        for part in re.split(r"[,;]", match.group(1)):
            # "[1-2-3]" (a chained range an LLM may write) reads as its ends, 1 to 3; splitting once crashed on "2-3".
            ends = "".join(part.split()).replace("–", "-").split("-")
            first, last = int(ends[0]), int(ends[-1])
            found.update(range(first, min(last, first + MAX_RANGE) + 1))
    return found


def strip_markers(text: str, replacement: str = "", *, lists: bool = True) -> str:
    """Replace the markers in `text`; with `lists=False` only those naming one passage ("[3]", not "[1, 3]")."""
    if lists:
        return MARKER.sub(replacement, text)
    return MARKER.sub(lambda m: replacement if m.group(1).isdigit() else m.group(0), text)


def has_marker(text: str, *, lists: bool = True) -> bool:
    """True when `text` holds a marker; with `lists=False` only one naming a single passage counts."""
    return any(lists or match.group(1).isdigit() for match in MARKER.finditer(text))


def rank_markers(text: str) -> list[int]:
    """The passage ranks named in `text` by single markers of at most `RANK_DIGITS` digits, in order.

    This is the form the LLM is asked to write ("[2]"); lists and longer numbers are left alone.
    """
    return [int(match.group(1)) for match in MARKER.finditer(text) if _is_rank(match.group(1))]


def prune_markers(text: str, known: Container[int]) -> str:
    """Drop the rank markers (as `rank_markers` reads them) whose passage is not in `known`."""

    def keep(match: re.Match[str]) -> str:
        numbers = match.group(1)
        return "" if _is_rank(numbers) and int(numbers) not in known else match.group(0)

    return MARKER.sub(keep, text)
