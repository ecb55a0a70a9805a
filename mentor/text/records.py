"""A table row of module text read back as a record: what it is about (its first cell) and its attributes.

`mentor.text.units` renders a row as "First cell — column: value; column: value." so that it reads and is quoted as
a sentence; comparison and decision answers need it as the record it was: "Tensor parallel (TP)", {"what is split":
"matmuls within a layer", "when it wins": "a single layer is too big; keep on NVLink"}.
"""

from __future__ import annotations

from dataclasses import dataclass

from mentor.text.units import CELL_BREAK, TABLE_ROW


@dataclass(frozen=True, slots=True)
class Record:
    """One row: its subject and its attributes in column order."""

    head: str
    cells: tuple[tuple[str, str], ...]


def record_of(text: str) -> Record | None:
    """The record a unit renders, or None for a unit that is no table row."""
    row = TABLE_ROW.match(text)
    if row is None:
        return None
    cells = []
    for cell in CELL_BREAK.split(row.group("cells").rstrip(".")):
        name, _, value = cell.partition(": ")
        cells.append((name.strip(), value.strip()))
    return Record(row.group("head").strip(), tuple(cells))
