"""Each calculator's recogniser of learner wording, asked directly: what it reads, what it leaves alone.

The planner's order and follow-ups are in test_planner.py; these tests pin one recogniser each, so a change to
one calculator's wording shows up here, next to its neighbours' unchanged cases.
"""

from __future__ import annotations

import pytest

from mentor.engines.planner import plan_tools
from mentor.tools import REGISTRY, run_tool
from mentor.tools.activations import recognise_activation_memory
from mentor.tools.memory import recognise_kv_cache, recognise_training_memory, recognise_zero_memory
from mentor.tools.parallel import recognise_parallel_layout, recognise_pipeline_bubble
from mentor.tools.precision import recognise_loss_scaling, recognise_number_format
from mentor.tools.quantization import recognise_quantized_size
from mentor.tools.registry import title_of
from mentor.tools.scaling import recognise_chinchilla_optimal, recognise_scaling_law_loss, recognise_training_time
from mentor.tools.wording import (
    PlanContext,
    PlannedCall,
    eval_power,
    find_params,
    find_tokens,
    seq_len,
)

NONE = PlanContext()
EXAMPLE = ("params 7B: the module's worked example",)
EARLIER_13B = ("params 13B from earlier in this conversation",)


def calls(recognised: PlannedCall | list[PlannedCall] | None) -> list[PlannedCall]:
    assert recognised is not None
    return recognised if isinstance(recognised, list) else [recognised]


def only(recognised: PlannedCall | list[PlannedCall] | None) -> PlannedCall:
    (call,) = calls(recognised)
    return call


# ---- shared wording --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a 13B model", "13B"),
        ("70 billion parameters", "70B"),
        ("2 bn params", "2B"),
        ("7e9 params", "7e9"),
        ("1.3 trillion parameter model", "1.3T"),
        ("350m", "350M"),
        ("1000000 params", "1000000"),  # a bare count is a size from a million up
        ("300 params", None),
        ("1.4T tokens", None),  # tokens, FLOPs and GPUs are not model sizes
        ("64 gpus", None),
        ("training with 64k context", None),  # nor is a context length
        ("128k-token sequences", None),
        ("no numbers", None),
    ],
)
def test_find_params_reads_a_model_size_as_the_calculators_write_it(text: str, expected: str | None) -> None:
    assert find_params(text) == expected


def test_find_tokens_seq_len_and_powers() -> None:
    assert find_tokens("trained on 1.4T tokens") == "1.4T"
    assert find_tokens("300 billion tokens") == "300B"
    assert find_tokens("a 7B model") is None
    # A ratio is no token count: "chinchilla says 20 tokens per parameter, ..." plans no calculation on 20 tokens.
    assert find_tokens("chinchilla says 20 tokens per parameter") is None
    assert find_tokens("why 20 tokens/param?") is None
    assert find_tokens("1.4T tokens per the rule") == "1.4T"
    assert seq_len("8k context") == 8192  # context lengths count k as 1024
    assert seq_len("seq len 2048") == 2048
    assert seq_len("hidden 4096") is None
    assert eval_power("2^16") == "65536"
    assert eval_power("5.76 x 10^23") == "5.76e23"
    assert eval_power("1e24") == "1e24"
    # counts keep the calculators' suffixes; "thousand" is K (it once became "13T", 13 trillion)
    assert find_params("a 13 thousand parameter toy model") == "13K"
    assert find_params("a 70 billion parameter model") == "70B" and find_params("a 7 bn model") == "7B"


def test_the_default_token_count_is_exact() -> None:
    # 20 tokens a parameter, in exact arithmetic: float gave 81,999,999,999 for 4.1B
    (call,) = plan_tools("how long to train 4.1B on 64 gpus")
    assert call.name == "training_time" and call.arguments["tokens"] == "82000000000"


def test_params_or_assume_says_where_the_size_came_from() -> None:
    earlier = PlanContext(earlier="how much memory does a 13B model need?")
    assert earlier.params_or_assume("and a 70B one?") == ("70B", ())
    assert earlier.params_or_assume("and with SGD?") == ("13B", EARLIER_13B)
    assert NONE.params_or_assume("and with SGD?") == ("7B", EXAMPLE)
    assert NONE.params_or_assume("and with SGD?", allow_example=False) == (None, ())


