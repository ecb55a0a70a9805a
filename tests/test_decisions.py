"""The decision calculators: will it fit (memory_fit) and which allocation is better (compare_allocations).

Expected figures are worked out here by hand from the formulas (16 bytes/param, C = 6·N·D, the Chinchilla fit in
40-digit Decimal), not read back from the calculators; the issue's three decision questions come first.
"""

from __future__ import annotations

import math
from decimal import Context, Decimal
from fractions import Fraction

import pytest

from mentor.engines.planner import plan_tools
from mentor.tools import REGISTRY, run_tool
from mentor.tools.allocation import recognise_compare_allocations
from mentor.tools.fit import recognise_memory_fit
from mentor.tools.registry import PLANNING_ORDER
from mentor.tools.wording import PlanContext, PlannedCall
from mentor.understanding.numerals import digits

GB = 10**9
NONE = PlanContext()
CHINCHILLA = Context(prec=40)


def chinchilla_loss(n: int, d: int) -> Decimal:
    """Hoffmann et al. 2022's fit, L = 1.69 + 406.4/N^0.34 + 410.7/D^0.28, typed in again (40-digit Decimal)."""

    def power(base: int, exponent: str) -> Decimal:
        return CHINCHILLA.exp(CHINCHILLA.multiply(Decimal(exponent), CHINCHILLA.ln(Decimal(base))))

    return Decimal("1.69") + Decimal("406.4") / power(n, "0.34") + Decimal("410.7") / power(d, "0.28")


def first_sentence(text: str) -> str:
    return text.split(". ", 1)[0] + "."


def planned(question: str, history: tuple[str, ...] = ()) -> PlannedCall:
    (call,) = plan_tools(question, history)
    return call


# ---- the three decisions ------------------------------------------------------------------------------


def test_adam_training_of_6b_does_not_fit_one_48_gb_card() -> None:
    call = planned("will Adam training of a 6B model fit on one 48 GB card?")
    assert call.name == "memory_fit"
    outcome = run_tool(call.name, call.arguments)
    needed = 6 * 10**9 * (2 + 2 + 12)  # bf16 weights + gradients + fp32 master copy and Adam moments
    assert needed == 96 * GB
    assert outcome.result["verdict"] == "no"
    assert outcome.result["total_bytes"] == outcome.result["per_gpu_bytes"] == needed
    assert outcome.result["available_per_gpu_bytes"] == 48 * GB
    assert outcome.result["shortfall_per_gpu_bytes"] == needed - 48 * GB
    assert outcome.result["headroom_per_gpu_bytes"] == 0
    assert outcome.result["min_gpus"] == 2  # 96 / 48 with ZeRO stage 3
    assert first_sentence(outcome.explanation) == (
        "No: Adam mixed-precision training of a 6B model needs 96 GB of model state, and one 48 GB GPU holds "
        "48 GB: 48 GB short."
    )


def test_30b_training_on_four_80_gb_h100s_does_not_fit_with_zero_3() -> None:
    call = planned("can I train a 30B model on 4×H100 80GB?")
    assert call == PlannedCall(
        "memory_fit", {"params": "30B", "gpu_memory_gb": "80", "num_gpus": 4, "workload": "training"}
    )
    outcome = run_tool(call.name, call.arguments)
    total = 30 * 10**9 * 16
    assert total == 480 * GB
    per_gpu = total // 4  # ZeRO stage 3 shards weights, gradients and optimizer state alike
    assert per_gpu == 120 * GB
    assert outcome.result["verdict"] == "no"
    assert outcome.result["total_bytes"] == total and outcome.result["per_gpu_bytes"] == per_gpu
    assert outcome.result["zero_stage"] == 3 and outcome.result["sharding"].startswith("ZeRO stage 3 over 4 GPUs")
    assert outcome.result["shortfall_per_gpu_bytes"] == per_gpu - 80 * GB
    assert outcome.result["available_total_bytes"] == 320 * GB
    assert outcome.result["min_gpus"] == 6  # ⌈480 / 80⌉
    assert first_sentence(outcome.explanation) == (
        "No: Adam mixed-precision training of a 30B model needs 120 GB per GPU with ZeRO stage 3 over 4 GPUs, "
        "and each GPU holds 80 GB: 40 GB short per GPU."
    )
    assert "assumed, as no stage was named" in outcome.explanation


