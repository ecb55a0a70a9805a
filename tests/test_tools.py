"""The calculator registry: parsing, bad input, schemas, properties (published figures: *_published.py)."""

from __future__ import annotations

import json
import math
import struct
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mentor.errors import InvalidInput, NotFound
from mentor.tools import (
    REGISTRY,
    ToolResult,
    TrainingMemoryArgs,
    parse_count,
    parse_number,
    run_tool,
    tool_schemas,
    training_memory,
)
from mentor.tools.formats import FORMATS, round_to_format

# The fixed contract: argument names and result keys every caller relies on.
CONTRACT: dict[str, tuple[set[str], set[str]]] = {
    "training_memory": (
        {"params", "weight_dtype", "optimizer", "mixed_precision"},
        {"weights_bytes", "gradients_bytes", "optimizer_bytes", "total_bytes", "bytes_per_param"},
    ),
    "zero_memory": (
        {"params", "dp_degree", "stage", "weight_bytes", "gradient_bytes", "optimizer_bytes_per_param"},
        {"weights_bytes", "gradients_bytes", "optimizer_bytes", "total_bytes"},
    ),
    "chinchilla_optimal": (
        {"params", "tokens", "compute_flops", "tokens_per_param"},
        {"params", "tokens", "compute_flops"},
    ),
    "scaling_law_loss": ({"params", "tokens", "law", "constants"}, {"loss", "constants"}),
    "training_time": (
        {"params", "tokens", "num_gpus", "peak_flops_per_gpu", "gpu", "mfu", "flops_per_param_token"},
        {"compute_flops", "seconds", "days"},
    ),
    "quantized_size": (
        {"params", "bits", "group_size", "scale_bits", "zero_point_bits"},
        {"bits_per_weight", "total_bytes"},
    ),
    "pipeline_bubble": ({"stages", "microbatches", "interleave"}, {"bubble_fraction", "bubble_over_ideal"}),
    "activation_memory": (
        {
            "seq_len",
            "micro_batch",
            "hidden",
            "heads",
            "layers",
            "tensor_parallel",
            "sequence_parallel",
            "recompute",
        },
        {"per_layer_bytes", "total_bytes"},
    ),
    "kv_cache": (
        {"layers", "kv_heads", "head_dim", "seq_len", "batch", "bytes_per_element"},
        {"bytes_per_token", "total_bytes"},
    ),
    "number_format": (
        {"format"},
        {"exponent_bits", "mantissa_bits", "max", "min_normal", "min_subnormal", "epsilon"},
    ),
    "loss_scaling": (
        {"gradient", "scale", "format"},
        {
            "underflows_unscaled",
            "scaled_gradient",
            "underflows_scaled",
            "overflows_scaled",
            "max_unscaled_gradient",
        },
    ),
    "parallel_layout": (
        {"num_gpus", "tensor_parallel", "pipeline_parallel", "micro_batch", "grad_accum"},
        {"data_parallel", "global_batch"},
    ),
    "memory_fit": (
        {"params", "gpu_memory_gb", "num_gpus", "workload", "zero_stage", "optimizer", "bits", "group_size"},
        {
            "verdict",
            "workload",
            "params",
            "num_gpus",
            "total_bytes",
            "per_gpu_bytes",
            "available_per_gpu_bytes",
            "available_total_bytes",
            "headroom_per_gpu_bytes",
            "shortfall_per_gpu_bytes",
            "bytes_per_param",
            "zero_stage",
            "sharding",
            "min_gpus",
        },
    ),
    "compare_allocations": (
        {"params_a", "tokens_a", "params_b", "tokens_b", "tokens_per_param"},
        {
            "verdict",
            "better",
            "loss_a",
            "loss_b",
            "loss_difference",
            "compute_flops_a",
            "compute_flops_b",
            "equal_compute",
            "compute_difference_percent",
            "tokens_per_param_a",
            "tokens_per_param_b",
        },
    ),
}

