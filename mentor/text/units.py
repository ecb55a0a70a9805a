"""Quotable units of module text: what the extractive engine may quote and what a citation shows."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mentor.text.markdown import blocks
from mentor.text.sentences import MODULE, split_sentences

# A unit shorter than this many words means little on its own ("FSDP is the same idea.") and joins the one before.
MIN_UNIT_WORDS = 6
MIN_CLAUSE_WORDS = 3  # a clause shorter than this joins the one before it
# Where a unit lists several claims: "; " and " — " outside brackets ("GPTQ minimises ...; AWQ protects ...").
CLAUSE_BREAK = re.compile(r";\s+|\s+—\s+")
# A table row as `_table_row` writes it: "First cell — column: value; column: value."
TABLE_ROW = re.compile(r"^(?P<head>[^—:]{1,60}) — (?P<cells>[\w /()-]{1,30}: .*)$")
CELL_BREAK = re.compile(r";\s+(?=[\w /()-]{1,30}: )")


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


def clauses(text: str) -> list[str]:
    """The claims of a unit that lists several, each readable alone; [] for a unit making one claim.

    A sentence breaks at "; " and " — " outside brackets ("GPTQ minimises output error via Hessian info; AWQ
    protects salient channels; ..."). A table row (`_table_row`) breaks between its cells only, and each cell
    keeps the row's first cell, which names what it describes: "Data parallel (DP) — what is split: the batch
    (full replica per GPU)" and "Data parallel (DP) — when it wins: model fits on one GPU; scale throughput".
    """
    row = TABLE_ROW.match(text)
    if row:
        cells = CELL_BREAK.split(row.group("cells"))
        return [f"{row.group('head')} — {cell}" for cell in cells] if len(cells) > 1 else []
    pieces: list[str] = []
    start = 0
    for match in CLAUSE_BREAK.finditer(text):
        if text.count("(", 0, match.start()) == text.count(")", 0, match.start()):
            pieces.append(text[start : match.start()].strip())
            start = match.end()
    pieces.append(text[start:].strip())
    merged: list[str] = []
    for piece in pieces:
        if merged and len(piece.split()) < MIN_CLAUSE_WORDS:
            merged[-1] = f"{merged[-1]}; {piece}"
        elif piece:
            merged.append(piece)
    return merged if len(merged) > 1 else []
