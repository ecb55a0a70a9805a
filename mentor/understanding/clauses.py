"""A message cut into clauses by its formal syntax alone: sentence ends, line breaks, semicolons, Markdown rules and
fences, chat-template tokens and pseudo-tags ("[INST]", "<|im_start|>", "<system>"), and a role object pasted as
JSON. What each clause does (asks, instructs, chats) is decided from examples (`mentor.understanding.acts`), never
from the words here.

Commas and colons cut a clause into pieces (`pieces_of`), each read on its own for what it does (chat or an order
before a question is left out), and put back together where they ask together: a condition stays with its question
("if my model fits on one GPU, which parallelism?"), two questions become two parts ("which paper for Chinchilla,
and who wrote the ZeRO paper?").
"""

from __future__ import annotations

import re
import unicodedata

# Every pattern starts its match at a boundary character or after a non-space (`(?<!\s)`), so a run of spaces is
# matched once from its start: trying every start inside a 4,000-space message was quadratic.
BOUNDARY = re.compile(
    r"(?<=[.!?])\s+(?=\S)"  # a sentence end before the next word ("1.4T" and "e.g." have no space after the dot)
    r"|(?<=\?)(?=\w)"  # a question mark right before more words: "zero?how does ..."
    r"|(?<![^\S\n\r])[^\S\n\r]*[\n\r]+\s*"  # a line break, with the spaces around it
    r"|(?<!\s)\s*;(?=\s)\s*"  # a semicolon before a space ("tl;dr" is a word)
    r"|(?<!\s)\s*(?:`{3,}|~{3,})\w*\s*"  # a code fence
    r"|(?<![\s#=*_<>~-])\s*(?:#{2,}|-{3,}|={3,}|\*{3,}|_{3,}|>{3,}|<{3,})\s*"  # Markdown rules, "### ... ###"
    r"|(?:(?<!\s)\s*)?(?:<\|[^|<>]{1,30}\|>|\[/?[A-Z]{2,10}\]|<</?[A-Z]{2,10}>>|</?[A-Za-z][\w-]{0,30}>)\s*"  # tokens
    r"|(?<!\s)\s*(\{[^{}]{0,200}\"role\"[^{}]{0,400}\})\s*",  # a chat message pasted as JSON: a clause of its own
)
# A chat template's own syntax in a learner's message is an attempt to speak as the system (formal, not wording):
# special tokens, Llama's markers, a role object, and tags named by the chat roles of the OpenAI API.
TEMPLATE = re.compile(
    r"<\|[^|<>]{1,30}\|>|\[/?INST\]|<</?SYS>>|\{[^{}]{0,200}\"role\"\s*:"
    r"|</?(?:system|developer|assistant|user|tool)\s*>",
    re.I,
)
COMMA = re.compile(r"[,:]\s+")
# A list's item marker: a number ("1.", "2)") at a line's start or after a sentence's end, or a bullet ("-", "*",
# "•") at a line's start (`list_items` checks where it stands).
ITEM_MARK = re.compile(r"(\d{0,2})([.)*•-])[ \t]+")
NUMBERED, BULLETS = ".)", "-*•"
WORDY = re.compile(r"\w")  # a piece of marks and rules ("---", "!!!") is no clause


EMPHASIS = re.compile(r"([!?])[!?]+")  # "!!", "?!?": repeated marks of a sentence end


def normalise(message: str) -> str:
    """NFKC (fullwidth letters and compatibility forms as their plain selves), no control characters but line
    breaks and tabs, and a run of exclamation and question marks as its first ("thank you!!" reads as "thank
    you!": the classifiers learned from written examples, where emphasis by repetition is rare)."""
    text = unicodedata.normalize("NFKC", message)
    text = "".join(ch for ch in text if ch in "\n\t" or unicodedata.category(ch)[0] != "C")
    return EMPHASIS.sub(r"\1", text)


def split_clauses(message: str) -> list[str]:
    """The message's clauses in order, each stripped; pieces without a word character are dropped."""
    return [piece.strip() for piece in BOUNDARY.split(message) if piece and WORDY.search(piece)]


def list_items(text: str) -> list[str]:
    """The items of a message written as a list, their markers cut off (what stands before the first item is one of
    its own); `[text]` when it is no list: fewer than two markers of one kind, bullets only at a line's start, numbers
    at a line's start or after a sentence's end, counting up by one ("1. ... 2. ..."; "I have 2. 3 GPUs" marks
    nothing)."""
    marks: list[re.Match[str]] = []
    for mark in ITEM_MARK.finditer(text):
        number, sign = mark.groups()
        before = text[: mark.start()].rstrip(" \t")
        at_line = not before or before.endswith("\n")
        if number:
            after_sentence = before.endswith((".", "?", "!")) and len(before) < mark.start()
            if sign not in NUMBERED or not (at_line or after_sentence):
                continue
            if marks and (not marks[0].group(1) or int(number) != int(marks[-1].group(1)) + 1):
                continue
        elif sign not in BULLETS or not at_line or (marks and marks[0].group(1)):
            continue
        marks.append(mark)
    if len(marks) < 2:
        return [text]
    ends = [m.start() for m in marks[1:]] + [len(text)]
    items = [text[: marks[0].start()], *(text[m.end() : end] for m, end in zip(marks, ends, strict=True))]
    return [item.strip() for item in items if WORDY.search(item)]


def pieces_of(clause: str) -> list[tuple[str, str]]:
    """A clause cut at its commas and colons: each piece with the mark before it ("" for the first). A piece
    without a word character joins the one before it."""
    pieces: list[tuple[str, str]] = []
    start, mark = 0, ""
    for match in COMMA.finditer(clause):
        piece = clause[start : match.start()].strip()
        if WORDY.search(piece):
            pieces.append((mark, piece))
            mark = match.group(0)
        start = match.end()
    rest = clause[start:].strip()
    if WORDY.search(rest) or not pieces:
        pieces.append((mark, rest or clause.strip()))
    return pieces
