"""Replay: re-ask what learners really asked (the logged, redacted questions) against the current index,
prompts and engine, and report what changed: citations, numbers, scope decisions, grounding.

This is how a module edit or a new prompt is checked against real questions before it ships.
"""

from __future__ import annotations

from collections import OrderedDict
from itertools import islice
from typing import Any

from mentor.answer import ChatInput
from mentor.api.schemas import ChatResponse
from mentor.record import NO_SINK
from mentor.runtime import LearnerState, Runtime, build_chat
from mentor.signals.queries import Filters, iter_questions


async def replay(runtime: Runtime, filters: Filters, *, limit: int = 500) -> dict[str, Any]:
    """Re-ask up to `limit` logged questions (conversations in their order) and diff the outcomes."""
    rows = list(islice(iter_questions(runtime.database, filters), limit))
    # A chat service that logs nothing: replays are not learning signals.
    chat = build_chat(
        runtime.settings,
        runtime.catalog,
        runtime.embedder,
        sink=NO_SINK,
        state=LearnerState.in_memory(runtime.settings),  # a replay must not count against learners' limits
    )
    conversations: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
    for row in rows:
        conversations.setdefault(row["conversation_id"], []).append(row)
    changes: list[dict[str, Any]] = []
    totals = {"questions": 0, "changed": 0, "citations": 0, "numbers": 0, "scope": 0, "grounding": 0, "skipped": 0}
    for turns in conversations.values():
        conversation_id = None
        for row in turns:
            if row["module_id"] not in chat.catalog.modules:
                totals["skipped"] += 1
                continue
            answered = await chat.ask(
                ChatInput(
                    message=row["text"],
                    module_id=row["module_id"],
                    conversation_id=conversation_id,
                    learner_id="replay",
                    style=row["style"],
                    client="replay",
                    channel="replay",
                )
            )
            conversation_id = answered.conversation_id
            response = ChatResponse.of(answered).public()
            totals["questions"] += 1
            what = diff(row, response)
            for kind in what:
                totals[kind] += 1
            if what:
                totals["changed"] += 1
                changes.append(
                    {
                        "question_id": row["question_id"],
                        "question": row["text"],
                        "what": [describe(kind, row, response) for kind in what],
                    }
                )
    return {"totals": totals, "changes": changes}


def outcome_numbers(tool_calls: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(calculator, result) pairs: the numbers an answer stated from calculators."""
    return {(c["name"], repr(sorted((c.get("result") or {}).items()))) for c in tool_calls if not c.get("error")}


def diff(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Which of citations, numbers, scope and grounding differ between a logged answer and a new one."""
    kinds = []
    if set(before["section_ids"]) != {c["section_id"] for c in after["citations"]}:
        kinds.append("citations")
    if outcome_numbers(before["tool_calls"]) != outcome_numbers(after["tool_calls"]):
        kinds.append("numbers")
    if before["out_of_scope"] != after["out_of_scope"]:
        kinds.append("scope")
    if before["grounded"] != after["grounding"]["grounded"]:
        kinds.append("grounding")
    return kinds


def describe(kind: str, before: dict[str, Any], after: dict[str, Any]) -> str:
    """One line saying what changed."""
    if kind == "citations":
        return f"cited {sorted(before['section_ids'])} -> {sorted({c['section_id'] for c in after['citations']})}"
    if kind == "numbers":
        return (
            f"calculators {[c['name'] for c in before['tool_calls']]} -> "
            f"{[c['name'] for c in after['tool_calls']]} (or their results changed)"
        )
    if kind == "scope":
        return f"out of scope {before['out_of_scope']} -> {after['out_of_scope']}"
    return f"grounded {before['grounded']} -> {after['grounding']['grounded']}"
