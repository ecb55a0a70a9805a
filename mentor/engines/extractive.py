"""The offline engine: answers from the best-matching sentences of the retrieved passages, plus calculators.

It never writes a fact of its own. Sentences are scored against the question (embedding similarity plus the
share of question words they contain), near-duplicates are dropped (the module repeats itself in its
reference and one-liner sections), and the chosen ones are kept in reading order, each with its citation.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from mentor.answer import Answer, Citation, Question, ToolCall
from mentor.embeddings import Embedder
from mentor.engines.planner import PlannedCall
from mentor.engines.tool_calls import run_tool_call
from mentor.framing import HINT_CALC, HINT_CHECK, HINT_QUESTION
from mentor.retrieve import Passage
from mentor.safety import looks_like_injection, sanitize_markdown
from mentor.text import Unit, split_units, tokenize
from mentor.tools.registry import title_of

ENGINE = "extractive"
MAX_UNITS = {"explain": 3, "brief": 1, "hint": 1}


class ExtractiveEngine:
    """Composes answers from passages and calculator results; no network, no model beyond the embedder."""

    name = ENGINE

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder
        self._units: dict[str, tuple[list[Unit], np.ndarray]] = {}
        self._lock = threading.Lock()

    def answer(self, question: Question, plan: Sequence[PlannedCall], *, retrieval_query: str) -> Answer:
        """Answer `question` from its passages, running the planned calculators."""
        tool_calls = [run_planned(call) for call in plan]
        # For a calculation, quote what the module says about that calculation, not whatever shares its numbers.
        topics = " ".join(dict.fromkeys(title_of(call.name) for call in plan))
        chosen = self._choose(question, f"{retrieval_query} {topics}".strip(), calculation=bool(plan))
        # [n] is the passage's retrieval rank, the same numbering the LLM engine sees.
        citations: dict[int, Citation] = {}
        quoted: list[str] = []
        for passage, unit in chosen:
            citations.setdefault(
                passage.rank,
                Citation(passage.rank, passage.chunk_id, passage.section_id, passage.section_title, unit.text),
            )
            # Each quote ends as a sentence, so the grounding check reads it as one.
            text = unit.text if unit.text.endswith((".", "!", "?")) else f"{unit.text}."
            quoted.append(f"{text} [{passage.rank}]")
        text = sanitize_markdown(compose(question.style, quoted, tool_calls), allowed_urls=question.allowed_urls)
        return Answer(
            text=text,
            citations=[citations[n] for n in sorted(citations)],
            tool_calls=tool_calls,
            out_of_scope=False,
            engine=ENGINE,
            model=None,
            prompt_version=None,
            passages=list(question.passages),
        )

    def _choose(self, question: Question, query: str, *, calculation: bool) -> list[tuple[Passage, Unit]]:
        if not question.passages:
            return []
        query_vector = self._embedder.embed_query(query)
        query_terms = set(tokenize(query))
        named = [p for p in question.passages if query_terms and query_terms <= set(tokenize(p.section_title))]
        if named and not calculation:
            # "give me the interview one-liners" names a section: quote it rather than a lookalike sentence.
            passage = min(named, key=lambda p: p.rank)
            units = [u for u in self._units_of(passage)[0] if not looks_like_injection(u.text)]
            return [(passage, unit) for unit in units[: MAX_UNITS[question.style] + 2]]
        scored: list[tuple[float, Passage, Unit, np.ndarray]] = []
        for passage in question.passages:
            units, vectors = self._units_of(passage)
            title_terms = set(tokenize(passage.section_title))  # "interview one-liners" names a section
            for unit, vector in zip(units, vectors, strict=True):
                if looks_like_injection(unit.text) or len(unit.text.split()) < 4:
                    continue
                terms = set(tokenize(unit.text)) | title_terms
                overlap = len(query_terms & terms) / len(query_terms) if query_terms else 0.0
                score = float(vector @ query_vector) + 0.3 * overlap + 0.02 * (len(question.passages) - passage.rank)
                scored.append((score, passage, unit, vector))
        if not scored:
            return []
        scored.sort(key=lambda item: -item[0])
        limit = MAX_UNITS[question.style] if not calculation else min(2, MAX_UNITS[question.style])
        best = scored[0][0]
        picked: list[tuple[float, Passage, Unit, np.ndarray]] = []
        for item in scored:
            if len(picked) == limit or item[0] < 0.8 * best:
                break
            terms = set(tokenize(item[2].text))
            if any(
                float(item[3] @ other[3]) > 0.85 or jaccard(terms, set(tokenize(other[2].text))) > 0.45
                for other in picked
            ):
                continue  # the module says this twice (reference, one-liners); once is enough
            picked.append(item)
        picked.sort(key=lambda item: (item[1].position, item[2].index))
        return [(passage, unit) for _, passage, unit, _ in picked]

    def _units_of(self, passage: Passage) -> tuple[list[Unit], np.ndarray]:
        cached = self._units.get(passage.chunk_id)
        if cached is None:
            units = split_units(passage.text)
            vectors = self._embedder.embed_documents([u.text for u in units]) if units else np.zeros((0, 1))
            cached = (units, vectors)
            with self._lock:
                self._units[passage.chunk_id] = cached
        return cached


def jaccard(a: set[str], b: set[str]) -> float:
    """Shared words over all words of two sentences."""
    return len(a & b) / len(a | b) if a or b else 0.0


def run_planned(call: PlannedCall) -> ToolCall:
    """Run one planned calculator; a calculator's refusal becomes a ToolCall with `error`."""
    return run_tool_call(call.name, call.arguments, assumed=call.assumed)


def compose(style: str, quoted: Sequence[str], tool_calls: Sequence[ToolCall]) -> str:
    """Lay out the answer for its style; a hint never states the calculators' results."""
    ok = [c for c in tool_calls if c.error is None]
    failed = [c for c in tool_calls if c.error is not None]
    if style == "hint":
        parts = [HINT_CALC if tool_calls else HINT_QUESTION]
        if quoted:
            parts.append(f"First step: {quoted[0]}")
        if tool_calls:
            parts.append(HINT_CHECK)
        return "\n\n".join(parts)
    calculations = [f"**{title_of(c.name)}:** {c.explanation}" for c in ok]
    problems = [f"I could not compute `{c.name}`: {c.error}" for c in failed]
    if style == "brief":
        body = calculations[:1] or list(quoted[:1])
        return "\n\n".join([*body, *problems])
    sections = []
    if calculations:
        sections.append("\n\n".join(calculations))
    if quoted:
        sections.append(" ".join(quoted))
    sections.extend(problems)
    return "\n\n".join(sections)