# ---- one recogniser each -----------------------------------------------------------------------------------


def test_loss_scaling() -> None:
    call = only(recognise_loss_scaling("gradient of 1e-8 in fp16 with loss scale 2^16", NONE))
    assert call == PlannedCall("loss_scaling", {"gradient": "1e-8", "scale": 65536, "format": "fp16"})
    assert only(recognise_loss_scaling("do gradients around 3e-6 underflow?", NONE)).arguments == {"gradient": "3e-6"}
    assert recognise_loss_scaling("gradient of 1e-8", NONE) is None  # a value with no format or scaling words
    assert recognise_loss_scaling("what does loss scaling do in fp16?", NONE) is None  # no gradient value


def test_number_format() -> None:
    formats = calls(recognise_number_format("largest value of e4m3, E5M2, fp16 and bf16", NONE))
    assert [c.arguments["format"] for c in formats] == ["fp8_e4m3", "fp8_e5m2", "fp16"]  # at most three
    assert recognise_number_format("what is the range of fp16 for a 7B model", NONE) is None  # a sizing question
    assert recognise_number_format("why is bf16 preferred", NONE) is None  # no limit asked for


def test_pipeline_bubble() -> None:
    call = only(recognise_pipeline_bubble("bubble with 8 pipeline stages and 32 microbatches, interleave 2", NONE))
    assert call.arguments == {"stages": 8, "microbatches": 32, "interleave": 2}
    assert only(recognise_pipeline_bubble("pp=4 m=16", NONE)).arguments == {"stages": 4, "microbatches": 16}
    assert recognise_pipeline_bubble("what is a pipeline bubble with 4 stages", NONE) is None


def test_zero_memory() -> None:
    call = only(recognise_zero_memory("ZeRO stage 3 on 64 GPUs for a 13B model", NONE))
    assert call.arguments == {"params": "13B", "dp_degree": 64, "stage": 3}
    every = calls(recognise_zero_memory("fsdp dp=16, memory per gpu", NONE))
    assert [c.arguments["stage"] for c in every] == [0, 1, 2, 3]  # no stage named: all four
    assert {c.assumed for c in every} == {EXAMPLE}
    assert recognise_zero_memory("what does zero stage 2 shard", NONE) is None  # no GPUs to shard over


def test_activation_memory() -> None:
    text = "activations for seq 2048, hidden 4096, 32 heads, micro-batch 4, 80 layers, tp=8, sequence parallel, "
    call = only(recognise_activation_memory(text + "selective recompute", NONE))
    assert call.arguments == {
        "seq_len": 2048,
        "micro_batch": 4,
        "hidden": 4096,
        "heads": 32,
        "layers": 80,
        "tensor_parallel": 8,
        "sequence_parallel": True,
        "recompute": "selective",
    }
    assert recognise_activation_memory("activations for seq 2048, hidden 4096", NONE) is None  # no heads
    assert recognise_activation_memory("memory for seq 2048, hidden 4096, 32 heads", NONE) is None


def test_kv_cache() -> None:
    call = only(recognise_kv_cache("kv cache in fp8: 80 layers, 8 kv heads, head dim 128, 32k context, batch 16", NONE))
    assert call.arguments == {
        "layers": 80,
        "kv_heads": 8,
        "head_dim": 128,
        "seq_len": 32768,
        "batch": 16,
        "bytes_per_element": 1,
    }
    fp32 = only(recognise_kv_cache("kv cache in fp32, 32 layers, 32 heads, head size 128, seq 4096", NONE))
    assert fp32.arguments["kv_heads"] == 32 and fp32.arguments["bytes_per_element"] == 4
    assert recognise_kv_cache("how big is the KV cache of a 70B model", NONE) == []  # claimed, nothing to plan
    assert recognise_kv_cache("80 layers, head dim 128, seq 4096", NONE) is None


def test_parallel_layout() -> None:
    text = "tp=8 pp=2 on 512 gpus, mbs 4, grad accum 8: what global batch?"
    assert only(recognise_parallel_layout(text, NONE)).arguments == {
        "num_gpus": 512,
        "tensor_parallel": 8,
        "pipeline_parallel": 2,
        "micro_batch": 4,
        "grad_accum": 8,
    }
    assert recognise_parallel_layout("tp=8 on 512 gpus", NONE) is None  # nothing asked about data parallel
    assert recognise_parallel_layout("data parallel on 512 gpus", NONE) is None  # no split given


