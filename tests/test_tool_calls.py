"""Recording a calculator run for an answer: the one helper both engines use."""

from __future__ import annotations

import json

from mentor.engines.llm import execute
from mentor.engines.tool_calls import run_tool_call
from mentor.tools import run_tool


def test_a_run_is_recorded_with_the_calculators_own_arguments_and_result() -> None:
    call = run_tool_call("training_memory", {"params": "13B"})
    result = run_tool("training_memory", {"params": "13B"})
    assert call.error is None and call.duration_ms >= 0
    assert call.public() == result.to_dict()  # what the LLM reads back and what learners see agree
    assert call.arguments["optimizer"] == "adam"  # the defaults the calculator filled in


def test_assumed_arguments_are_said_at_the_end_of_the_explanation() -> None:
    assumed = ("params 7B: the module's worked example", "gpu: A100 (bf16 dense peak)")
    call = run_tool_call("training_memory", {"params": "7B"}, assumed=assumed)
    plain = run_tool("training_memory", {"params": "7B"}).explanation
    assert (
        call.explanation == f"{plain} (Assumed: params 7B: the module's worked example; gpu: A100 (bf16 dense peak).)"
    )


def test_a_refusal_is_recorded_with_its_plain_message_and_the_arguments_as_given() -> None:
    call = run_tool_call("zero_memory", {"params": "7B", "dp_degree": 8, "stage": 7})
    assert call.result is None and call.explanation == ""
    assert call.error is not None and "stage: must be 0, 1, 2 or 3" in call.error
    assert call.arguments == {"params": "7B", "dp_degree": 8, "stage": 7}
    unknown = run_tool_call("launch_rockets", {})
    assert unknown.error is not None and "unknown calculator" in unknown.error


def test_the_llm_engine_records_through_the_same_helper() -> None:
    """The tool message is the calculator's JSON, or {"error": ...} so the model can correct its arguments."""
    call, content = execute("training_memory", '{"params": "13B"}')
    assert json.loads(content) == run_tool("training_memory", {"params": "13B"}).to_dict()
    assert call.public() == json.loads(content)
    refused, content = execute("zero_memory", '{"params": "7B", "dp_degree": 8, "stage": 7}')
    assert json.loads(content) == {"error": refused.error}