# One valid call per calculator, with only the required arguments.
MINIMAL: dict[str, dict[str, object]] = {
    "training_memory": {"params": "7B"},
    "zero_memory": {"params": "7.5B", "dp_degree": 64, "stage": 2},
    "chinchilla_optimal": {"params": "70B"},
    "scaling_law_loss": {"params": "70B", "tokens": "1.4T"},
    "training_time": {"params": "70B", "tokens": "1.4T", "num_gpus": 1024, "gpu": "a100"},
    "quantized_size": {"params": "70B", "bits": 4},
    "pipeline_bubble": {"stages": 4, "microbatches": 8},
    "activation_memory": {"seq_len": 2048, "micro_batch": 1, "hidden": 12288, "heads": 96},
    "kv_cache": {"layers": 32, "kv_heads": 32, "head_dim": 128, "seq_len": 4096},
    "number_format": {"format": "fp16"},
    "loss_scaling": {"gradient": "1e-8"},
    "parallel_layout": {"num_gpus": 64, "tensor_parallel": 8},
    "memory_fit": {"params": "7B", "gpu_memory_gb": 80},
    "compare_allocations": {"params_a": "13B", "tokens_a": "500B", "params_b": "40B", "tokens_b": "150B"},
}


def test_registry_holds_exactly_the_contract():
    assert set(REGISTRY) == set(CONTRACT) == set(MINIMAL)


# ---- parsing -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("7B", 7_000_000_000),
        ("7b", 7_000_000_000),
        ("1.4T", 1_400_000_000_000),
        ("70e9", 70_000_000_000),
        ("13 billion", 13_000_000_000),
        ("350M", 350_000_000),
        ("1.5k", 1_500),
        ("2 million", 2_000_000),
        ("3e23", 3 * 10**23),
        ("7,000,000,000", 7_000_000_000),
        ("  7.5B ", 7_500_000_000),
        (7e9, 7_000_000_000),
        (7_000_000_000, 7_000_000_000),
    ],
)
def test_parse_count_examples(text, expected):
    assert parse_count(text, name="params") == expected
    assert type(parse_count(text)) is int


@pytest.mark.parametrize(
    ("text", "expected"),
    [("3 thousand", 3 * 10**3), ("2 mn", 2 * 10**6), ("4bn", 4 * 10**9), ("1 tn", 10**12), ("5 millions", 5 * 10**6)],
)
def test_every_scale_in_the_one_table_parses(text, expected):
    """The scale table in parsing.py is the only one: the planner's wording and the grounding check read it too."""
    assert parse_count(text) == expected


def test_an_unknown_scale_is_refused_with_the_ones_allowed():
    with pytest.raises(InvalidInput, match="unknown suffix .* use k, M, B, T"):
        parse_count("2 quadrillion", name="params")


def test_parse_is_exact_not_via_float():
    # 0.1 + 0.2 style drift would make these unequal if the text went through a binary float.
    assert parse_number("0.1") + parse_number("0.2") == Fraction(3, 10)
    assert parse_number("1e-8") == Fraction(1, 10**8)
    assert parse_number(1e-8) == Fraction(1, 10**8)  # a JSON float keeps the decimal the caller wrote
    assert parse_count("1.4T") == 14 * 10**11
    assert parse_number("123456789.123456789e3") == Fraction(123456789123456789, 10**6)
    assert parse_number("40%") == Fraction(2, 5)


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(["k", "M", "B", "T", " thousand", " billion"]))
def test_parse_suffix_multiplies_exactly(whole, suffix):
    multiplier = {"k": 10**3, "M": 10**6, "B": 10**9, "T": 10**12, " thousand": 10**3, " billion": 10**9}[suffix]
    assert parse_number(f"{whole}{suffix}") == whole * multiplier
    assert parse_number(f"{whole}.25{suffix}") == (whole + Fraction(1, 4)) * multiplier


@given(st.integers(min_value=1, max_value=10**30))
def test_parse_counts_with_thousands_separators(count):
    assert parse_count(f"{count:,}") == count
    assert parse_count(str(count)) == count


@pytest.mark.parametrize("text", ["7.5", "1.2345k", "0.5", "1e-3"])
def test_non_integer_count_is_rejected(text):
    with pytest.raises(InvalidInput, match=r"^params: must be a whole number"):
        parse_count(text, name="params")


@pytest.mark.parametrize("text", ["seven", "7 bananas", "1,00", "", "1e", "--7", "7B7", "1e999999999", "x" * 100])
def test_text_that_is_not_a_number_is_rejected(text):
    with pytest.raises(InvalidInput, match=r"^params: "):
        parse_number(text, name="params")


# ---- bad input -----------------------------------------------------------------------------------------


