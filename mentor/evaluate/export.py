"""Exports of a run's results for RAGAS and DeepEval: plain JSON records in the field names each tool loads.

The records hold only JSON values, so a run can be written to a file here and loaded by `mentor.interop` in an
environment that has RAGAS or DeepEval but not mentor's own dependencies.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from mentor.evaluate.metrics import normalised_arguments
from mentor.evaluate.runner import CaseResult

ExportFormat = Literal["ragas", "ragas-multiturn", "deepeval"]
EXPORT_FORMATS: tuple[str, ...] = ("ragas", "ragas-multiturn", "deepeval")


def export_records(results: Sequence[CaseResult], fmt: ExportFormat) -> list[dict[str, Any]]:
    """Records for RAGAS' `EvaluationDataset.from_list` or DeepEval (`mentor.interop.deepeval_test_cases`).

    `ragas`: one single-turn sample per case. `ragas-multiturn`: one multi-turn sample per case of more than one
    turn (RAGAS cannot hold both kinds in one dataset). `deepeval`: one LLMTestCase/Golden record per case.
    Skipped cases are left out; records keep the order of `results`.
    """
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"fmt: must be one of {', '.join(EXPORT_FORMATS)} (got {fmt!r})")
    kept = [r for r in results if r.skipped is None]
    if fmt == "ragas":
        return [_ragas_single_turn(r) for r in kept]
    if fmt == "ragas-multiturn":
        return [_ragas_multi_turn(r) for r in kept if len(r.case.turns) > 1]
    return [_deepeval(r) for r in kept]


def _ragas_single_turn(result: CaseResult) -> dict[str, Any]:
    contexts, context_ids = _retrieved(result)
    return {
        # A follow-up means nothing alone: its earlier turns come first, one per line. The same case is also a
        # multi-turn sample in `ragas-multiturn`; it stays here because only single-turn samples carry the
        # retrieved contexts that the RAG metrics score.
        "user_input": "\n".join(result.case.turns),
        "retrieved_contexts": contexts,
        "response": result.answer,
        "reference": result.case.expect.reference,
        # Section ids on both sides, so RAGAS' id-based context precision/recall compare like with like.
        "retrieved_context_ids": context_ids,
        "reference_context_ids": list(result.case.expect.sections),
    }


def _ragas_multi_turn(result: CaseResult) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    earlier = result.case.turns[:-1]
    for index, message in enumerate(earlier):
        messages.append({"type": "human", "content": message})
        turn = result.transcript[index] if index < len(result.transcript) else {}
        messages.append({"type": "ai", "content": turn.get("answer", "")})
    messages.append({"type": "human", "content": result.case.turns[-1]})
    # RAGAS' tool-call shape: an AI message that calls, one tool message per result, then the answer. The
    # runner records tool calls for the evaluated turn only, so earlier turns are plain AI messages.
    if result.tool_calls:
        calls = [{"name": c["name"], "args": c.get("arguments") or {}} for c in result.tool_calls]
        messages.append({"type": "ai", "content": "", "tool_calls": calls})
        messages.extend(
            {"type": "tool", "content": json.dumps(c.get("result"), ensure_ascii=False)} for c in result.tool_calls
        )
    contexts, context_ids = _retrieved(result)
    messages.append(
        {
            "type": "ai",
            "content": result.answer,
            "metadata": {"retrieved_contexts": contexts, "retrieved_context_ids": context_ids},
        }
    )
    return {
        "user_input": messages,
        "reference": result.case.expect.reference,
        "reference_tool_calls": [{"name": t["name"], "args": t["input_parameters"]} for t in _expected_tools(result)],
    }


def _deepeval(result: CaseResult) -> dict[str, Any]:
    contexts, _ = _retrieved(result)
    expect = result.case.expect
    return {
        "input": "\n".join(result.case.turns),
        "actual_output": result.answer,
        "expected_output": expect.reference,
        "retrieval_context": contexts,
        "tools_called": [
            {"name": c["name"], "input_parameters": c.get("arguments") or {}, "output": c.get("result")}
            for c in result.tool_calls
        ],
        "expected_tools": _expected_tools(result),
        "name": result.case.id,
        "additional_metadata": {
            "category": result.case.category,
            "split": result.case.split,
            "coverage": result.coverage,
            "expected_coverage": expect.expected_coverage,
        },
    }


def _expected_tools(result: CaseResult) -> list[dict[str, Any]]:
    expect = result.case.expect
    if not expect.tool:
        return []
    # In the calculator's own units ("7B" -> 7000000000), as the calls made carry them, so a tool comparing the
    # two compares like with like; only the arguments the case names are expected.
    normalised = normalised_arguments(expect.tool, expect.tool_arguments) or dict(expect.tool_arguments)
    named = {key: normalised.get(key, value) for key, value in expect.tool_arguments.items()}
    return [{"name": expect.tool, "input_parameters": named}]


def _retrieved(result: CaseResult) -> tuple[list[str], list[str]]:
    texts, ids, seen = [], [], set()
    for context in result.contexts:
        key = context.get("chunk_id") or context["text"]
        if context["source"] == "citation" and any(
            p.get("chunk_id") == context.get("chunk_id") for p in result.retrieved
        ):
            continue  # its whole passage is in the search results
        if key in seen:
            continue
        seen.add(key)
        texts.append(context["text"])
        ids.append(context.get("section_id") or "")
    return texts, ids
