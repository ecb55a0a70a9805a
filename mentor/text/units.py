"""Quotable units of module text: what the extractive engine may quote and what a citation shows."""

from __future__ import annotations

from dataclasses import dataclass

from mentor.text.markdown import blocks
from mentor.text.sentences import MODULE, split_sentences

# A unit shorter than this many words means little on its own ("FSDP is the same idea.") and joins the one before.
MIN_UNIT_WORDS = 6


@dataclass(frozen=True, slots=True)
class Unit:
    """A quotable piece of a passage: a sentence, a list item, a table row or a line of a worked example."""

    text: str
    index: int


def split_units(text: str) -> list[Unit]:
    """Cut chunk text into quotable units, rendering table rows as plain sentences."""
    units: list[str] = []
    header: tuple[int, list[str]] | None = None  # the group of the table it heads, and its cells
    for block in blocks(text, lenient=True):
        if block.kind == "code":  # formulas stay code; the example's "-> conclusion" lines read as prose
            line = block.text.removeprefix("-> ").strip()
            units.append(f"`{line}`" if "=" in line else line)
        elif block.kind == "table":
            # A table's first row names its columns; a table ends at other text or at a blank line.
            if header is None or header[0] != block.group or block.after_blank:
                header = (block.group, list(block.cells))
            else:
                units.append(_table_row(header[1], list(block.cells)))
        else:
            units.extend(split_sentences(block.text, MODULE))
    merged: list[str] = []
    for unit in units:
        if merged and merged[-1].endswith(":"):
            merged[-1] = f"{merged[-1]} {unit}"  # "For a 7B model, that alone is:" belongs with its formula
        elif merged and len(unit.split()) < MIN_UNIT_WORDS and not unit.startswith("`"):
            merged[-1] = f"{merged[-1]} {unit}"  # "FSDP is the same idea." means nothing on its own
        else:
            merged.append(unit)
    return [Unit(u, i) for i, u in enumerate(merged)]


def _table_row(header: list[str], cells: list[str]) -> str:
    first, rest = cells[0], list(zip(header[1:], cells[1:], strict=False))
    details = "; ".join(f"{name.lower()}: {value}" for name, value in rest)
    return f"{first} — {details}."