BAD_INPUT = [
    ("zero_memory", {"params": "7.5B", "dp_degree": 64, "stage": 7}, "stage: must be 0, 1, 2 or 3 (got 7)"),
    ("zero_memory", {"params": "7.5B", "dp_degree": 0, "stage": 1}, "dp_degree: must be at least 1"),
    ("zero_memory", {"params": "7.5B", "dp_degree": "2.5", "stage": 1}, "dp_degree: must be a whole number"),
    ("training_memory", {"params": -7}, "params: must be at least 1"),
    ("training_memory", {"params": 0}, "params: must be at least 1"),
    ("training_memory", {"params": "seven billion"}, "params: must be a number"),
    ("training_memory", {"params": "7 zillion"}, "params: unknown suffix"),
    ("training_memory", {"params": True}, "params: must be a number, not a boolean"),
    ("training_memory", {"params": [7]}, "params: must be a number"),
    ("training_memory", {"params": None}, "params: must be a number"),
    ("training_memory", {}, "params: required argument is missing"),
    ("training_memory", {"params": "7B", "batch": 8}, "batch: unknown argument for training_memory"),
    ("training_memory", {"params": "7B", "mixed_precision": 1}, "mixed_precision: must be true or false"),
    ("training_memory", {"params": "7B", "mixed_precision": "yes"}, "mixed_precision: must be true or false"),
    (
        "training_memory",
        {"params": "7B", "weight_dtype": "int8"},
        "weight_dtype: must be 'fp32', 'fp16' or 'bf16'",
    ),
    ("training_memory", {"params": "7B", "optimizer": "lion"}, "optimizer: must be"),
    ("chinchilla_optimal", {}, "give exactly one of params, tokens or compute_flops (got none)"),
    (
        "chinchilla_optimal",
        {"params": "70B", "tokens": "1.4T"},
        "give exactly one of params, tokens or compute_flops",
    ),
    ("chinchilla_optimal", {"compute_flops": 10}, "compute_flops: too small"),
    ("chinchilla_optimal", {"tokens": 5}, "tokens: too small"),
    (
        "chinchilla_optimal",
        {"params": "70B", "tokens_per_param": 0},
        "tokens_per_param: must be greater than 0",
    ),
    ("scaling_law_loss", {"params": "70B", "tokens": "1.4T", "law": "gpt4"}, "law: must be"),
    (
        "scaling_law_loss",
        {"params": "70B", "tokens": "1.4T", "constants": {"Q": 1}},
        "constants.Q: not a constant",
    ),
    (
        "scaling_law_loss",
        {"params": "70B", "tokens": "1.4T", "constants": {"A": 0}},
        "constants.A: must be greater",
    ),
    (
        "scaling_law_loss",
        {"params": "70B", "tokens": "1.4T", "constants": {"A": -1}},
        "constants.A: must be at least",
    ),
    (
        "scaling_law_loss",
        {"params": "70B", "tokens": "1.4T", "constants": {"A": "x"}},
        "constants.A: must be a number",
    ),
    ("scaling_law_loss", {"params": 10, "tokens": 10, "constants": {"alpha": "1e300"}}, "constants: "),
    (
        "training_time",
        {"params": 1, "tokens": 1, "num_gpus": 1},
        "peak_flops_per_gpu: give peak_flops_per_gpu",
    ),
    (
        "training_time",
        {"params": 1, "tokens": 1, "num_gpus": 1, "gpu": "a100", "peak_flops_per_gpu": 1},
        "peak_flops_per_gpu: give either peak_flops_per_gpu or gpu, not both",
    ),
    ("training_time", {"params": 1, "tokens": 1, "num_gpus": 1, "gpu": "tpu_v9"}, "gpu: must be"),
    (
        "training_time",
        {"params": 1, "tokens": 1, "num_gpus": 1, "gpu": "a100", "mfu": 1.2},
        "mfu: must be at most 1",
    ),
    (
        "training_time",
        {"params": 1, "tokens": 1, "num_gpus": 1, "gpu": "a100", "mfu": 0},
        "mfu: must be greater",
    ),
    (
        "training_time",
        {"params": 1, "tokens": 1, "num_gpus": 0, "gpu": "a100"},
        "num_gpus: must be at least 1",
    ),
    ("quantized_size", {"params": "7B", "bits": 0}, "bits: must be at least 1"),
    ("quantized_size", {"params": "7B", "bits": 24}, "bits: must be a whole number from 1 to 16, or 32"),
    ("quantized_size", {"params": "7B", "bits": 4, "group_size": 0}, "group_size: must be at least 1"),
    ("quantized_size", {"params": "7B", "bits": 4, "scale_bits": 64}, "scale_bits: must be at most 32"),
    ("pipeline_bubble", {"stages": 0, "microbatches": 8}, "stages: must be at least 1"),
    ("pipeline_bubble", {"stages": 4, "microbatches": 2.5}, "microbatches: must be a whole number"),
    (
        "activation_memory",
        {"seq_len": 2048, "micro_batch": 1, "hidden": 12288, "heads": 96, "tensor_parallel": 5},
        "tensor_parallel: must divide heads",
    ),
    (
        "activation_memory",
        {"seq_len": 2048, "micro_batch": 1, "hidden": 1000, "heads": 96},
        "heads: must divide hidden",
    ),
    (
        "activation_memory",
        {"seq_len": 2048, "micro_batch": 1, "hidden": 12288, "heads": 96, "sequence_parallel": True},
        "sequence_parallel: needs tensor_parallel > 1",
    ),
    (
        "activation_memory",
        {
            "seq_len": 2047,
            "micro_batch": 1,
            "hidden": 12288,
            "heads": 96,
            "tensor_parallel": 8,
            "sequence_parallel": True,
        },
        "seq_len: must be a multiple of tensor_parallel",
    ),
    (
        "activation_memory",
        {"seq_len": 2048, "micro_batch": 1, "hidden": 12288, "heads": 96, "recompute": "half"},
        "recompute: must be 'none', 'selective' or 'full'",
    ),
    (
        "kv_cache",
        {"layers": 32, "kv_heads": 32, "head_dim": 128, "seq_len": 0},
        "seq_len: must be at least 1",
    ),
    (
        "kv_cache",
        {"layers": 32, "kv_heads": 32, "head_dim": 128, "seq_len": 8, "bytes_per_element": 0},
        "bytes_per_element: must be greater than 0",
    ),
    ("number_format", {"format": "fp64"}, "format: must be"),
    ("loss_scaling", {"gradient": "tiny"}, "gradient: must be a number"),
    ("loss_scaling", {"gradient": 1e-8, "scale": -2}, "scale: must be greater than 0"),
    (
        "parallel_layout",
        {"num_gpus": 100, "tensor_parallel": 8, "pipeline_parallel": 4},
        "num_gpus: 100 GPUs do not split into replicas of tensor_parallel × pipeline_parallel",
    ),
    ("memory_fit", {"params": "7B", "gpu_memory_gb": 0}, "gpu_memory_gb: must be greater than 0"),
    ("memory_fit", {"params": "7B"}, "gpu_memory_gb: required argument is missing"),
    ("memory_fit", {"params": "7B", "gpu_memory_gb": 80, "num_gpus": 0}, "num_gpus: must be at least 1"),
    ("memory_fit", {"params": "7B", "gpu_memory_gb": 80, "workload": "serving"}, "workload: must be"),
    ("memory_fit", {"params": "7B", "gpu_memory_gb": 80, "zero_stage": 4}, "zero_stage: must be 0, 1, 2 or 3"),
    ("memory_fit", {"params": "7B", "gpu_memory_gb": 80, "bits": 4}, "bits: applies to inference only"),
    (
        "memory_fit",
        {"params": "7B", "gpu_memory_gb": 80, "workload": "inference", "zero_stage": 3},
        "zero_stage: applies to training only",
    ),
    (
        "memory_fit",
        {"params": "7B", "gpu_memory_gb": 80, "workload": "inference", "bits": 64},
        "bits: must be a whole number from 1 to 16, or 32 (got 64)",
    ),
    (
        "compare_allocations",
        {"params_a": "13B", "tokens_a": "500B", "params_b": "40B"},
        "tokens_b: required argument is missing",
    ),
    (
        "compare_allocations",
        {"params_a": "13B", "tokens_a": "500B", "params_b": "40B", "tokens_b": "0.5"},
        "tokens_b: must be a whole number",
    ),
]


