"""How many GPUs does it take? A question naming a model size and one GPU's memory, and no count, asks for the fewest.

The questions are generated from templates (sizes × GPU memories × ways of asking), written before the planner read
them, and the expected counts are worked out here from the formulas, not read back from the calculator: training
holds 16 bytes/param of mixed-precision Adam state, sharded by ZeRO stage 3 (nothing kept whole on every GPU), so
it takes ceil(16·N / M) GPUs of M bytes; serving holds the weights, N·bits/8 bytes, split evenly, so ceil(N·bits/8 / M).
"""

from __future__ import annotations

import asyncio
import itertools

import pytest

from mentor.answer import ChatInput
from mentor.engines.planner import plan_tools
from mentor.tools import run_tool

from .conftest import MODULE_ID

GB = 10**9
SIZES = (7, 13, 30, 70)  # billions of parameters
MEMORIES = (24, 40, 48, 80)  # GB per GPU
TRAINING = (
    "how many {m}GB GPUs do I need to train a {n}B model?",
    "how many A100 {m}GB would it take to fine-tune a {n}B model with Adam",
    "minimum number of {m} GB cards for training a {n}B model with zero stage 3",
    "{n}B model and {m}GB gpus, how many for pretraining?",
    "number of {m}gb gpus to full finetune a {n}b model?",
)
SERVING = (
    ("how many {m}GB GPUs to serve a {n}B model in int4?", 4),
    ("how many {m} GB cards do I need to run inference on a {n}B model in fp16", 16),
    ("minimum {m}gb gpus for serving a {n}b model quantized to 8 bit?", 8),
)


def ceil_div(a: int, b: int) -> int:
    """a / b rounded up, in whole numbers (no float in the expected counts)."""
    return -(-a // b)


def training_cases() -> list[tuple[str, int, int, int]]:
    return [
        (t.format(n=n, m=m), n, m, ceil_div(16 * n * 10**9, m * GB))
        for t in TRAINING
        for n, m in itertools.product(SIZES, MEMORIES)
    ]


def serving_cases() -> list[tuple[str, int, int, int]]:
    return [
        (t.format(n=n, m=m), n, m, ceil_div(n * 10**9 * bits, 8 * m * GB))
        for t, bits in SERVING
        for n, m in itertools.product(SIZES, MEMORIES)
    ]


def fewest(question: str) -> int | None:
    """The fewest GPUs the planned fit decision states, or None when no fit is planned: the count it decides on
    ("The fewest is 14 GPUs of 80 GB: ..."), or, for a fit question read as one GPU ("how many A100 24GB would it
    take to fine-tune a 7B model?" has fit wording), the count its advice names ("It would take at least 5 GPUs")."""
    plan = plan_tools(question)
    if len(plan) != 1 or plan[0].name != "memory_fit":
        return None
    outcome = run_tool("memory_fit", plan[0].arguments)
    count = outcome.result["min_gpus"]
    if plan[0].arguments["num_gpus"] is None:
        stated = f"The fewest is {count} GPU"
    else:
        stated = "Yes: " if count == 1 else f"at least {count} GPUs"
    return count if stated in outcome.explanation else None


@pytest.mark.parametrize(("question", "n", "m", "expected"), training_cases() + serving_cases())
def test_the_fewest_gpus_are_computed(question: str, n: int, m: int, expected: int) -> None:
    assert fewest(question) == expected


def test_the_decision_on_the_fewest_gpus() -> None:
    """70B with mixed-precision Adam holds 16 bytes/param, 1,120 GB: fourteen 80 GB GPUs under ZeRO stage 3, each
    full to the byte; the arguments keep what was asked (no count), the result the count decided on."""
    outcome = run_tool("memory_fit", {"params": "70B", "gpu_memory_gb": 80, "num_gpus": None})
    assert outcome.arguments["num_gpus"] is None
    assert outcome.result["num_gpus"] == outcome.result["min_gpus"] == 14
    assert outcome.result["per_gpu_bytes"] == 1120 * GB // 14 == 80 * GB
    assert outcome.result["verdict"] == "yes" and outcome.result["headroom_per_gpu_bytes"] == 0
    assert outcome.explanation.startswith("The fewest is 14 GPUs of 80 GB: Adam mixed-precision training of a 70B")


def test_no_number_of_gpus_holds_what_every_gpu_keeps_whole() -> None:
    """ZeRO stage 1 keeps 16-bit weights and gradients whole on every GPU: 4 bytes/param of 70B is 280 GB."""
    outcome = run_tool("memory_fit", {"params": "70B", "gpu_memory_gb": 80, "num_gpus": None, "zero_stage": 1})
    assert outcome.result["verdict"] == "no" and outcome.result["min_gpus"] is None
    assert "No number of 80 GB GPUs holds it at ZeRO stage 1" in outcome.explanation
    assert "(280 GB)" in outcome.explanation


@pytest.mark.parametrize(
    "question",
    [
        "activation memory when training a 7b model with seq 4096 and micro batch 8 on 80gb gpus",
        "kv cache for serving a 70b model at 32k context with batch 8 on 80gb gpus?",
    ],
)
def test_a_memory_the_fit_does_not_count_is_left_to_its_calculator(question: str) -> None:
    assert all(call.name != "memory_fit" for call in plan_tools(question))


def test_a_fit_question_without_a_count_is_still_read_as_one_gpu() -> None:
    """ "can I train a 7B model on an A100 80GB?" asks about the GPU it names: no, and how many would do."""
    (call,) = plan_tools("can i train a 7b model with adam on an a100 80gb?")
    assert call.arguments["num_gpus"] == 1
    outcome = run_tool("memory_fit", call.arguments)
    assert outcome.result["verdict"] == "no" and "at least 2 GPUs" in outcome.explanation


def test_the_box_answers_how_many_with_the_count_first(runtime) -> None:
    """The learner's question, through the chat: the count leads the answer, computed, and the module's rule
    (ZeRO shards the model state) is quoted beside it."""
    message = "how many 80gb gpus do i need to full finetune a 13b model with adam?"
    answered = asyncio.run(runtime.chat.ask(ChatInput(message=message, module_id=MODULE_ID)))
    answer = answered.answer
    assert [call.name for call in answer.tool_calls] == ["memory_fit"]
    assert answer.text.startswith("**Memory fit:** The fewest is 3 GPUs of 80 GB:")  # 208 GB / 80 GB, rounded up
    assert answered.grounding.grounded and answer.coverage == "full"


def follow_up_cases() -> list[tuple[str, str, int]]:
    """A how-many question, then a follow-up changing the GPU memory or the model size: the follow-up asks how many
    too."""
    first = "how many {m}GB GPUs do I need to train a {n}B model?"
    cases = []
    for n, m in itertools.product(SIZES, MEMORIES):
        other_m = MEMORIES[(MEMORIES.index(m) + 1) % len(MEMORIES)]
        other_n = SIZES[(SIZES.index(n) + 1) % len(SIZES)]
        cases.append((first.format(n=n, m=m), f"and with {other_m}GB cards?", ceil_div(16 * n * GB, other_m * GB)))
        cases.append((first.format(n=n, m=m), f"what about a {other_n}B model?", ceil_div(16 * other_n * GB, m * GB)))
    return cases


@pytest.mark.parametrize(("earlier", "question", "expected"), follow_up_cases())
def test_a_follow_up_to_how_many_asks_how_many(earlier: str, question: str, expected: int) -> None:
    (call,) = plan_tools(question, (earlier,))
    assert call.name == "memory_fit" and call.arguments["num_gpus"] is None
    assert run_tool("memory_fit", call.arguments).result["num_gpus"] == expected