def test_13b_on_500b_tokens_beats_40b_on_150b_tokens() -> None:
    call = planned("is 13B on 500B tokens or 40B on 150B tokens the better use of the budget?")
    assert call == PlannedCall(
        "compare_allocations", {"params_a": "13B", "tokens_a": "500B", "params_b": "40B", "tokens_b": "150B"}
    )
    outcome = run_tool(call.name, call.arguments)
    loss_a, loss_b = chinchilla_loss(13 * 10**9, 500 * 10**9), chinchilla_loss(40 * 10**9, 150 * 10**9)
    assert loss_a < loss_b
    assert math.isclose(outcome.result["loss_a"], float(loss_a), rel_tol=1e-15)
    assert math.isclose(outcome.result["loss_b"], float(loss_b), rel_tol=1e-15)
    assert outcome.result["verdict"] == "13B on 500B tokens" and outcome.result["better"] == "a"
    assert outcome.result["compute_flops_a"] == 6 * 13 * 500 * 10**18 == 39 * 10**21
    assert outcome.result["compute_flops_b"] == 6 * 40 * 150 * 10**18 == 36 * 10**21
    assert outcome.result["equal_compute"] is False
    assert outcome.result["compute_difference_percent"] == float(Fraction(39, 36) * 100 - 100)  # 8.33…%
    assert outcome.result["tokens_per_param_a"] == 500 / 13 and outcome.result["tokens_per_param_b"] == 3.75
    assert outcome.explanation.startswith("13B on 500B tokens: its predicted loss, ≈2.056 nats/token, is ≈0.04027 ")
    assert "the budgets are not equal: 13B on 500B tokens uses 3.9e22 FLOPs, ≈8.333% more" in outcome.explanation


# ---- memory_fit -------------------------------------------------------------------------------------------------


def fit(**arguments: object) -> dict:
    return run_tool("memory_fit", arguments).result


def test_a_fit_at_exactly_the_capacity_is_a_tight_yes() -> None:
    outcome = run_tool("memory_fit", {"params": "3B", "gpu_memory_gb": 48})  # 3B × 16 = 48 GB
    assert outcome.result["verdict"] == "yes"
    assert outcome.result["headroom_per_gpu_bytes"] == 0 and outcome.result["shortfall_per_gpu_bytes"] == 0
    assert outcome.explanation.startswith("Yes: ")
    assert outcome.explanation.endswith("a yes with little headroom is a tight fit.")


def test_the_explanation_gives_verdict_then_figures_then_what_is_left_out() -> None:
    text = run_tool("memory_fit", {"params": "13B", "gpu_memory_gb": 40, "num_gpus": 8, "zero_stage": 3}).explanation
    verdict, figures, left_out = text.index("Yes: "), text.index("Model state = "), text.index("Not counted: ")
    assert verdict == 0 < figures < left_out
    for missing in ("activations", "temporary buffers", "fragmentation"):
        assert missing in text[left_out:]
    assert "14 GB (35% of a GPU) to spare per GPU" in text  # 40 − 208/8 = 14 GB
    assert "GB = 10^9 bytes" in text


@pytest.mark.parametrize("optimizer", ["adam", "adamw", "sgd", "sgd_momentum"])
def test_one_gpu_training_needs_what_training_memory_counts(optimizer: str) -> None:
    state = run_tool("training_memory", {"params": "7B", "optimizer": optimizer}).result
    result = fit(params="7B", gpu_memory_gb=80, optimizer=optimizer)
    assert result["total_bytes"] == result["per_gpu_bytes"] == state["total_bytes"]
    assert result["bytes_per_param"] == state["bytes_per_param"]
    assert result["verdict"] == ("yes" if state["total_bytes"] <= 80 * GB else "no")


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
@pytest.mark.parametrize("gpus", [2, 8, 64])
def test_sharded_training_needs_what_zero_memory_counts(stage: int, gpus: int) -> None:
    zero = run_tool("zero_memory", {"params": "13B", "dp_degree": gpus, "stage": stage}).result
    assert fit(params="13B", gpu_memory_gb=80, num_gpus=gpus, zero_stage=stage)["per_gpu_bytes"] == zero["total_bytes"]