@pytest.mark.parametrize(("name", "arguments", "message"), BAD_INPUT)
def test_bad_input_names_the_argument(name, arguments, message):
    with pytest.raises(InvalidInput) as raised:
        run_tool(name, arguments)
    assert raised.value.message.startswith(message), raised.value.message
    assert raised.value.status_code == 422
    assert "pydantic" not in raised.value.message and "http" not in raised.value.message


def test_bad_input_kinds_cover_every_calculator():
    assert {name for name, _, _ in BAD_INPUT} == set(REGISTRY)


def test_unknown_calculator_is_not_found_and_lists_the_names():
    with pytest.raises(NotFound) as raised:
        run_tool("flops_per_token", {})
    assert raised.value.status_code == 404
    assert all(name in raised.value.message for name in REGISTRY)


@pytest.mark.parametrize(
    ("text", "message"), [("{params: 7}", "arguments: not valid JSON"), ("[7]", "arguments: must be")]
)
def test_arguments_that_are_not_a_json_object(text, message):
    with pytest.raises(InvalidInput, match=f"^{message}"):
        run_tool("training_memory", text)


def test_float_overflow_is_an_error_not_inf():
    with pytest.raises(InvalidInput, match="too large to represent"):
        run_tool(
            "training_time",
            {"params": "1e300", "tokens": "1e300", "num_gpus": 7, "peak_flops_per_gpu": "1e-300"},
        )


