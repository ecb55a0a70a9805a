"""Memory of model state in training (one replica, or sharded by ZeRO) and of the KV cache in inference."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from pydantic import Field

from mentor.tools import units
from mentor.tools.calculator import Calculator
from mentor.tools.parsing import Count, PositiveNumber, ToolArgs, choice_type, enum_count_type, number_type
from mentor.tools.result import ToolResult, normalised_arguments, to_number
from mentor.tools.wording import (
    BATCH,
    GPUS,
    HEADS,
    LAYERS,
    MEMORY_WORDS,
    PlanContext,
    PlannedCall,
    Recognised,
    find_params,
    first,
    seq_len,
    widths,
)

DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}
# Mixed-precision training keeps an fp32 copy of the weights for the update (Micikevicius et al. 2018).
MASTER_COPY_BYTES = 4
# Optimizer moments are kept in fp32 in every mode: 16-bit moments lose the small updates they accumulate.
MOMENT_BYTES = {"adam": 8, "adamw": 8, "sgd": 0, "sgd_momentum": 4}
MOMENT_NAMES = {
    "adam": "Adam momentum + variance",
    "adamw": "AdamW momentum + variance",
    "sgd": "no SGD state",
    "sgd_momentum": "SGD momentum",
}


class TrainingMemoryArgs(ToolArgs):
    params: Count = Field(description='Number of model parameters, e.g. 7000000000 or "7B".')
    weight_dtype: choice_type("fp32", "fp16", "bf16") = Field(  # type: ignore[valid-type]
        "bf16", description="Data type of the weights and gradients used in forward/backward."
    )
    optimizer: choice_type("adam", "adamw", "sgd", "sgd_momentum") = Field(  # type: ignore[valid-type]
        "adam", description="Optimizer; its moments are counted in fp32."
    )
    mixed_precision: bool = Field(
        True,
        strict=True,
        description="Keep an fp32 master copy of 16-bit weights (no effect when weight_dtype is fp32).",
    )


def state_bytes_per_param(weight_dtype: str, optimizer: str, mixed_precision: bool) -> tuple[int, int, bool]:
    """Bytes per parameter of the weights (and as many of the gradients) and of the optimizer state.

    Also whether an fp32 master copy is kept (mixed precision with 16-bit weights). Shared by
    `training_memory` and the memory-fit decision, so both count the same 16 bytes for mixed-precision Adam.
    """
    weight_bytes = DTYPE_BYTES[weight_dtype]
    master_copy = mixed_precision and weight_dtype != "fp32"
    return weight_bytes, (MASTER_COPY_BYTES if master_copy else 0) + MOMENT_BYTES[optimizer], master_copy


def optimizer_parts(optimizer: str, master_copy: bool) -> str:
    """What the optimizer state holds, in words: "fp32 master copy 4 + Adam momentum + variance 8"."""
    parts = ([f"fp32 master copy {MASTER_COPY_BYTES}"] if master_copy else []) + [
        f"{MOMENT_NAMES[optimizer]} {MOMENT_BYTES[optimizer]}"
    ]
    return " + ".join(parts)


def training_memory(args: TrainingMemoryArgs) -> ToolResult:
    """Compute the memory (footprint) of weights, gradients and optimizer state for training a model on one replica.

    Mixed-precision Adam: 2 + 2 + 12 (fp32 master copy 4, momentum 4, variance 4) = 16 bytes/param; fp32
    Adam: 4 + 4 + 8. With fp32 weights there is no separate master copy, so mixed_precision has no effect.
    Activations, temporary buffers and fragmentation are not included.
    """
    weight_bytes, optimizer_bytes_per_param, master_copy = state_bytes_per_param(
        args.weight_dtype, args.optimizer, args.mixed_precision
    )
    bytes_per_param = 2 * weight_bytes + optimizer_bytes_per_param
    weights = args.params * weight_bytes
    optimizer = args.params * optimizer_bytes_per_param
    total = args.params * bytes_per_param

    n = f"{units.count(args.params)} params"
    explanation = (
        f"weights = {n} × {weight_bytes} bytes ({args.weight_dtype}) = {units.nbytes(weights)}; "
        f"gradients = {n} × {weight_bytes} bytes ({args.weight_dtype}) = {units.nbytes(weights)}; "
        f"optimizer state = {n} × {optimizer_bytes_per_param} bytes "
        f"({optimizer_parts(args.optimizer, master_copy)}) "
        f"= {units.nbytes(optimizer)}; "
        f"total = {n} × {bytes_per_param} bytes/param = {units.nbytes(total)}"
    )
    if args.weight_dtype == "fp32" and args.mixed_precision:
        explanation += " (fp32 weights are their own master copy, so mixed_precision adds nothing)"
    explanation += ". Activations and temporary buffers are not included."
    return ToolResult(
        name="training_memory",
        arguments=normalised_arguments(args, mixed_precision=master_copy),
        result={
            "weights_bytes": weights,
            "gradients_bytes": weights,
            "optimizer_bytes": optimizer,
            "total_bytes": total,
            "bytes_per_param": bytes_per_param,
        },
        explanation=units.tidy(explanation),
    )


ZERO_STAGES = {
    0: "plain data parallel, everything replicated",
    1: "optimizer state sharded",
    2: "optimizer state and gradients sharded",
    3: "optimizer state, gradients and weights sharded",
}


class ZeroMemoryArgs(ToolArgs):
    params: Count = Field(description='Number of model parameters (Ψ), e.g. "7.5B".')
    dp_degree: Count = Field(description="Data-parallel degree N_d: the number of GPUs the state is sharded over.")
    stage: enum_count_type(0, 1, 2, 3) = Field(  # type: ignore[valid-type]
        description="ZeRO stage: 0 (plain DP), 1 (optimizer state), 2 (+ gradients) or 3 (+ weights)."
    )
    weight_bytes: PositiveNumber = Field(2, description="Bytes per weight (2 for fp16/bf16).")
    gradient_bytes: PositiveNumber = Field(2, description="Bytes per gradient (2 for fp16/bf16).")
    optimizer_bytes_per_param: number_type(at_least=0) = Field(  # type: ignore[valid-type]
        12, description="Optimizer-state bytes per parameter, K (12 for mixed-precision Adam)."
    )


# What each ZeRO stage shards across the data-parallel GPUs; every other part is replicated on each GPU.
ZERO_SHARDED: dict[int, frozenset[str]] = {
    0: frozenset(),
    1: frozenset({"optimizer"}),
    2: frozenset({"optimizer", "gradients"}),
    3: frozenset({"optimizer", "gradients", "weights"}),
}


def zero_shares(stage: int, dp_degree: int) -> tuple[int, int, int]:
    """How many GPUs share the weights, the gradients and the optimizer state under ZeRO `stage` (1: replicated)."""
    sharded = ZERO_SHARDED[stage]
    share = {part: dp_degree if part in sharded else 1 for part in ("weights", "gradients", "optimizer")}
    return share["weights"], share["gradients"], share["optimizer"]


def zero_memory(args: ZeroMemoryArgs) -> ToolResult:
    """Compute per-GPU model-state memory under ZeRO stage 0-3 (Rajbhandari et al. 2020, Figure 1).

    Stage 1 shards the optimizer state over dp_degree GPUs, stage 2 also the gradients, stage 3 also the
    weights; shares are exact (real implementations pad partitions slightly). Results are bytes; the paper's
    GB are 10^9 bytes (7.5B params, 64 GPUs, stage 3: 16 × 7.5e9 / 64 = 1.875e9 bytes, printed 1.88 GB).
    Activations are not included.
    """
    psi, nd = args.params, args.dp_degree
    weights_share, gradients_share, optimizer_share = zero_shares(args.stage, nd)
    weights = Fraction(psi) * args.weight_bytes / weights_share
    gradients = Fraction(psi) * args.gradient_bytes / gradients_share
    optimizer = Fraction(psi) * args.optimizer_bytes_per_param / optimizer_share
    total = weights + gradients + optimizer

    def term(label: str, per_param: Fraction, share: int, value: Fraction) -> str:
        shard = f" / {share} GPUs" if share > 1 else ""
        return f"{label} = {units.count(psi)} × {units.number(per_param)} bytes{shard} = {units.nbytes(value)}"

    explanation = (
        f"ZeRO stage {args.stage} ({ZERO_STAGES[args.stage]}), per GPU with dp_degree {nd}: "
        f"{term('weights', args.weight_bytes, weights_share, weights)}; "
        f"{term('gradients', args.gradient_bytes, gradients_share, gradients)}; "
        f"{term('optimizer state', args.optimizer_bytes_per_param, optimizer_share, optimizer)}; "
        f"total = {units.nbytes(total)} per GPU (model state only; GB = 10^9 bytes)."
    )
    return ToolResult(
        name="zero_memory",
        arguments=normalised_arguments(args),
        result={
            "weights_bytes": to_number(weights, name="weights_bytes"),
            "gradients_bytes": to_number(gradients, name="gradients_bytes"),
            "optimizer_bytes": to_number(optimizer, name="optimizer_bytes"),
            "total_bytes": to_number(total, name="total_bytes"),
        },
        explanation=units.tidy(explanation),
    )


class KvCacheArgs(ToolArgs):
    layers: Count = Field(description="Number of transformer layers.")
    kv_heads: Count = Field(description="Key/value heads per layer (fewer than query heads with GQA/MQA).")
    head_dim: Count = Field(description="Dimension of each head.")
    seq_len: Count = Field(description='Tokens cached per sequence, e.g. 4096 or "32k".')
    batch: Count = Field(1, description="Number of sequences cached at once.")
    bytes_per_element: PositiveNumber = Field(2, description="Bytes per cached number (2 for fp16/bf16, 1 for fp8).")


def kv_cache(args: KvCacheArgs) -> ToolResult:
    """Compute the KV-cache size: 2 (K and V) × layers × kv_heads × head_dim × bytes, per token × tokens."""
    per_token = 2 * args.layers * args.kv_heads * args.head_dim * args.bytes_per_element
    total = per_token * args.seq_len * args.batch
    explanation = (
        f"per token = 2 (K and V) × {args.layers} layers × {args.kv_heads} KV heads "
        f"× {args.head_dim} head_dim "
        f"× {units.number(args.bytes_per_element)} bytes = {units.number(per_token)} bytes "
        f"= {units.nbytes(per_token)}; "
        f"total = {units.number(per_token)} bytes × {args.seq_len} tokens × batch {args.batch} "
        f"= {units.nbytes(total)}."
    )
    return ToolResult(
        name="kv_cache",
        arguments=normalised_arguments(args),
        result={
            "bytes_per_token": to_number(per_token, name="bytes_per_token"),
            "total_bytes": to_number(total, name="total_bytes"),
        },
        explanation=units.tidy(explanation),
    )


# ---- how learners ask --------------------------------------------------------------------------------------

ZERO_WORDS = re.compile(r"\bzero\b|\bzero-?\d|\bfsdp\b", re.I)
ZERO_STAGE = re.compile(r"\bzero[\s-]*(?:stage[\s-]*)?([0-3])\b|\bstage[\s-]*([0-3])\b", re.I)
DP = re.compile(r"\bdp\s*=?\s*(\d+)", re.I)
KV_WORDS = re.compile(r"\bkv[\s-]*cache\b", re.I)
KV_HEADS = re.compile(r"(?<![\w.])(\d+)\s*kv[\s-]*heads\b|\bkv[\s-]*heads\s*(?:=|:)?\s*(\d+)", re.I)
HEAD_DIM = re.compile(r"head[\s_-]*(?:dim(?:ension)?|size)\s*(?:of|=|:)?\s*(\d+)", re.I)
ONE_BYTE = re.compile(r"\b(fp8|int8|8[\s-]*bit)\b", re.I)
FP32 = re.compile(r"\bfp32\b", re.I)
OPTIMIZER = re.compile(r"\b(adamw|adam|sgd(?:\s*(?:with|\+)\s*momentum)?|momentum)\b", re.I)
PURE_FP32 = re.compile(r"\b(pure|full)\s*fp32\b|\bfp32 (?:training|weights)\b|\bwithout mixed precision\b", re.I)


def normalise_optimizer(name: str) -> str:
    """Map the learner's optimizer words onto the calculator's names."""
    key = name.lower()
    if "momentum" in key:
        return "sgd_momentum"
    return {"adamw": "adamw", "adam": "adam", "sgd": "sgd"}.get(key.split()[0], "adam")


def recognise_zero_memory(text: str, context: PlanContext) -> Recognised:
    """ZeRO or FSDP over a number of GPUs: "ZeRO-3 on 64 GPUs for 13B"; every stage when none is named."""
    dp = first(GPUS, text) or first(DP, text)
    if not (ZERO_WORDS.search(text) and dp):
        return None
    params, assumed = context.params_or_assume(text)
    stage = first(ZERO_STAGE, text)
    stages = [int(stage)] if stage else [0, 1, 2, 3]
    return [PlannedCall("zero_memory", {"params": params, "dp_degree": int(dp), "stage": s}, assumed) for s in stages]


# The tokens a KV cache holds, when no context or sequence is named: "4096 tokens", "8k tokens".
CACHED_TOKENS = re.compile(r"(?<![\w.])(\d+)(k?)\s*tokens?\b", re.I)


def cached_tokens(text: str) -> int | None:
    """The token count of a KV-cache question ("... head dim 128, 4096 tokens"; k is 1024, as for contexts)."""
    match = CACHED_TOKENS.search(text)
    return int(match.group(1)) * (1024 if match.group(2) else 1) if match else None


def recognise_kv_cache(text: str, context: PlanContext) -> Recognised:
    """A "KV cache" with layers, KV heads, head dim and sequence length; without them the question is claimed."""
    if not KV_WORDS.search(text):
        return None
    layers, head_dim, seq = first(LAYERS, text), first(HEAD_DIM, text), seq_len(text) or cached_tokens(text)
    kv_heads = first(KV_HEADS, text) or first(HEADS, text)
    if not (layers and head_dim and seq and kv_heads):
        return []  # a KV-cache question without its shapes: the LLM engine or the calc API can take it
    arguments = {"layers": int(layers), "kv_heads": int(kv_heads), "head_dim": int(head_dim), "seq_len": seq}
    if batch := first(BATCH, text):
        arguments["batch"] = int(batch)
    if ONE_BYTE.search(text):
        arguments["bytes_per_element"] = 1
    elif FP32.search(text):
        arguments["bytes_per_element"] = 4
    return PlannedCall("kv_cache", arguments)


def optimizer_widths(text: str) -> set[int]:
    """The widths `text` writes before an optimizer ("8-bit Adam"): its state kept at that width, a variant no
    calculator models."""
    return {width for width, after in widths(text) if after is not None and OPTIMIZER.match(text, after.start(1))}


def recognise_training_memory(text: str, context: PlanContext) -> Recognised:
    """A model size with memory words: "how much memory does a 13B model need with Adam?"."""
    params = find_params(text)
    if not (params and MEMORY_WORDS.search(text)):
        return None
    if optimizer_widths(text):
        return []  # "8-bit Adam": an optimizer whose state is kept at a width; its moments here are fp32
    arguments: dict[str, Any] = {"params": params}
    if optimizer := first(OPTIMIZER, text):
        arguments["optimizer"] = normalise_optimizer(optimizer)
    if PURE_FP32.search(text):
        arguments["weight_dtype"] = "fp32"
        arguments["mixed_precision"] = False
    return PlannedCall("training_memory", arguments)


TRAINING_MEMORY = Calculator.from_function(
    training_memory, title="Training memory", recognise=recognise_training_memory
)
ZERO_MEMORY = Calculator.from_function(zero_memory, title="ZeRO memory per GPU", recognise=recognise_zero_memory)
KV_CACHE = Calculator.from_function(kv_cache, title="KV cache", recognise=recognise_kv_cache)
