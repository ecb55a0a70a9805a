"""What an answer cites: `[n]` markers turned into citations with quotes, the same sources in plain words for a
reader who sees only the text, and the grounding check of an answer against the passages it cites, the question,
the conversation and its tool results.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from mentor.answer import Answer, Citation, Question
from mentor.framing import FIXED_SENTENCES
from mentor.grounding import Grounding, ToolEvidence, check_grounding
from mentor.text import ROUGH, prune_markers, rank_markers, split_sentences, split_units, tokenize


def with_citations(answer: Answer) -> Answer:
    """Turn the [n] markers of an LLM answer into citations; markers naming no passage are dropped."""
    by_rank = {p.rank: p for p in answer.passages}
    cited: dict[int, Citation] = {}
    for sentence in split_sentences(answer.text, ROUGH):
        for n in rank_markers(sentence):
            passage = by_rank.get(n)
            if passage is not None and n not in cited:
                cited[n] = Citation(
                    n, passage.chunk_id, passage.section_id, passage.section_title, best_quote(passage.text, sentence)
                )
    text = prune_markers(answer.text, by_rank)
    return replace(answer, text=text, citations=[cited[n] for n in sorted(cited)])


SOURCES_HEADING = "Sources:"
# The list `sources_in_words` appends, at the very end of a text: what `without_sources` takes off again.
SOURCES_BLOCK = re.compile(rf"\n\n{SOURCES_HEADING}\n(?:- \[\d+\] [^\n]*(?:\n|\Z))+\Z")


def sources_in_words(citations: Sequence[Citation]) -> str:
    """The sources of an answer for a reader who sees only its text (no citation objects): a list after a blank
    line, each `[n]` marker with the title of the section it cites; "" when nothing is cited."""
    if not citations:
        return ""
    return "\n\n" + "\n".join([SOURCES_HEADING, *(f"- [{c.n}] {c.section_title}" for c in citations)])


def without_sources(text: str) -> str:
    """`text` without the list `sources_in_words` appended to it (an earlier answer a client sends back)."""
    return SOURCES_BLOCK.sub("", text)


def best_quote(passage_text: str, sentence: str) -> str:
    """The passage's sentence that shares the most words with the citing sentence."""
    words = set(tokenize(sentence))
    units = split_units(passage_text)
    if not units:
        return passage_text[:200]
    return max(units, key=lambda u: len(words & set(tokenize(u.text)))).text


def ground(answer: Answer, question: Question) -> Grounding:
    """Check an answer against the passages it cites, the question, the history and its tool results."""
    if answer.out_of_scope:
        return Grounding(grounded=True, unsupported_sentences=[], untraced_numbers=[])
    by_rank = {p.rank: p.text for p in answer.passages}
    numbered = [by_rank.get(n, "") for n in range(1, max(by_rank, default=0) + 1)]
    tools = [ToolEvidence(c.arguments, c.result or {}, c.explanation) for c in answer.tool_calls if c.error is None]
    history = [text for turn in question.history for text in (turn.question, turn.answer)]
    return check_grounding(
        answer.text,
        question=question.text,
        passages=numbered,
        tools=tools,
        history=history,
        exempt=(*FIXED_SENTENCES, *answer.framing),
    )
