"""The calculator planner: bounded work on hostile messages, and the wording it must still recognise."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from mentor.engines import planner
from mentor.engines.planner import MAX_HISTORY_CHARS, plan_tools
from mentor.tools import REGISTRY, wording
from mentor.tools.registry import PLANNING_ORDER

from .chat_helpers import grows_linearly

# Runs of one unit repeated to the chat's message limit: the shapes that made number patterns backtrack, and
# the words fit wording repeats ("will ... run", "four of them", "and ...").
UNITS = ("1", "1 ", "1.", "1,", "1-", "1k", "1%", " ", "\n", "a1", "will ", "four of ", "and ")
# Every pattern the planner runs: its own, the shared wording, and each recogniser's module.
PLANNING_MODULES = (planner, wording, *{sys.modules[c.recognise.__module__] for c in REGISTRY.values() if c.recognise})
PATTERNS = {
    f"{module.__name__.rsplit('.', 1)[-1]}.{name}": value
    for module in PLANNING_MODULES
    for name, value in vars(module).items()
    if isinstance(value, re.Pattern) and (module is wording or value not in vars(wording).values())
}
PLANNED_CALLS = Path(__file__).parent / "data" / "planned_calls.jsonl"


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_no_pattern_backtracks_over_long_runs(name: str) -> None:
    """Every planner pattern scans a 4,000-character run in linear time.

    A pattern that may start a number anywhere inside a digit run retries every suffix of it: on 4,000 digits
    r"(\\d+)(k?)\\s*(?:context|...)" took 630 ms; linear patterns take under 10 ms here.
    """
    pattern = PATTERNS[name]
    for unit in UNITS:
        linear, timings = grows_linearly(
            lambda text: list(pattern.finditer(text)), lambda size, unit=unit: (unit * size)[:size]
        )
        assert linear, f"{name} on {unit!r}: {timings}"


@pytest.mark.parametrize(
    "message_of",
    [
        lambda size: "1" * size,
        lambda size: "How much memory does a " + "9" * size + "B model need?",
        lambda size: "What is " + "7" * size + " accumulation with 8-way tensor and 45% MFU?",
        lambda size: "8" * size + "k context",
    ],
    ids=["digits", "digits-in-question", "digits-before-keywords", "digits-before-context"],
)
def test_planning_a_message_of_long_numbers_is_quick(message_of) -> None:
    """The whole plan of a 4,000-character message of digits: 656 ms before the patterns were fixed, ~8 ms now."""
    plan_tools(message_of(100))  # warm the regex cache
    linear, timings = grows_linearly(plan_tools, message_of, size=3960)
    assert linear, timings


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


def test_every_calculator_is_asked_once_in_planning_order() -> None:
    """The planner loops over the registry's recognisers: each calculator has one, asked exactly once."""
    assert sorted(c.name for c in PLANNING_ORDER) == sorted(REGISTRY)
    assert all(c.recognise is not None for c in PLANNING_ORDER)
    assert [c.name for c in PLANNING_ORDER][:3] == ["loss_scaling", "number_format", "pipeline_bubble"]


def test_the_first_recogniser_wins() -> None:
    """A gradient in fp16 is loss scaling, though "fp16 ... max" alone would be a number-format question."""
    (call,) = plan_tools("gradient of 1e-8 in fp16: what is the max loss scale 2^16 keeps?")
    assert call.name == "loss_scaling"
    assert call.arguments == {"gradient": "1e-8", "scale": 65536, "format": "fp16"}


def test_a_kv_cache_question_without_shapes_stops_the_plan() -> None:
    """ "KV cache" claims the question even without its shapes: training memory must not answer for a 70B model."""
    assert plan_tools("how much memory is the kv cache of a 70B model?") == []
    assert plan_tools("how much memory does a 70B model need?")[0].name == "training_memory"


def test_a_follow_up_reuses_the_previous_question_with_its_new_number() -> None:
    """ "And on 256 GPUs instead?" is planned as the previous question with 256 GPUs read first."""
    (call,) = plan_tools("and on 256 GPUs instead?", ("how long to train a 13B model on 64 GPUs?",))
    assert call.name == "training_time"
    assert call.arguments["num_gpus"] == 256
    assert call.arguments["params"] == "13B"
    assert plan_tools("and why?", ("how long to train a 13B model on 64 GPUs?",)) == []


def test_a_follow_up_gives_a_number_to_the_rule_the_previous_question_asked_about() -> None:
    """ "What's the Chinchilla rule?" then "for a 20B model then?": the follow-up asks for the rule's figures, though
    the previous question computed nothing (it was answered from the module alone)."""
    (call,) = plan_tools("for a 20B model then?", ("what's the chinchilla rule?",))
    assert call.name == "chinchilla_optimal" and call.arguments["params"] == "20B"
    (call,) = plan_tools("and for a 13B model?", ("how does int4 quantization work?",))
    assert call.name == "quantized_size" and call.arguments["params"] == "13B"
    assert plan_tools("and why is it stable?", ("what's the chinchilla rule?",)) == []


def test_each_calculation_of_a_message_takes_the_numbers_of_its_own_sentence() -> None:
    """ZeRO's recogniser read the first size in the text, the other question's: 7B instead of 20B, a false figure;
    and the loss asked first was never planned (the first recogniser takes the whole text)."""
    plan = plan_tools(
        "expected loss for 7B params trained on 1T tokens? and also zero-1 on 16 devices, 20B model, "
        "memory per device?",
        kind="calculation",
    )
    assert [(c.name, c.arguments) for c in plan] == [
        ("scaling_law_loss", {"params": "7B", "tokens": "1T"}),
        ("zero_memory", {"params": "20B", "dp_degree": 16, "stage": 1}),
    ]


def test_a_calculation_spread_over_sentences_keeps_the_numbers_of_the_whole_text() -> None:
    """The size in one sentence, the question in the next: no sentence plans it alone, the whole text does."""
    (call,) = plan_tools("I have a 13B model. How much memory for Adam?")
    assert (call.name, call.arguments["params"]) == ("training_memory", "13B")
    # A sentence that plans with a number assumed ("ZeRO-3 on 64 GPUs" takes the worked example's 7B) does not
    # replace the whole text's call, which found the size in the next sentence.
    (call,) = plan_tools("ZeRO-3 on 64 GPUs. for a 70B model?")
    assert call.name == "zero_memory" and call.arguments["params"] == "70B" and call.arguments["dp_degree"] == 64


def _planned_calls() -> list[dict]:
    return [json.loads(line) for line in PLANNED_CALLS.read_text().splitlines() if line.strip()]


def test_plans_of_the_chat_and_eval_questions_are_unchanged() -> None:
    """Every chat test question and golden turn (and the recognisers' sample wording) plans as it did before
    the planner became a loop over recognisers: tests/data/planned_calls.jsonl was written by the if-chain."""
    rows = _planned_calls()
    assert len(rows) > 250 and sum(1 for row in rows if row["plan"]) > 150
    for row in rows:
        plan = plan_tools(row["question"], tuple(row["history"]))
        got = [{"name": c.name, "arguments": c.arguments, "assumed": list(c.assumed)} for c in plan]
        assert got == row["plan"], row["question"]