# ---- arguments, results, explanations ------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(MINIMAL))
def test_minimal_call_returns_the_contract(name):
    outcome = run_tool(name, MINIMAL[name])
    arguments, result_keys = CONTRACT[name]
    assert isinstance(outcome, ToolResult) and outcome.name == name
    assert set(outcome.result) == result_keys
    # Every argument is echoed, defaults filled in, as plain JSON values.
    assert set(outcome.arguments) == arguments
    assert json.loads(json.dumps(outcome.to_dict(), allow_nan=False)) == outcome.to_dict()
    assert outcome.explanation and "Fraction" not in outcome.explanation


def test_arguments_are_normalised():
    outcome = run_tool("training_time", '{"params": "70B", "tokens": "1.4T", "num_gpus": "1k", "gpu": "A100"}')
    assert outcome.arguments == {
        "params": 70_000_000_000,
        "tokens": 1_400_000_000_000,
        "num_gpus": 1000,
        "peak_flops_per_gpu": 312_000_000_000_000,
        "gpu": "a100",
        "mfu": 0.4,
        "flops_per_param_token": 6,
    }


def test_direct_call_with_an_args_model():
    outcome = training_memory(TrainingMemoryArgs(params="13 billion", weight_dtype="fp16"))
    assert outcome.result["total_bytes"] == 13 * 10**9 * 16


def test_integral_results_are_ints_and_others_floats():
    kv = run_tool("kv_cache", MINIMAL["kv_cache"]).result
    assert type(kv["total_bytes"]) is int
    bubble = run_tool("pipeline_bubble", MINIMAL["pipeline_bubble"]).result
    assert type(bubble["bubble_fraction"]) is float and bubble["bubble_fraction"] == 3 / 11


def test_explanation_numbers_come_from_the_result():
    outcome = run_tool("quantized_size", {"params": "7B", "bits": 4, "group_size": 128})
    assert "4 + (16 scale + 0 zero-point bits) / 128 weights per group = 4.125" in outcome.explanation
    assert "7B params × 4.125 bits / 8 = 3.609375 GB" in outcome.explanation
    time = run_tool("training_time", MINIMAL["training_time"])
    assert "5.88e23 FLOPs" in time.explanation
    assert "≈53.25 days" in time.explanation and round(time.result["days"], 2) == 53.25
    loss = run_tool("scaling_law_loss", MINIMAL["scaling_law_loss"])
    assert "≈ 1.937 nats/token" in loss.explanation


def test_tool_result_is_frozen():
    outcome = run_tool("number_format", {"format": "bf16"})
    with pytest.raises(AttributeError):
        outcome.name = "x"  # type: ignore[misc]


# ---- schemas -------------------------------------------------------------------------------------------


def test_every_calculator_renders_an_openai_tool_schema():
    schemas = tool_schemas()
    assert [schema["function"]["name"] for schema in schemas] == list(REGISTRY)
    for schema in schemas:
        assert schema["type"] == "function"
        function = schema["function"]
        assert set(function) == {"name", "description", "parameters"}
        assert function["description"] == REGISTRY[function["name"]].description != ""
        parameters = function["parameters"]
        assert parameters["type"] == "object"
        assert set(parameters["properties"]) == CONTRACT[function["name"]][0]
        assert parameters["additionalProperties"] is False
        assert set(parameters.get("required", [])) <= set(parameters["properties"])
        assert all(prop.get("description") for prop in parameters["properties"].values())
    json.dumps(schemas)


