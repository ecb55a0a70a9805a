"""Starter questions for an empty "Ask the mentor" box, made from the module's own section headings.

A learner facing an empty box does not know what to ask; the module's headings do. The headings chosen are the
ones that name the module's `topics` (its front matter: what it teaches), each the heading sharing most of a topic's
words (`mentor.text.tokenize`, the words retrieval compares); a module without topics, or with fewer topics than
starters, fills up with its sections in reading order. Nothing here knows a module: the wording is one template, the
subject each heading's own text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mentor.corpus import Module, Section
from mentor.text import tokenize

STARTERS = 3
# Of the phrasings tried on the real module's headings with the offline engine ("Tell me about …", "What does the
# module say about …", "What is …", "Explain …"), this one drew the heading's own section for the most headings;
# "What does the module say about …" read as a question about the module and drew its opening instead.
TEMPLATE = "What should I understand about {subject}?"
MATCH = 0.5  # a heading names a topic when it shares at least half of the topic's words
# Numbering before a heading's title ("1 — ", "2. ", "3) ") and a trailing code in brackets with a digit in it
# ("(q16)", "(2022)"): a heading's furniture, not its subject. Brackets without a digit ("(MoE)") are kept.
NUMBERING = re.compile(r"^\s*\d+\s*(?:[.)]|[—–-])\s*")
CODE = re.compile(r"\s*\([^()]*\d[^()]*\)\s*$")


@dataclass(frozen=True, slots=True)
class Starter:
    """A question to start with: its text, and the section whose heading it came from."""

    question: str
    section_id: str
    section_title: str


def subject_of(title: str) -> str:
    """A heading's subject as a sentence can use it: numbering and trailing codes dropped, the first word in lower
    case unless it has capitals past its first letter ("SQL", "iOS" stay as written)."""
    subject = CODE.sub("", NUMBERING.sub("", title)).strip().rstrip(".:?!")
    first, _, rest = subject.partition(" ")
    if first[:1].isupper() and first[1:] == first[1:].lower():
        first = first[:1].lower() + first[1:]
    return f"{first} {rest}".strip()


def starters(module: Module, count: int = STARTERS) -> list[Starter]:
    """Up to `count` starter questions from the module's headings, the topics' headings first."""
    top = min((s.level for s in module.sections), default=1)
    headings = [s for s in module.sections if s.level > top and subject_of(s.title)]  # the title heading aside
    chosen: list[Section] = []
    for topic in module.topics:
        best = _naming(topic, [s for s in headings if s not in chosen])
        if best is not None:
            chosen.append(best)
    chosen += [s for s in headings if s not in chosen]
    picked = sorted(chosen[:count], key=module.sections.index)  # in reading order, as the module teaches them
    return [Starter(TEMPLATE.format(subject=subject_of(s.title)), s.id, s.title) for s in picked]


def _naming(topic: str, headings: list[Section]) -> Section | None:
    """The heading that names `topic` best: most of the topic's words, then fewest words of its own."""
    words = set(tokenize(topic))
    if not words:
        return None
    scored = []
    for index, section in enumerate(headings):
        own = set(tokenize(subject_of(section.title)))
        share = len(words & own) / len(words)
        if share >= MATCH:
            scored.append((-share, len(own - words), index, section))
    return min(scored, key=lambda row: row[:3])[3] if scored else None