@pytest.mark.parametrize(("bits", "group_size"), [(16, None), (8, None), (4, None), (4, 128)])
def test_inference_needs_what_quantized_size_counts(bits: int, group_size: int | None) -> None:
    size = run_tool("quantized_size", {"params": "70B", "bits": bits, "group_size": group_size}).result
    result = fit(params="70B", gpu_memory_gb=48, num_gpus=2, workload="inference", bits=bits, group_size=group_size)
    assert result["total_bytes"] == size["total_bytes"]
    assert result["per_gpu_bytes"] == size["total_bytes"] / 2
    assert result["zero_stage"] is None and result["sharding"].startswith("weights split evenly over 2 GPUs")


def test_70b_in_int4_on_a_24_gb_gpu_and_in_8_bit_on_two_48_gb_cards() -> None:
    int4 = run_tool(**_call("does a 70B model fit on a 24 GB GPU in int4?"))
    assert int4.result["verdict"] == "no" and int4.result["total_bytes"] == 35 * GB  # 70e9 × 4 / 8
    assert int4.result["shortfall_per_gpu_bytes"] == 11 * GB and int4.result["min_gpus"] == 2
    assert "the KV cache" in int4.explanation[int4.explanation.index("Not counted: ") :]
    int8 = run_tool(**_call("can I serve llama 70B on two 48GB cards in 8-bit?"))
    assert int8.result["verdict"] == "yes" and int8.result["per_gpu_bytes"] == 35 * GB  # 70 GB over 2
    assert int8.result["headroom_per_gpu_bytes"] == 13 * GB


def _call(question: str) -> dict:
    call = planned(question)
    return {"name": call.name, "arguments": call.arguments}


@pytest.mark.parametrize(
    ("params", "memory", "stage"),
    [("13B", 80, 3), ("13B", 80, 2), ("13B", 80, 1), ("7B", 24, 3), ("70B", 80, 3), ("30B", 80, 2)],
)
def test_min_gpus_is_the_fewest_gpus_that_fit(params: str, memory: int, stage: int) -> None:
    least = fit(params=params, gpu_memory_gb=memory, zero_stage=stage)["min_gpus"]
    assert fit(params=params, gpu_memory_gb=memory, num_gpus=least, zero_stage=stage)["verdict"] == "yes"
    if least > 1:
        assert fit(params=params, gpu_memory_gb=memory, num_gpus=least - 1, zero_stage=stage)["verdict"] == "no"


def test_no_gpu_count_fits_when_the_replicated_part_is_too_big() -> None:
    # Stage 1 keeps weights and gradients whole on every GPU: 13B × 4 = 52 GB > 40 GB, however many GPUs.
    outcome = run_tool("memory_fit", {"params": "13B", "gpu_memory_gb": 40, "num_gpus": 8, "zero_stage": 1})
    assert outcome.result["min_gpus"] is None and outcome.result["verdict"] == "no"
    assert outcome.result["per_gpu_bytes"] == 52 * GB + 156 * GB // 8
    assert "the part every GPU keeps whole (52 GB) does not fit one GPU" in outcome.explanation


def test_gpu_memory_is_decimal_gb_and_exact() -> None:
    result = fit(params="7B", gpu_memory_gb="79.5", num_gpus=3, zero_stage=3)
    assert result["available_per_gpu_bytes"] == 79_500_000_000
    assert result["per_gpu_bytes"] == 112 * GB / 3  # not an integer: the nearest float, converted once
    assert result["headroom_per_gpu_bytes"] == float(Fraction(79_500_000_000) - Fraction(112 * GB, 3))


# ---- compare_allocations ---------------------------------------------------------------------------------------


