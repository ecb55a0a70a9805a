"""Markdown, line by line: fences, headings, list items, quotes, rules, tables, and inline emphasis and links.

`blocks` walks Markdown into typed blocks. Two callers read it differently and say so by argument: answers are
read as the Markdown a model writes (quotes, rules, `~~~` fences, numbered items), module chunks as the
extractive engine has always quoted them (`lenient=True`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A code fence's opening; module files are read with their lines stripped, answers as written (up to three
# spaces before it, as CommonMark allows).
FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
# A heading as module files write it: from the line's start, with its level and text (corpus sections).
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")
ITEM = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+")
QUOTE = re.compile(r"^\s*(?:>\s?)+")
RULE = re.compile(r"^\s*(?:(?:[-*_]\s*){3,}|=+)\s*$")
TABLE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?\s*$")
# A heading in an answer: CommonMark's, up to three spaces in and the text optional; "{#id}" is not its text.
_ANSWER_HEADING = re.compile(r"^\s{0,3}#{1,6}(?:\s+|$)")
_HEADING_ID = re.compile(r"\s*\{#[^}]*\}\s*$")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_STRONG = re.compile(r"\*\*|__|~~")
_EMPHASIS = re.compile(r"(?<!\S)[*_]+(?=\S)|(?<=\S)[*_]+(?!\S)|(?<=\w)\*(?=[^\w\s])|(?<=[^\w\s])\*(?=\w)")


@dataclass(slots=True)
class Block:
    """A paragraph, list item, table row, code line or heading, without its Markdown markers."""

    kind: str  # "paragraph", "item", "table", "code" or "heading"
    text: str  # a table row's non-empty cells joined by " | "
    group: int  # consecutive items, rows or code lines share a group: one list, table or code block
    lead_in: int | None = None  # the paragraph just before the group ("The module shows [2]:")
    cells: tuple[str, ...] = ()  # a table row's cells as written, empty ones included
    after_blank: bool = False  # a blank line (outside code) comes between this block and the one before


def table_cells(line: str) -> list[str]:
    """The cells of a stripped table row: "| a | b |" -> ["a", "b"]."""
    return [cell.strip() for cell in line.strip("|").split("|")]


def blocks(text: str, *, lenient: bool = False) -> list[Block]:
    """Cut Markdown into blocks; a plain line right after a paragraph or item continues it.

    `lenient` reads module chunk text the way the extractive engine always has: only ``` fences (any line
    starting with ``` opens or closes one), "- " and "* " items and "|" tables are structure, and a table row
    of dashes, colons or nothing separates. Quotes, rules, headings, `~~~` fences and numbered items stay
    prose there, so that engine's quotes do not change with this code's home.
    """
    found: list[Block] = []
    fence: str | None = None
    group = 0
    open_block = False  # may the next plain line continue the last block?
    blank = False  # a blank line since the last block?

    def add(kind: str, body: str, cells: tuple[str, ...] = ()) -> None:
        nonlocal group, open_block, blank
        previous = found[-1] if found else None
        grouped = kind in ("item", "table", "code")
        lead_in = None
        if grouped and previous is not None and previous.kind == kind:
            lead_in = previous.lead_in
        else:
            group += 1
            if grouped and previous is not None and previous.kind == "paragraph":
                lead_in = len(found) - 1
        found.append(Block(kind, body, group, lead_in, cells, blank))
        open_block = kind in ("paragraph", "item")
        blank = False

    for raw in text.splitlines():
        if fence is not None:
            if _closes(raw, fence, lenient):
                fence = None
            elif raw.strip():
                add("code", raw.strip())
            continue
        opening = _opens(raw, lenient)
        if opening:
            fence = opening
            open_block = False
            continue
        line = raw if lenient else QUOTE.sub("", raw)
        stripped = line.strip()
        if not stripped or _separates(stripped, lenient):
            open_block = False
            blank = blank or not stripped
            continue
        if not lenient and _ANSWER_HEADING.match(line):
            add("heading", _HEADING_ID.sub("", stripped.lstrip("#").strip().rstrip("#").strip()))
        elif stripped.startswith("|"):
            cells = table_cells(stripped)
            add("table", " | ".join(cell for cell in cells if cell), tuple(cells))
        elif (item := _item(line, stripped, lenient)) is not None:
            add("item", item)
        elif open_block and found:
            found[-1].text += " " + stripped
        else:
            add("paragraph", stripped)
    return found


def _opens(raw: str, lenient: bool) -> str | None:
    """The fence a line opens, if it opens one."""
    if lenient:
        return "```" if raw.strip().startswith("```") else None
    opening = FENCE.match(raw)
    return opening.group(1) if opening else None


def _closes(raw: str, fence: str, lenient: bool) -> bool:
    """True when a line closes the open `fence`: at least as long, of its character, and nothing else."""
    stripped = raw.strip()
    if lenient:
        return stripped.startswith("```")
    return stripped.startswith(fence) and not stripped.strip(fence[0])


def _separates(stripped: str, lenient: bool) -> bool:
    """True for a line that only separates: a thematic break, or a table's header separator row."""
    if lenient:
        return stripped.startswith("|") and all(set(cell) <= set("-: ") for cell in table_cells(stripped))
    return bool(RULE.match(stripped)) or (stripped.startswith("|") and TABLE_SEPARATOR.match(stripped) is not None)


def _item(line: str, stripped: str, lenient: bool) -> str | None:
    """A list item's text without its marker, if the line starts an item."""
    if lenient:
        return stripped[2:].strip() if stripped.startswith(("- ", "* ")) else None
    return ITEM.sub("", line, count=1).strip() if ITEM.match(line) else None


def _unlink(match: re.Match[str]) -> str:
    label = match.group(1)
    return f"[{label}]" if label.isdigit() else label  # "[2](#source-2)" is still citation [2]


def strip_inline(text: str) -> str:
    """Strip Markdown emphasis, links and code spans from prose, and collapse its spaces; keep citation markers."""
    if "](" in text:
        text = _LINK.sub(_unlink, text)
    if "*" in text or "_" in text or "~" in text:
        text = _EMPHASIS.sub("", _STRONG.sub("", text))
    return " ".join(text.replace("`", "").split())