def test_schemas_are_what_langchain_renders_for_the_argument_models():
    """The schemas were langchain's convert_to_openai_tool output; they are built without it now (its first call
    imports langsmith and the tracers, ~0.45 s of a cold start) and must not change for the model."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    for calculator in REGISTRY.values():
        rendered = convert_to_openai_tool(calculator.args_model)["function"]["parameters"]
        assert json.dumps(calculator.openai_schema["function"]["parameters"]) == json.dumps(rendered), calculator.name


def test_count_fields_accept_strings_in_the_schema():
    properties = REGISTRY["training_memory"].json_schema["properties"]
    assert {"type": "string"} in properties["params"]["anyOf"]
    assert {"type": "integer"} in properties["params"]["anyOf"]
    assert properties["weight_dtype"]["enum"] == ["fp32", "fp16", "bf16"]
    assert properties["mixed_precision"]["type"] == "boolean"
    assert REGISTRY["zero_memory"].json_schema["required"] == ["params", "dp_degree", "stage"]


def test_pipeline_description_states_both_definitions():
    description = REGISTRY["pipeline_bubble"].description
    assert "bubble_over_ideal = (p−1)/(v·m)" in description
    assert "bubble_fraction = (p−1)/(v·m + p−1)" in description


def test_schemas_are_copies():
    tool_schemas()[0]["function"]["name"] = "changed"
    assert tool_schemas()[0]["function"]["name"] == "training_memory"


# ---- properties ----------------------------------------------------------------------------------------

counts = st.integers(min_value=1, max_value=10**13)
byte_sizes = st.sampled_from(["1", "2", "4", "0.5", "12", "16"])


@given(counts, st.integers(min_value=1, max_value=4096), byte_sizes, byte_sizes, byte_sizes)
def test_each_zero_stage_needs_no_more_memory_than_the_last(params, dp_degree, weight, gradient, optimizer):
    totals = [
        Fraction(
            run_tool(
                "zero_memory",
                {
                    "params": params,
                    "dp_degree": dp_degree,
                    "stage": stage,
                    "weight_bytes": weight,
                    "gradient_bytes": gradient,
                    "optimizer_bytes_per_param": optimizer,
                },
            ).result["total_bytes"]
        )
        for stage in range(4)
    ]
    assert totals == sorted(totals, reverse=True)
    if dp_degree > 1:
        assert totals[3] < totals[0]


@given(
    st.integers(min_value=1, max_value=10**12),
    st.integers(min_value=2, max_value=1000),
    st.sampled_from(["fp32", "fp16", "bf16"]),
    st.sampled_from(["adam", "adamw", "sgd", "sgd_momentum"]),
    st.booleans(),
)
def test_training_memory_is_linear_in_params(params, factor, dtype, optimizer, mixed):
    options = {"weight_dtype": dtype, "optimizer": optimizer, "mixed_precision": mixed}
    small = run_tool("training_memory", {"params": params, **options}).result
    large = run_tool("training_memory", {"params": params * factor, **options}).result
    for key in ("weights_bytes", "gradients_bytes", "optimizer_bytes", "total_bytes"):
        assert large[key] == small[key] * factor
    assert large["bytes_per_param"] == small["bytes_per_param"]
    assert small["total_bytes"] == params * small["bytes_per_param"]


@given(
    st.integers(min_value=1, max_value=10**12),
    st.integers(min_value=2, max_value=1000),
    st.sampled_from([*range(1, 17), 32]),
    st.one_of(st.none(), st.sampled_from([32, 64, 128, 256])),
    st.sampled_from([0, 4, 8]),
)
def test_quantized_size_is_linear_in_params(params, factor, bits, group_size, zero_point_bits):
    options = {"bits": bits, "group_size": group_size, "zero_point_bits": zero_point_bits}
    small = run_tool("quantized_size", {"params": params, **options}).result
    large = run_tool("quantized_size", {"params": params * factor, **options}).result
    assert math.isclose(large["total_bytes"], small["total_bytes"] * factor, rel_tol=1e-15)
    overhead = Fraction(16 + zero_point_bits, group_size) if group_size else 0
    assert Fraction(small["bits_per_weight"]) == bits + overhead


@given(
    counts,
    st.integers(min_value=2, max_value=1000),
    st.integers(min_value=1, max_value=1024),
    st.integers(0, 3),
)
def test_zero_memory_is_linear_in_params(params, factor, dp_degree, stage):
    arguments = {"dp_degree": dp_degree, "stage": stage}
    small = run_tool("zero_memory", {"params": params, **arguments}).result
    large = run_tool("zero_memory", {"params": params * factor, **arguments}).result
    for key, value in small.items():
        assert math.isclose(large[key], value * factor, rel_tol=1e-15)


@settings(max_examples=300)
@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6))
def test_fp16_rounding_agrees_with_ieee_half_packing(value):
    exact = Fraction(value)
    rounded = round_to_format(exact, FORMATS["fp16"])
    try:
        packed = struct.unpack("<e", struct.pack("<e", value))[0]
    except OverflowError:  # CPython refuses values that round to inf
        assert abs(rounded) > FORMATS["fp16"].max
    else:
        assert rounded == Fraction(packed)


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-3e38, max_value=3e38))
def test_fp32_rounding_agrees_with_ieee_single_packing(value):
    rounded = round_to_format(Fraction(value), FORMATS["fp32"])
    assert rounded == Fraction(struct.unpack("<f", struct.pack("<f", value))[0])


numbers_or_text = st.one_of(
    st.integers(min_value=-10, max_value=10**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["7B", "1e300", "1e-300", "0.5", "-3", "1.4T", "2e308"]),
)


@settings(max_examples=60)
@given(st.sampled_from(sorted(set(MINIMAL) - {"number_format"})), st.data())
def test_results_are_never_nan_or_inf(name, data):
    arguments = dict(MINIMAL[name])
    # Replace one numeric argument with an arbitrary value: either it is refused, or every number is finite.
    numeric = [key for key, value in arguments.items() if key not in {"format", "gpu"}]
    key = data.draw(st.sampled_from(numeric))
    arguments[key] = data.draw(numbers_or_text)
    try:
        outcome = run_tool(name, arguments)
    except InvalidInput:
        return
    values = [*outcome.result.values(), *outcome.arguments.values()]
    for value in values:
        if isinstance(value, float):
            assert math.isfinite(value)
    json.dumps(outcome.to_dict(), allow_nan=False)


@settings(max_examples=50)
@given(st.integers(min_value=1, max_value=10**15), st.integers(min_value=1, max_value=10**15))
def test_to_dict_round_trips_through_json(params, tokens):
    for outcome in (
        run_tool("scaling_law_loss", {"params": params, "tokens": tokens}),
        run_tool("chinchilla_optimal", {"params": params}),
        run_tool("pipeline_bubble", {"stages": params % 64 + 1, "microbatches": tokens % 512 + 1}),
    ):
        dumped = json.dumps(outcome.to_dict(), allow_nan=False)
        assert json.loads(dumped) == outcome.to_dict()


def test_training_time_description_lists_the_table_peaks():
    from mentor.tools.hardware import PEAK_FLOPS_PER_GPU

    description = REGISTRY["training_time"].description
    for name, peak in PEAK_FLOPS_PER_GPU.items():
        if name != "h100_sxm":  # described together with h100
            assert f"{name} " in description
            assert f"{float(peak) / 1e12:g}e12" in description, name


@pytest.mark.parametrize(
    ("value", "formatter", "expected"),
    [
        (84 * 10**9, "nbytes", "84 GB (≈78.23 GiB)"),
        (31_406_250_000, "nbytes", "31.40625 GB (≈29.25 GiB)"),
        (2**31, "nbytes", "2,147,483,648 bytes ≈ 2.147 GB (2 GiB)"),
        (512, "nbytes", "512 bytes"),
        (7 * 10**9, "count", "7B"),
        (14 * 10**11, "count", "1.4T"),
        (6_738_415_616, "count", "6,738,415,616"),
        (588 * 10**21, "flops", "5.88e23 FLOPs"),
        (Fraction(3, 11), "ratio", "≈0.2727 (≈27.27%)"),
        (Fraction(3, 8), "ratio", "0.375 (37.5%)"),
        (Fraction(1, 2**24), "number", "≈5.96e-8"),
    ],
)
def test_units_formatting(value, formatter, expected):
    from mentor.tools import units

    assert getattr(units, formatter)(value) == expected