def test_7b_on_1t_tokens_against_13b_on_500b_tokens() -> None:
    outcome = run_tool(**_call("is it better to train 7B on 1T tokens or 13B on 500B tokens?"))
    expected_a, expected_b = chinchilla_loss(7 * 10**9, 10**12), chinchilla_loss(13 * 10**9, 500 * 10**9)
    better = "7B on 1T tokens" if expected_a < expected_b else "13B on 500B tokens"
    assert outcome.result["verdict"] == better
    assert outcome.explanation.startswith(f"{better}: ")
    assert outcome.result["compute_flops_a"] == 42 * 10**21 and outcome.result["compute_flops_b"] == 39 * 10**21
    assert math.isclose(outcome.result["loss_difference"], float(abs(expected_a - expected_b)), rel_tol=1e-12)


def test_chinchilla_against_gopher_is_chinchilla() -> None:
    """Hoffmann et al. 2022's own comparison: 70B on 1.4T tokens beats Gopher's 280B on 300B tokens."""
    outcome = run_tool(
        "compare_allocations", {"params_a": "280B", "tokens_a": "300B", "params_b": "70B", "tokens_b": "1.4T"}
    )
    assert outcome.result["verdict"] == "70B on 1.4T tokens" and outcome.result["better"] == "b"
    scaling = run_tool("scaling_law_loss", {"params": "70B", "tokens": "1.4T"}).result["loss"]
    assert outcome.result["loss_b"] == scaling  # the same fit as scaling_law_loss, not a copy of it
    assert outcome.result["tokens_per_param_b"] == 20


def test_equal_budgets_and_equal_losses_are_said_so() -> None:
    same = run_tool("compare_allocations", {"params_a": "7B", "tokens_a": "1T", "params_b": "7B", "tokens_b": "1T"})
    assert same.result["verdict"] == "equal" and same.result["equal_compute"] is True
    assert same.explanation.startswith("Equal: ") and "both use the same compute, 4.2e22 FLOPs" in same.explanation
    # 10B on 200B tokens and 20B on 100B tokens spend the same 1.2e22 FLOPs.
    budget = run_tool(
        "compare_allocations", {"params_a": "10B", "tokens_a": "200B", "params_b": "20B", "tokens_b": "100B"}
    )
    assert budget.result["equal_compute"] is True and budget.result["compute_difference_percent"] == 0


def test_the_comparison_ends_with_its_caveats() -> None:
    text = run_tool(
        "compare_allocations", {"params_a": "13B", "tokens_a": "500B", "params_b": "40B", "tokens_b": "150B"}
    )
    caveats = text.explanation[text.explanation.index("Caveats: ") :]
    assert "E 1.69, A 406.4, B 410.7, alpha 0.34, beta 0.28" in caveats
    assert "pretraining loss only" in caveats
    assert "serving cost favours the smaller model, 13B on 500B tokens" in caveats
    assert "over-train smaller models past Chinchilla for cheap inference" in caveats