def test_quantized_size() -> None:
    call = only(recognise_quantized_size("70B in 4-bit with group size 128", NONE))
    assert call == PlannedCall("quantized_size", {"params": "70B", "bits": 4, "group_size": 128})
    earlier = PlanContext(earlier="how much memory does a 13B model need?")
    assert only(recognise_quantized_size("and in int8?", earlier)).assumed == EARLIER_13B
    assert recognise_quantized_size("and in int8?", NONE) is None  # never the worked example's size
    assert recognise_quantized_size("a 70B model in fp16", NONE) is None


def test_each_width_named_gets_its_own_size() -> None:
    # "13B in int4 vs int8?" was planned for int4 alone: the int8 half of the question had no figure.
    calls = recognise_quantized_size("13B in int4 vs int8?", NONE)
    assert [c.arguments for c in calls] == [{"params": "13B", "bits": 4}, {"params": "13B", "bits": 8}]
    # A width before another argument's name is that argument's, not the weights'.
    scales = only(recognise_quantized_size("70B in 4-bit with group size 128 and 8-bit scales", NONE))
    assert scales.arguments == {"params": "70B", "bits": 4, "group_size": 128, "scale_bits": 8}


def test_training_time() -> None:
    call = only(recognise_training_time("how long to train 13B on 256 GPUs (A10G) at mfu 0.5 with 1.4T tokens", NONE))
    assert call == PlannedCall(
        "training_time", {"params": "13B", "num_gpus": 256, "tokens": "1.4T", "gpu": "a10", "mfu": 0.5}
    )
    assumed = only(recognise_training_time("days to train 7B on 64 gpus", NONE))
    assert assumed.arguments == {"params": "7B", "num_gpus": 64, "tokens": "140000000000", "gpu": "a100"}
    assert assumed.assumed == ("tokens: 20 per parameter (Chinchilla)", "gpu: A100 (bf16 dense peak)")
    assert recognise_training_time("how long does it take on 512 gpus", NONE) is None  # no size anywhere
    assert recognise_training_time("how long to train a 70B model", NONE) is None  # no GPUs


def test_scaling_law_loss() -> None:
    call = only(recognise_scaling_law_loss("kaplan loss for 13B on 300B tokens", NONE))
    assert call.arguments == {"params": "13B", "tokens": "300B", "law": "kaplan"}
    assert only(recognise_scaling_law_loss("expected loss of 70B, 1.4T tokens, in memory?", NONE)).arguments == {
        "params": "70B",
        "tokens": "1.4T",
    }
    assert recognise_scaling_law_loss("loss of 7B on 2T tokens: how much memory?", NONE) is None
    assert recognise_scaling_law_loss("loss of a 7B model", NONE) is None  # no token count


def test_chinchilla_optimal() -> None:
    assert only(recognise_chinchilla_optimal("chinchilla optimal tokens for 7B", NONE)).arguments == {"params": "7B"}
    assert only(recognise_chinchilla_optimal("optimal model for 1.4T tokens", NONE)).arguments == {"tokens": "1.4T"}
    budget = only(recognise_chinchilla_optimal("budget of 5.76 x 10^23 flops", NONE))
    assert budget.arguments == {"compute_flops": "5.76e23"}
    assert recognise_chinchilla_optimal("optimal memory for 7B", NONE) is None  # a memory question
    assert recognise_chinchilla_optimal("what is compute-optimal training", NONE) is None  # no number


def test_training_on_a_gpu_is_a_fit_and_a_kv_cache_holds_its_tokens() -> None:
    for question in ("will a 7B model train on one 24GB GPU?", "could I finetune a 13B model on one 80GB card?"):
        (call,) = plan_tools(question)
        assert call.name == "memory_fit" and call.arguments["workload"] == "training", question
    (kv,) = plan_tools("kv cache for 32 layers, 8 kv heads, head dim 128, 4096 tokens, fp16")
    assert kv.name == "kv_cache" and kv.arguments["seq_len"] == 4096
    (kilo,) = plan_tools("kv cache 40 layers 8 kv heads head dim 128 for 8k tokens")
    assert kilo.arguments["seq_len"] == 8192  # k is 1024 for a context, as "8k context" is


