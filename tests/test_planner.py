"""The calculator planner: bounded work on hostile messages, and the wording it must still recognise."""

from __future__ import annotations

import re
import time

import pytest

from mentor.engines import planner
from mentor.engines.planner import MAX_HISTORY_CHARS, plan_tools

# Runs of one unit repeated to the chat's message limit: the shapes that made number patterns backtrack.
UNITS = ("1", "1 ", "1.", "1,", "1-", "1k", "1%", " ", "\n", "a1")
PATTERNS = {name: value for name, value in vars(planner).items() if isinstance(value, re.Pattern)}


def elapsed_s(call, *args) -> float:
    started = time.perf_counter()
    call(*args)
    return time.perf_counter() - started


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_no_pattern_backtracks_over_long_runs(name: str) -> None:
    """Every planner pattern scans a 4,000-character run in linear time.

    A pattern that may start a number anywhere inside a digit run retries every suffix of it: on 4,000 digits
    r"(\\d+)(k?)\\s*(?:context|...)" took 630 ms; linear patterns take under 10 ms here. 40 ms leaves room for a
    busy machine and still catches a quadratic one by an order of magnitude.
    """
    pattern = PATTERNS[name]
    worst = max(elapsed_s(lambda text: list(pattern.finditer(text)), (unit * 4000)[:4000]) for unit in UNITS)
    assert worst < 0.04, f"{name}: {worst * 1000:.0f} ms on a 4,000-character run"


@pytest.mark.parametrize(
    "message",
    [
        "1" * 3990,
        "How much memory does a " + "9" * 3960 + "B model need?",
        "What is " + "7" * 3950 + " accumulation with 8-way tensor and 45% MFU?",
        "8" * 3990 + "k context",
    ],
    ids=["digits", "digits-in-question", "digits-before-keywords", "digits-before-context"],
)
def test_planning_a_message_of_long_numbers_is_quick(message: str) -> None:
    """The whole plan of a 4,000-character message of digits: 656 ms before the patterns were fixed, ~8 ms now."""
    plan_tools(message)  # warm the regex cache
    assert elapsed_s(plan_tools, message) < 0.1


def test_absurd_numbers_reach_the_calculators_which_refuse_them() -> None:
    """A 3,960-digit model size is read as a size; the calculator, not the planner, says why it cannot be used."""
    from mentor.engines.extractive import run_planned

    (call,) = plan_tools("How much memory does a " + "9" * 3960 + "B model need?")
    assert call.name == "training_memory"
    assert "must be a number" in (run_planned(call).error or "")


def test_history_is_bounded_to_its_most_recent_turns() -> None:
    """Only the latest turns that fit the bound are scanned, and a follow-up still reads its numbers from them."""
    old = tuple(f"How much memory does a 70B model need? {'padding ' * 120}" for _ in range(20))
    history = (*old, "How much memory does a 13B model need with Adam?")
    kept = planner._recent(history, MAX_HISTORY_CHARS)
    assert kept[-1] == history[-1]
    assert sum(len(text) + 1 for text in kept) <= MAX_HISTORY_CHARS + 1 < sum(len(text) + 1 for text in history)
    (call,) = plan_tools("and how much memory with SGD?", history)
    assert call.name == "training_memory"
    assert call.arguments["params"] == "13B"
    assert call.arguments["optimizer"] == "sgd"


def test_a_long_question_is_clipped_at_a_space_not_inside_a_number() -> None:
    """Clipping never turns "13B" into "1": the cut falls on the space before the number it would split."""
    assert planner._clip("x " * 10 + "13B", 22) == "x " * 9 + "x"
    assert planner._clip("short", 22) == "short"


@pytest.mark.parametrize(
    ("question", "name", "expected"),
    [
        (
            "8-way tensor and 4-way pipeline on 64 GPUs, micro-batch 2, 16 accumulation steps: how many data "
            "parallel replicas?",
            "parallel_layout",
            {"num_gpus": 64, "tensor_parallel": 8, "pipeline_parallel": 4, "micro_batch": 2, "grad_accum": 16},
        ),
        ("How long to train a 70B model on 1024 H100s at 45% MFU?", "training_time", {"mfu": 0.45, "gpu": "h100"}),
        (
            "activation memory for 8k context, hidden 8192, 64 heads",
            "activation_memory",
            {"seq_len": 8192, "hidden": 8192, "heads": 64},
        ),
    ],
)
def test_the_bounded_patterns_still_read_the_learners_wording(question: str, name: str, expected: dict) -> None:
    """Read "8-way tensor", "45% MFU", "16 accumulation" and "8k context" as before the patterns changed."""
    (call,) = plan_tools(question)
    assert call.name == name
    assert expected.items() <= call.arguments.items()