# ---- recognising the questions ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "arguments"),
    [
        (
            "will Adam training of a 6B model fit on one 48 GB card?",
            {"params": "6B", "gpu_memory_gb": "48", "num_gpus": 1, "workload": "training", "optimizer": "adam"},
        ),
        (
            "can I fine-tune 13B on 8 A100 40GB with ZeRO-3?",
            {"params": "13B", "gpu_memory_gb": "40", "num_gpus": 8, "workload": "training", "zero_stage": 3},
        ),
        (
            "does a 70B model fit on a 24 GB GPU in int4?",
            {"params": "70B", "gpu_memory_gb": "24", "num_gpus": 1, "workload": "inference", "bits": 4},
        ),
        (
            "can I serve llama 70B on two 48GB cards in 8-bit?",
            {"params": "70B", "gpu_memory_gb": "48", "num_gpus": 2, "workload": "inference", "bits": 8},
        ),
        (
            "can I run a 70B model in int4 on a 24 GB GPU?",
            {"params": "70B", "gpu_memory_gb": "24", "num_gpus": 1, "workload": "inference", "bits": 4},
        ),
        (
            "can we pretrain a 1.3B model on 8 V100 32GB GPUs with FSDP?",
            {"params": "1.3B", "gpu_memory_gb": "32", "num_gpus": 8, "workload": "training", "zero_stage": 3},
        ),
        (
            "will a 13B model fit on a single A100-80GB with AdamW?",
            {"params": "13B", "gpu_memory_gb": "80", "num_gpus": 1, "workload": "training", "optimizer": "adamw"},
        ),
        (
            "can I train a 7B model on 4 x 80GB?",
            {"params": "7B", "gpu_memory_gb": "80", "num_gpus": 4, "workload": "training"},
        ),
        (
            "is a 24 GiB card enough to run a 7B model in fp16?",
            {"params": "7B", "gpu_memory_gb": "25.769803776", "num_gpus": 1, "workload": "inference", "bits": 16},
        ),
        (  # "gigs": decimal GB, as card makers count them
            "training a 30b model on 8 h100s (80 gigs each) with zero stage 3, does it fit?",
            {"params": "30B", "gpu_memory_gb": "80", "num_gpus": 8, "workload": "training", "zero_stage": 3},
        ),
        (
            "will a 7b fit on a 24 gig card for inference in int4?",
            {"params": "7B", "gpu_memory_gb": "24", "num_gpus": 1, "workload": "inference", "bits": 4},
        ),
    ],
)
def test_fit_questions_are_planned_as_fits(question: str, arguments: dict) -> None:
    call = planned(question)
    assert call.name == "memory_fit" and call.arguments == arguments
    assert run_tool(call.name, call.arguments).result["verdict"] in {"yes", "no"}


def test_what_a_fit_question_leaves_unsaid_is_assumed_and_said() -> None:
    call = only_fit("will a 13B model fit in 80 GB?", NONE)
    assert call.arguments == {"params": "13B", "gpu_memory_gb": "80", "num_gpus": 1, "workload": "training"}
    assert call.assumed == (
        "num_gpus: 1, as no GPU count was named",
        "workload: training, as the question names neither training nor inference",
    )


def test_a_gpu_without_its_memory_is_not_given_one() -> None:
    """ "4×H100" does not say 80 GB (there are 94 GB H100s): no fit is planned, and no size is invented."""
    assert recognise_memory_fit("can I train a 30B model on 4×H100?", NONE) is None
    assert all(call.name != "memory_fit" for call in plan_tools("can I train a 30B model on 4×H100?"))
    assert recognise_memory_fit("will a 70B model fit on 8 A100s?", NONE) is None


def test_the_gpus_may_come_from_earlier_in_the_conversation() -> None:
    earlier = PlanContext(earlier="can I train a 30B model on 4×H100 80GB?")
    call = only_fit("and will a 13B model fit?", earlier)
    assert call.arguments == {"params": "13B", "gpu_memory_gb": "80", "num_gpus": 4, "workload": "training"}
    assert call.assumed == (
        "gpu_memory_gb 80 from earlier in this conversation",
        "num_gpus 4 from earlier in this conversation",
        "workload training from earlier in this conversation",
    )
    # The planner hands its recognisers numbers in digits, those written in words included.
    served = PlanContext(earlier=digits("can I serve a 70B model on two 48GB cards in 8-bit?"))
    call = only_fit("and would a 34B model fit?", served)
    assert call.arguments == {"params": "34B", "gpu_memory_gb": "48", "num_gpus": 2, "workload": "inference", "bits": 8}


def only_fit(question: str, context: PlanContext) -> PlannedCall:
    call = recognise_memory_fit(question, context)
    assert isinstance(call, PlannedCall)
    return call


def test_count_times_size_card_name_holding_the_training_state_is_a_fit() -> None:
    """ "8 × 40GB A100s" is a count × one card's memory and its name; "hold" asks for a verdict."""
    call = planned("would 8 × 40GB A100s hold the training state of a 13B model with ZeRO-3?")
    assert call == PlannedCall(
        "memory_fit",
        {"params": "13B", "gpu_memory_gb": "40", "num_gpus": 8, "workload": "training", "zero_stage": 3},
    )
    outcome = run_tool(call.name, call.arguments)
    assert outcome.result["per_gpu_bytes"] == 13 * 10**9 * 16 // 8 == 26 * GB  # ZeRO-3 shards all of it
    assert outcome.result["verdict"] == "yes"