@pytest.mark.parametrize(
    "question",
    [
        "how big should my dataset be for a 10B model?",
        "how much training data does a 1B model need?",
        "dataset size for 3B?",
    ],
)
def test_the_data_a_model_should_see_is_a_chinchilla_question(question: str) -> None:
    # "how big" and "how much" usually ask for memory; about the training data, they ask for Chinchilla's tokens.
    (call,) = plan_tools(question)
    assert call.name == "chinchilla_optimal", call
    (memory,) = plan_tools("how many GB does training a 7B model on my dataset take?")
    assert memory.name == "training_memory"  # a unit of memory: the data is only where the training runs


def test_training_memory() -> None:
    call = only(recognise_training_memory("how much memory for 13 billion params with sgd with momentum", NONE))
    assert call.arguments == {"params": "13B", "optimizer": "sgd_momentum"}
    fp32 = only(recognise_training_memory("memory of 70B in pure fp32 with AdamW", NONE))
    assert fp32.arguments == {"params": "70B", "optimizer": "adamw", "weight_dtype": "fp32", "mixed_precision": False}
    assert recognise_training_memory("how much memory does training need", NONE) is None  # no size
    assert recognise_training_memory("a 13B model", NONE) is None  # no memory words
    # A size written in TB or MB names memory as GB does ("needs 1.12 TB, right?" was planned nothing).
    for unit in ("TB", "TiB", "MB"):
        call = only(recognise_training_memory(f"so training a 70B model with adam needs 1.12 {unit}, right?", NONE))
        assert call.arguments == {"params": "70B", "optimizer": "adam"}


@pytest.mark.parametrize("question", ["so 7b weights at 8 bits come to 7 GB?", "13B in int4 shrinks to 6.5 GB, right?"])
def test_what_a_size_comes_to_is_no_gpu(question: str) -> None:
    """ "come to 7 GB" is the size asked about, not a 7 GB GPU to fit it on: a quantized size, not a fit."""
    assert [call.name for call in plan_tools(question)] == ["quantized_size"]


# ---- every recogniser, against its own calculator --------------------------------------------------------

SAMPLES = {
    "loss_scaling": "gradient of 1e-8 in fp16 with loss scale 2^16",
    "number_format": "max of bf16",
    "pipeline_bubble": "4 stages, 8 micro-batches",
    "zero_memory": "zero-2 on 8 GPUs",
    "activation_memory": "activations for 8k context, hidden 8192, 64 heads",
    "kv_cache": "kv cache for 80 layers, 8 kv heads, head dim 128, 32k context",
    "parallel_layout": "8-way tensor on 64 GPUs: how many data parallel replicas?",
    "quantized_size": "int4 70B",
    "training_time": "how long to train a 70B model on 1024 H100s at 45% MFU?",
    "scaling_law_loss": "expected loss for a 70B model trained on 1.4T tokens",
    "chinchilla_optimal": "compute-optimal model for 1e24 flops",
    "training_memory": "how much memory does a 13B model need with Adam",
    "memory_fit": "will Adam training of a 6B model fit on one 48 GB card?",
    "compare_allocations": "13B on 500B tokens vs 40B on 150B tokens: which is better?",
}


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_each_recogniser_plans_calls_its_calculator_accepts(name: str) -> None:
    """A recogniser names its own calculator and builds arguments the calculator's model accepts."""
    calculator = REGISTRY[name]
    assert calculator.recognise is not None and calculator.title
    for call in calls(calculator.recognise(SAMPLES[name], NONE)):
        assert call.name == name
        assert set(call.arguments) <= set(calculator.args_model.model_fields)
        assert run_tool(call.name, call.arguments).name == name


def test_titles_come_from_the_registry() -> None:
    assert title_of("zero_memory") == "ZeRO memory per GPU"
    assert title_of("chinchilla_optimal") == "Chinchilla-optimal tokens and compute"
    assert title_of("no_such_tool") == "no_such_tool"
    assert len({c.title for c in REGISTRY.values()}) == len(REGISTRY)
