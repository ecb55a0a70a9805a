"""Plan calculator calls from a learner's own words: "optimizer state for a 13B model", "ZeRO-3 on 64 GPUs",
"int4 70B", "4 stages, 8 micro-batches", "tokens for 7B".

The extractive engine uses the plan to compute; the chat uses it as a scope signal (a calculation about the
module's topics is in scope even when its wording is mostly numbers). Each calculator recognises its own wording
(`recognise_*` next to it in `mentor/tools/`); the planner asks them in the registry's `PLANNING_ORDER`.
Arguments missing from the question are taken from the conversation's earlier turns, then from the module's
worked example (7B), and the answer says so.
"""

from __future__ import annotations

import re
from collections import Counter

from mentor.text import MAX_MESSAGE_CHARS
from mentor.text.sentences import split_sentences
from mentor.tools.registry import PLANNING_ORDER
from mentor.tools.wording import PlanContext, PlannedCall
from mentor.understanding.numerals import digits
from mentor.understanding.reading import Part

__all__ = ["MAX_HISTORY_CHARS", "MAX_QUESTION_CHARS", "PlannedCall", "plan_part", "plan_tools"]

# The work per message is bounded twice. No wording pattern may start a number inside a digit run (see
# mentor/tools/wording.py), so every pattern is linear in the text, and the text is bounded: the question to
# the chat's own message limit, the history to its most recent turns, where the numbers a follow-up leans on are.
MAX_QUESTION_CHARS = MAX_MESSAGE_CHARS
MAX_HISTORY_CHARS = 2 * MAX_MESSAGE_CHARS
NAMES_A_FIGURE = re.compile(r"\b(compute|flops|time|days|memory|size)\b", re.I)


def plan_tools(question: str, history: tuple[str, ...] = (), *, kind: str = "") -> list[PlannedCall]:
    """Recognise which calculators a question asks for and read their arguments from it (and its history); `kind`
    is the kind of answer the reader read it as wanting ("calculation": "what's the biggest model I can train on an
    80GB GPU?" asks for a figure, "how does ZeRO help on 80GB GPUs?" does not).

    A follow-up that changes one number ("and on 256 GPUs instead?") is planned as the earlier question with
    the new number first, so the new value wins wherever both appear. Numbers written in words are read as their
    digits ("a seventy billion model on eight GPUs").
    """
    said = _clip(question, MAX_QUESTION_CHARS)
    question = digits(said)
    history = tuple(digits(text) for text in _recent(history, MAX_HISTORY_CHARS))
    plan = _plan(question, history, kind, written=said)
    if plan:
        return _by_sentence(plan, said, kind)
    # A follow-up may lean on the previous question: with a number, for the previous calculation or for the rule the
    # previous question asked about ("what's the Chinchilla rule?" then "for a 20B model then?"); naming what to
    # compute, for the previous calculation.
    if not history:
        return plan
    if re.search(r"\d", question):
        joined = _plan(f"{question} {history[-1]}", history[:-1], kind)
        # A number written in words is an argument only if it changes the calculation: "and for seventy billion?"
        # does, the "one" of "which one is bigger?" does not.
        typed = re.search(r"\d", said)
        return joined if typed or _calls(joined) != _calls(_plan(history[-1], history[:-1], kind)) else []
    if NAMES_A_FIGURE.search(question) and _plan(history[-1], history[:-1], kind):
        return _plan(f"{question} {history[-1]}", history[:-1], kind)
    return plan


def plan_part(part: Part) -> list[PlannedCall]:
    """The calculators one part of a message asks for on its own: planned on its own words, its context (where the
    numbers often are) included, not the part it is read with (whose calculation that would plan again)."""
    return plan_tools(part.own or part.asking or part.text, kind=part.kind)


def _by_sentence(plan: list[PlannedCall], said: str, kind: str) -> list[PlannedCall]:
    """The plan of a text of several sentences, with what each sentence asks on its own: a calculator one sentence
    plans from its own numbers alone (nothing assumed) takes them from it, and runs beside the text's. "expected loss
    for 7B params on 1T tokens? and ZeRO-1 on 16 GPUs for a 20B model?" computes the loss for 7B and the memory for
    20B, where the whole text gave ZeRO the first size it names and planned nothing else. A calculator only the whole
    text plans (its numbers in one sentence, its question in another: "I have a 13B model. How much memory for
    Adam?") keeps the text's arguments, as does one the text plans twice (a comparison of two sizes)."""
    sentences = split_sentences(said)
    if len(sentences) < 2:
        return plan
    own: dict[str, tuple[int, PlannedCall]] = {}  # each calculator's first sentence planning it alone, and its call
    for index, sentence in enumerate(sentences):
        for call in _plan(digits(sentence), (), kind, written=sentence):
            if not call.assumed:
                own.setdefault(call.name, (index, call))
    twice = {name for name, count in Counter(call.name for call in plan).items() if count > 1}
    placed = [(-1, call) if call.name in twice else own.pop(call.name, (-1, call)) for call in plan]
    placed += [entry for name, entry in own.items() if name not in twice]
    # In the order they are asked: a calculator planned from the whole text first, as it was
    return [call for _, call in sorted(placed, key=lambda entry: entry[0])]


def _calls(plan: list[PlannedCall]) -> list[tuple[str, dict]]:
    """What a plan computes: each calculator and its arguments (what it assumed aside)."""
    return [(call.name, call.arguments) for call in plan]


def _clip(text: str, limit: int) -> str:
    """The text up to `limit` characters, cut at a space so no number is cut short ("13B" must not read "1")."""
    if len(text) <= limit:
        return text
    cut = max(text.rfind(space, 0, limit + 1) for space in " \n\t")
    return text[: cut if cut > 0 else limit]


def _recent(history: tuple[str, ...], limit: int) -> tuple[str, ...]:
    """The most recent questions that fit in `limit` characters together (the latest one clipped if needed)."""
    kept: list[str] = []
    room = limit
    for text in reversed(history):
        if room <= 0:
            break
        kept.append(_clip(text, room))
        room -= len(text) + 1
    return tuple(reversed(kept))


def _plan(question: str, history: tuple[str, ...], kind: str, *, written: str = "") -> list[PlannedCall]:
    """The first recogniser's answer, in planning order: its call or calls, or an empty plan when it stops."""
    context = PlanContext(earlier=" ".join(history), kind=kind, written=written)
    for calculator in PLANNING_ORDER:
        if calculator.recognise is None:
            continue
        recognised = calculator.recognise(question, context)
        if recognised is not None:
            return recognised if isinstance(recognised, list) else [recognised]
    return []