def test_what_about_on_four_of_them_refits_the_earlier_question_on_four_gpus() -> None:
    history = ("would 8 H100s with 80 GB each be enough to train a 30B model?",)
    assert planned(history[0]).arguments["num_gpus"] == 8
    call = planned("what about on four of them?", history)
    assert call.name == "memory_fit"
    assert call.arguments == {"params": "30B", "gpu_memory_gb": "80", "num_gpus": 4, "workload": "training"}
    assert call.assumed == (
        "params 30B from earlier in this conversation",
        "gpu_memory_gb 80 from earlier in this conversation",
        "workload training from earlier in this conversation",
    )
    outcome = run_tool(call.name, call.arguments)
    assert outcome.result["per_gpu_bytes"] == 30 * 10**9 * 16 // 4 == 120 * GB
    assert outcome.result["verdict"] == "no"
    # the same shape after one 80 GB GPU, and with the count in digits
    one = ("can I train a 7B model on one 80GB GPU?",)
    assert planned("what about on four of them?", one).arguments == {
        "params": "7B", "gpu_memory_gb": "80", "num_gpus": 4, "workload": "training"
    }  # fmt: skip
    assert planned("and on 16 of them?", one).arguments["num_gpus"] == 16


@pytest.mark.parametrize(
    ("word", "count"),
    [("one", 1), ("two", 2), ("three", 3), ("four", 4), ("five", 5), ("six", 6), ("seven", 7), ("eight", 8),
     ("nine", 9), ("ten", 10), ("eleven", 11), ("twelve", 12), ("thirteen", 13), ("fourteen", 14),
     ("fifteen", 15), ("sixteen", 16)],
)  # fmt: skip
def test_gpu_counts_in_words_from_one_to_sixteen(word: str, count: int) -> None:
    history = ("would 8 H100s with 80 GB each be enough to train a 30B model?",)
    assert planned(f"what about on {word} of them?", history).arguments["num_gpus"] == count
    assert planned(f"can I train a 30B model on {word} 80GB GPUs?").arguments["num_gpus"] == count


SERVED_ON_TWO = ("can I serve a 70B model in 8-bit on two 48GB cards?",)
TRAINED_ON_TWO = ("will a 13B model fit on 2 × A100 40GB with ZeRO-3 for training?",)
EIGHT_H100 = ("would 8 H100s with 80 GB each be enough to train a 30B model?",)


