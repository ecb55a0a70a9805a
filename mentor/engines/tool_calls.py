"""Run a calculator on an engine's behalf and record it as a `ToolCall`: the one way both engines do it."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from mentor.answer import ToolCall
from mentor.errors import MentorError
from mentor.tools import run_tool


def run_tool_call(name: str, arguments: Mapping[str, Any], *, assumed: Sequence[str] = ()) -> ToolCall:
    """Run calculator `name`; a refusal is recorded with its plain message instead of a result.

    `assumed` lists arguments the planner filled in for the learner ("params 7B: the module's worked example");
    the explanation ends with them so the answer says what it assumed.
    """
    started = time.perf_counter()
    try:
        result = run_tool(name, arguments)
    except MentorError as exc:
        return ToolCall(name, dict(arguments), None, "", exc.message, _elapsed_ms(started))
    explanation = result.explanation
    if assumed:
        explanation = f"{explanation} (Assumed: {'; '.join(assumed)}.)"
    return ToolCall(result.name, result.arguments, result.result, explanation, None, _elapsed_ms(started))


def _elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)  # to the microsecond: finer is timer noise