@pytest.mark.parametrize(
    ("question", "history", "arguments", "verdict"),
    [
        (  # 13B × 16 bytes = 208 GB over 2 GPUs = 104 GB each
            "I have two A6000s (48GB) — is that enough to fine-tune a 13B model with Adam?",
            (),
            {"params": "13B", "gpu_memory_gb": "48", "num_gpus": 2, "workload": "training", "optimizer": "adam"},
            "no",
        ),
        (  # 7 GB of 8-bit weights
            "will a 7B model run on a 4090 with 24GB in 8-bit?",
            (),
            {"params": "7B", "gpu_memory_gb": "24", "num_gpus": 1, "workload": "inference", "bits": 8},
            "yes",
        ),
        (  # ZeRO-2: weights 6 GB whole + (6 + 36) / 4 GB = 16.5 GB
            "can we pretrain a 3B model on 4 x80GB cards with ZeRO-2?",
            (),
            {"params": "3B", "gpu_memory_gb": "80", "num_gpus": 4, "workload": "training", "zero_stage": 2},
            "yes",
        ),
        (  # 480 GB / 4 = 120 GB each
            "I've got four 80 GB cards — do I need more GPUs to train a 30B model?",
            (),
            {"params": "30B", "gpu_memory_gb": "80", "num_gpus": 4, "workload": "training"},
            "no",
        ),
        (  # 17 GB of 4-bit weights
            "will a 34B model run in 4-bit on a single RTX 3090 24GB?",
            (),
            {"params": "34B", "gpu_memory_gb": "24", "num_gpus": 1, "workload": "inference", "bits": 4},
            "yes",
        ),
        (  # 140 GB of fp16 weights
            "is one H100 (80GB) enough for inference on a 70B model in fp16?",
            (),
            {"params": "70B", "gpu_memory_gb": "80", "num_gpus": 1, "workload": "inference", "bits": 16},
            "no",
        ),
        (  # 1,120 GB / 16 = 70 GB each
            "would sixteen 40 GB A100s be enough to train a 70B model?",
            (),
            {"params": "70B", "gpu_memory_gb": "40", "num_gpus": 16, "workload": "training"},
            "no",
        ),
        (  # 40 GB of 16-bit weights over 3
            "could three 24GB cards hold a 20B model's weights for serving?",
            (),
            {"params": "20B", "gpu_memory_gb": "24", "num_gpus": 3, "workload": "inference"},
            "yes",
        ),
        (  # 70 GB of 8-bit weights on one 48 GB card
            "how about on one of them?",
            SERVED_ON_TWO,
            {"params": "70B", "gpu_memory_gb": "48", "num_gpus": 1, "workload": "inference", "bits": 8},
            "no",
        ),
        (  # 208 GB / 8 = 26 GB each
            "and on 8 of them?",
            TRAINED_ON_TWO,
            {"params": "13B", "gpu_memory_gb": "40", "num_gpus": 8, "workload": "training", "zero_stage": 3},
            "yes",
        ),
        (  # 1,040 GB / 4 = 260 GB each
            "a 65B model won't fit on 4 × 24GB 4090s for training, will it?",
            (),
            {"params": "65B", "gpu_memory_gb": "24", "num_gpus": 4, "workload": "training"},
            "no",
        ),
        (  # 43.2 GB / 12 = 3.6 GB each
            "twelve V100s with 32 GB each — can we pretrain a 2.7B model with AdamW?",
            (),
            {"params": "2.7B", "gpu_memory_gb": "32", "num_gpus": 12, "workload": "training", "optimizer": "adamw"},
            "yes",
        ),
        (  # 480 GB / 11 ≈ 43.6 GB each
            "what if I had eleven of them?",
            EIGHT_H100,
            {"params": "30B", "gpu_memory_gb": "80", "num_gpus": 11, "workload": "training"},
            "yes",
        ),
        (  # 1,040 GB / 8 = 130 GB each
            "do I need more GPUs? I have 8 × A100 80GB and want to fine-tune a 65B model with ZeRO-3",
            (),
            {"params": "65B", "gpu_memory_gb": "80", "num_gpus": 8, "workload": "training", "zero_stage": 3},
            "no",
        ),
        (  # 6.5 GB of 4-bit weights
            "is 24GB of VRAM enough to run a 13B model in int4?",
            (),
            {"params": "13B", "gpu_memory_gb": "24", "num_gpus": 1, "workload": "inference", "bits": 4},
            "yes",
        ),
        (  # 112 GB / 8 = 14 GB each
            "can I fine-tune a 7B model on 8x80GB?",
            (),
            {"params": "7B", "gpu_memory_gb": "80", "num_gpus": 8, "workload": "training"},
            "yes",
        ),
        (  # 480 GB / 2 = 240 GB each
            "what about with two?",
            EIGHT_H100,
            {"params": "30B", "gpu_memory_gb": "80", "num_gpus": 2, "workload": "training"},
            "no",
        ),
        (  # 480 GB / 8 = 60 GB each, on 40 GB cards
            "and with 40GB cards instead?",
            EIGHT_H100,
            {"params": "30B", "gpu_memory_gb": "40", "num_gpus": 8, "workload": "training"},
            "no",
        ),
        (  # a bigger model on the same GPUs: 1,120 GB / 8 = 140 GB each
            "and a 70B model?",
            EIGHT_H100,
            {"params": "70B", "gpu_memory_gb": "80", "num_gpus": 8, "workload": "training"},
            "no",
        ),
    ],
)
def test_more_learner_wordings_are_planned_as_fits(
    question: str, history: tuple[str, ...], arguments: dict, verdict: str
) -> None:
    call = planned(question, history)
    assert call.name == "memory_fit" and call.arguments == arguments
    assert run_tool(call.name, call.arguments).result["verdict"] == verdict


def test_a_card_number_is_a_card_not_a_count() -> None:
    """ "my 4090 GPU" is one RTX 4090, not 4,090 GPUs; "4090" alone says no memory, so nothing is compared."""
    call = planned("can I run a 7B model in fp16 on my 4090 GPU with 24GB?")
    assert call.arguments == {"params": "7B", "gpu_memory_gb": "24", "num_gpus": 1, "workload": "inference", "bits": 16}
    assert recognise_memory_fit("will a 7B model run on my 4090?", NONE) is None


@pytest.mark.parametrize(
    ("question", "history", "name"),
    [
        # a time question names its GPUs' memory too
        ("how long will it take to train a 70B model on 1.4T tokens with 1024 H100 80GB GPUs at 40% MFU?", (),
         "training_time"),
        ("how many days would it take to train 13B on 500B tokens on 64 A100 80GB GPUs?", (), "training_time"),
        # after a fit question, a new sizing question is not a follow-up to it
        ("the optimizer state for a 13B model?", EIGHT_H100, "training_memory"),
        ("and how much memory does a 13B model need?", EIGHT_H100, "training_memory"),
        ("a 13B model in int4?", EIGHT_H100, "quantized_size"),
        ("how much memory does a 7B model need?", (), "training_memory"),
    ],
)  # fmt: skip
def test_what_is_not_a_fit_follow_up(question: str, history: tuple[str, ...], name: str) -> None:
    assert planned(question, history).name == name


@pytest.mark.parametrize(
    ("question", "name"),
    [
        ("how much memory does a 7B model need", "training_memory"),
        ("how much memory does a 70B model need with Adam?", "training_memory"),
        ("ZeRO-3 on 64 GPUs for 13B", "zero_memory"),
        ("int4 70B", "quantized_size"),
        ("how big is a 70B model in 4-bit with group size 128?", "quantized_size"),
        ("a 7B model needs 112 GB of memory", "training_memory"),  # no GPU named: a need, not a fit
    ],
)
def test_plain_sizing_questions_stay_with_their_calculators(question: str, name: str) -> None:
    assert planned(question).name == name


@pytest.mark.parametrize(
    ("question", "arguments"),
    [
        ("13B on 500B tokens vs 40B on 150B tokens — which is better?", ("13B", "500B", "40B", "150B")),
        ("is it better to train 7B on 1T tokens or 13B on 500B tokens?", ("7B", "1T", "13B", "500B")),
        ("a 70B model trained on 1.4T tokens versus 280B params on 300B tokens", ("70B", "1.4T", "280B", "300B")),
        ("13B on 500B or 40B on 150B tokens: which has the lower loss?", ("13B", "500B", "40B", "150B")),
    ],
)
def test_allocation_questions_are_planned_as_comparisons(question: str, arguments: tuple[str, ...]) -> None:
    call = planned(question)
    assert call.name == "compare_allocations"
    assert call.arguments == dict(zip(("params_a", "tokens_a", "params_b", "tokens_b"), arguments, strict=True))


@pytest.mark.parametrize(
    "question",
    [
        "what loss does 13B on 500B tokens reach?",  # one allocation: a loss, not a comparison
        "13B on 500B tokens or 13B on 500B tokens?",  # the same allocation twice
        "13B with 8 GPUs or 7B with 4 GPUs?",  # no token counts
        "13B on 500B tokens and 40B on 150B tokens",  # nothing asks which
    ],
)
def test_what_is_not_a_comparison(question: str) -> None:
    assert recognise_compare_allocations(question, NONE) is None


def test_decisions_are_planned_before_the_calculators_they_reuse() -> None:
    order = [calculator.name for calculator in PLANNING_ORDER]
    assert order.index("memory_fit") < min(order.index(n) for n in ("zero_memory", "quantized_size", "training_memory"))
    later = ("scaling_law_loss", "chinchilla_optimal")
    assert order.index("compare_allocations") < min(order.index(n) for n in later)
    assert REGISTRY["memory_fit"].title == "Memory fit"
    assert REGISTRY["compare_allocations"].title == "Allocation comparison"
