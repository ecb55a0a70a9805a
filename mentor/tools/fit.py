"""Will it fit, and on how many GPUs? Training's model state, or a model's weights at a precision, against G GPUs
of M GB each, or the fewest G that hold it.

A decision, not a new formula: training counts what `training_memory` counts (16 bytes/param for mixed-precision
Adam) and shards it as `zero_memory` does; inference counts what `quantized_size` counts. The verdict compares the
need per GPU with one GPU's memory, in exact arithmetic, GB = 10^9 bytes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import Decimal
from fractions import Fraction
from typing import Any

from pydantic import Field, field_validator, model_validator

from mentor.errors import InvalidInput
from mentor.tools import units
from mentor.tools.activations import ACTIVATION_MEMORY
from mentor.tools.calculator import Calculator, stems_of
from mentor.tools.memory import (
    KV_CACHE,
    OPTIMIZER,
    ZERO_SHARDED,
    ZERO_STAGE,
    ZERO_STAGES,
    normalise_optimizer,
    optimizer_parts,
    state_bytes_per_param,
    zero_shares,
)
from mentor.tools.parsing import Count, PositiveNumber, ToolArgs, choice_type, enum_count_type
from mentor.tools.quantization import GROUP, QUANT_WORDS, check_bits, weight_bits
from mentor.tools.result import ToolResult, normalised_arguments, to_number
from mentor.tools.wording import BITS, PlanContext, PlannedCall, Recognised, find_params, first

GB = 10**9
# Several GPUs and no stage named: ZeRO stage 3 (FSDP's full sharding), the only stage whose per-GPU share keeps
# falling as GPUs are added, so "would N GPUs do?" always has an answer.
DEFAULT_ZERO_STAGE = 3
TRAINING_DTYPE = "bf16"  # 16-bit weights and gradients with an fp32 master copy: the module's mixed precision
OPTIMIZER_LABELS = {"adam": "Adam", "adamw": "AdamW", "sgd": "SGD", "sgd_momentum": "SGD-with-momentum"}
PARTS = ("weights", "gradients", "optimizer")
SIGNIFICANT = 3  # figures of the largest model size stated ("46.5B", not "46,545,454,545")
PART_NAMES = {"weights": "weights", "gradients": "gradients", "optimizer": "optimizer state"}


class MemoryFitArgs(ToolArgs):
    params: Count | None = Field(description='Model parameters, e.g. "70B"; null = the largest model that fits.')
    gpu_memory_gb: PositiveNumber = Field(description="Memory of one GPU in GB (10^9 bytes), e.g. 80 for an H100 80GB.")
    num_gpus: Count | None = Field(
        1, description="GPUs available, each with gpu_memory_gb; null = the fewest GPUs that hold it (how many?)."
    )
    workload: choice_type("training", "inference") = Field(  # type: ignore[valid-type]
        "training",
        description="training: mixed-precision model state (16 bytes/param with Adam); inference: the weights alone.",
    )
    zero_stage: enum_count_type(0, 1, 2, 3) | None = Field(  # type: ignore[valid-type]
        None, description="Training only: the ZeRO stage sharding the model state over the GPUs; null = stage 3."
    )
    optimizer: choice_type("adam", "adamw", "sgd", "sgd_momentum") | None = Field(  # type: ignore[valid-type]
        None, description="Training only: the optimizer, its moments in fp32; null = adam."
    )
    bits: Count | None = Field(
        None, description="Inference only: bits per weight (16 for fp16/bf16, 8 or 4 when quantized); null = 16."
    )
    group_size: Count | None = Field(
        None, description="Inference only: weights sharing one fp16 scale (e.g. 128); null = no scales counted."
    )

    @field_validator("bits")
    @classmethod
    def _known_width(cls, bits: int | None) -> int | None:
        return None if bits is None else check_bits(bits)

    @model_validator(mode="after")
    def _fits_the_workload(self) -> MemoryFitArgs:
        if self.params is None and self.num_gpus is None:
            raise ValueError("params and num_gpus: give at least one (null asks for it, and only one can be asked)")
        if self.workload == "training":
            for name in ("bits", "group_size"):
                if getattr(self, name) is not None:
                    raise ValueError(
                        f"{name}: applies to inference only; training counts 16-bit weights and gradients "
                        "with fp32 optimizer state"
                    )
        else:
            for name in ("zero_stage", "optimizer"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name}: applies to training only; inference counts the weights alone")
        return self


def _gb(value: Fraction | int) -> str:
    """A byte count in GB alone ("96 GB", "≈37.33 GB"), for the verdict sentence."""
    return f"{units.number(Fraction(value) / GB)} GB"


def _min_gpus(replicated: Fraction, sharded: Fraction, capacity: Fraction) -> int | None:
    """The fewest GPUs of `capacity` bytes holding `replicated` on each plus a 1/G share of `sharded`; None: none do."""
    if sharded == 0:
        return 1 if replicated <= capacity else None
    if replicated >= capacity:
        return None
    return max(1, math.ceil(sharded / (capacity - replicated)))


def _plan_training(args: MemoryFitArgs) -> dict[str, Any]:
    """Model state in total and per GPU, sharded by ZeRO when there are several GPUs."""
    optimizer = args.optimizer or "adam"
    weight_bytes, optimizer_bytes, master_copy = state_bytes_per_param(TRAINING_DTYPE, optimizer, True)
    per_param = {"weights": weight_bytes, "gradients": weight_bytes, "optimizer": optimizer_bytes}
    part_bytes = {part: Fraction(args.params * per_param[part]) for part in PARTS}
    total = sum(part_bytes.values(), Fraction(0))
    g = args.num_gpus
    # One GPU holds everything whatever the stage; a stage is used (3 unless named) as soon as there are several,
    # and for "how many GPUs would it take" when there is one.
    stage = args.zero_stage if args.zero_stage is not None else DEFAULT_ZERO_STAGE
    shares = dict(zip(PARTS, zero_shares(stage, g), strict=True))
    per_gpu = sum((part_bytes[part] / shares[part] for part in PARTS), Fraction(0))
    replicated = sum((part_bytes[p] for p in PARTS if p not in ZERO_SHARDED[stage]), Fraction(0))
    label = OPTIMIZER_LABELS[optimizer]
    bytes_per_param = 2 * weight_bytes + optimizer_bytes
    state = (
        f"Model state = {units.count(args.params)} params × {bytes_per_param} bytes/param "
        f"({TRAINING_DTYPE} weights {weight_bytes} + gradients {weight_bytes} + optimizer state {optimizer_bytes}: "
        f"{optimizer_parts(optimizer, master_copy)}) = {units.nbytes(total)}"
    )
    if g == 1:
        zero_stage = args.zero_stage
        sharding = "none: one GPU holds all the model state"
        need = f"needs {_gb(total)} of model state"
    else:
        zero_stage = stage
        named = "" if args.zero_stage is not None else "; assumed, as no stage was named"
        sharding = f"ZeRO stage {stage} over {g} GPUs: {ZERO_STAGES[stage]}"
        terms = " + ".join(
            f"{PART_NAMES[p]} {_gb(part_bytes[p])}" + (f" / {g}" if shares[p] > 1 else "") for p in PARTS
        )
        state += (
            f"; ZeRO stage {stage} ({ZERO_STAGES[stage]}{named}) over {g} GPUs: per GPU = {terms} "
            f"= {units.nbytes(per_gpu)}"
        )
        need = f"needs {_gb(per_gpu)} per GPU with ZeRO stage {stage} over {g} GPUs"
    return {
        "subject": f"{label} mixed-precision training of a {units.count(args.params)} model",
        "need": need,
        "figures": state,
        "what": "the model state",
        "total": total,
        "per_gpu": per_gpu,
        "replicated": replicated,
        "sharded": total - replicated,
        "zero_stage": zero_stage,
        "stage": stage,
        "sharding": sharding,
        "bytes_per_param": Fraction(bytes_per_param),
        "normalised": {"optimizer": optimizer, "zero_stage": zero_stage},
        "left_out": "activations (they grow with batch size and sequence length), temporary buffers and "
        "memory fragmentation",
    }


def _plan_inference(args: MemoryFitArgs) -> dict[str, Any]:
    """The weights at `bits`, split evenly over the GPUs (tensor or pipeline parallel)."""
    bits = args.bits or 16
    bits_per_weight, per_weight = weight_bits(bits, args.group_size)
    total = args.params * bits_per_weight / 8
    g = args.num_gpus
    per_gpu = total / g
    precision = f"{bits}-bit" + (f" with groups of {args.group_size}" if args.group_size else "")
    figures = (
        f"{per_weight[0].upper()}{per_weight[1:]}; weights = {units.count(args.params)} params "
        f"× {units.number(bits_per_weight)} bits / 8 = {units.nbytes(total)}"
    )
    if g == 1:
        sharding = "none: one GPU holds all the weights"
        need = f"take {_gb(total)}"
    else:
        sharding = f"weights split evenly over {g} GPUs (tensor or pipeline parallel)"
        figures += f"; split evenly over {g} GPUs (tensor or pipeline parallel): per GPU = {units.nbytes(per_gpu)}"
        need = f"take {_gb(per_gpu)} per GPU split over {g} GPUs"
    return {
        "subject": f"the weights of a {units.count(args.params)} model in {precision}",
        "need": need,
        "figures": figures,
        "what": "the weights",
        "total": total,
        "per_gpu": per_gpu,
        "replicated": Fraction(0),
        "sharded": total,
        "zero_stage": None,
        "stage": None,
        "sharding": sharding,
        "bytes_per_param": bits_per_weight / 8,
        "normalised": {"bits": bits},
        "left_out": "the KV cache (it grows with batch size and context length), activations, temporary buffers, "
        "memory fragmentation and the serving framework's own overhead",
    }


def _round_down(count: int) -> int:
    """`count` rounded down to `SIGNIFICANT` significant figures: a size that still fits, written as one is said."""
    step = 10 ** max(0, len(str(count)) - SIGNIFICANT)
    return count // step * step


def _plan(args: MemoryFitArgs) -> dict[str, Any]:
    return _plan_training(args) if args.workload == "training" else _plan_inference(args)


def memory_fit(args: MemoryFitArgs) -> ToolResult:
    """Decide whether training a model, or serving its weights, fits on num_gpus GPUs of gpu_memory_gb each.

    Training: mixed-precision model state as training_memory counts it (16 bytes/param with Adam), sharded as
    zero_memory does, with ZeRO stage 3 when num_gpus > 1 and no zero_stage is given. Inference: the weights at
    `bits` as quantized_size counts them, split evenly over the GPUs. GB = 10^9 bytes. The verdict is "yes" when
    the need per GPU is at most one GPU's memory. Activations, the KV cache, temporary buffers and fragmentation
    are not counted, so a "yes" with little headroom is a tight fit. With num_gpus null the question is how many:
    the decision is taken on the fewest GPUs that hold it (ZeRO stage 3 unless another stage is given), or on one
    GPU when no number of them does. With params null it is how big: the largest model that fits, rounded down to
    three significant figures.
    """
    capacity = args.gpu_memory_gb * GB
    asked = args
    if args.num_gpus is None:
        one = _plan(args.model_copy(update={"num_gpus": 1}))
        fewest = _min_gpus(one["replicated"], one["sharded"], capacity)
        args = args.model_copy(update={"num_gpus": fewest or 1})
    rounded = False
    if args.params is None:
        # The need per GPU grows in proportion to the model: what one parameter needs says how many fit.
        exact = math.floor(capacity / _plan(args.model_copy(update={"params": 1}))["per_gpu"])
        if exact < 1:
            raise InvalidInput(f"gpu_memory_gb: {units.number(args.gpu_memory_gb)} GB holds less than one parameter")
        largest = _round_down(exact)
        rounded = largest != exact
        args = args.model_copy(update={"params": largest})
    plan = _plan(args)
    g = args.num_gpus
    per_gpu: Fraction = plan["per_gpu"]
    fits = per_gpu <= capacity
    headroom = capacity - per_gpu if fits else Fraction(0)
    shortfall = Fraction(0) if fits else per_gpu - capacity
    min_gpus = _min_gpus(plan["replicated"], plan["sharded"], capacity)
    per = " per GPU" if g > 1 else ""
    holds = f"one {_gb(capacity)} GPU holds {_gb(capacity)}" if g == 1 else f"each GPU holds {_gb(capacity)}"
    if fits:
        share = units.plain(headroom / capacity * 100)
        outcome = f"{_gb(headroom)} ({share}% of a GPU) to spare{per}"
    else:
        outcome = f"{_gb(shortfall)} short{per}"
    opening = "Yes" if fits else "No"
    if asked.num_gpus is None and fits:
        opening = f"The fewest is {g} GPU{'s' if g > 1 else ''} of {_gb(capacity)}"
    elif asked.params is None:
        opening = f"The largest is {units.count(args.params)} parameters"
        opening += f" (rounded down to {SIGNIFICANT} significant figures)" if rounded else ""
    verdict = f"{opening}: {plan['subject']} {plan['need']}, and {holds}: {outcome}."
    available = (
        f"available = {_gb(capacity)} per GPU × {g} GPUs = {units.nbytes(capacity * g)}"
        if g > 1
        else f"available = {units.nbytes(capacity)}"
    )
    figures = f"{plan['figures']}; {available}, with GB = 10^9 bytes."
    if fits:
        advice = ""
    elif min_gpus is not None:
        stage = f" with ZeRO stage {plan['stage']}" if plan["stage"] is not None else " (weights split evenly)"
        advice = f" It would take at least {min_gpus} GPUs of {_gb(capacity)}{stage} to hold {plan['what']} alone."
    else:
        advice = (
            f" No number of {_gb(capacity)} GPUs holds it at ZeRO stage {plan['stage']}: the part every GPU keeps "
            f"whole ({_gb(plan['replicated'])}) does not fit one GPU; a higher stage or model parallelism is needed."
        )
    higher = "higher: a yes with little headroom is a tight fit" if fits else "higher still"
    caveat = f" Not counted: {plan['left_out']}, so the real need is {higher}."
    explanation = verdict + " " + figures + advice + caveat
    return ToolResult(
        name="memory_fit",
        arguments=normalised_arguments(asked, **plan["normalised"]),
        result={
            "verdict": "yes" if fits else "no",
            "workload": args.workload,
            "params": to_number(args.params, name="params"),
            "num_gpus": to_number(g, name="num_gpus"),
            "total_bytes": to_number(plan["total"], name="total_bytes"),
            "per_gpu_bytes": to_number(per_gpu, name="per_gpu_bytes"),
            "available_per_gpu_bytes": to_number(capacity, name="available_per_gpu_bytes"),
            "available_total_bytes": to_number(capacity * g, name="available_total_bytes"),
            "headroom_per_gpu_bytes": to_number(headroom, name="headroom_per_gpu_bytes"),
            "shortfall_per_gpu_bytes": to_number(shortfall, name="shortfall_per_gpu_bytes"),
            "bytes_per_param": to_number(plan["bytes_per_param"], name="bytes_per_param"),
            "zero_stage": plan["zero_stage"],
            "sharding": plan["sharding"],
            "min_gpus": None if min_gpus is None else to_number(min_gpus, name="min_gpus"),
        },
        explanation=units.tidy(explanation),
    )


# ---- how learners ask --------------------------------------------------------------------------------------

# A decision asked about: "will it fit", "can I train", "is 80 GB enough", "would 8 A100s hold it", "will a 7B
# model run on it", "do I need more GPUs". A size asked about ("how much memory does a 7B model need") is not one.
FIT_WORDS = re.compile(
    r"\b(fits?|fitting|enough|suffic\w*|hold|holds|can (?:i|we|you|it|one)|could (?:i|we|you|it)|is it possible|"
    r"possible to|will (?:it|this|that)|would (?:it|this|that)|need (?:more|fewer|extra|additional|another)|"
    r"(?:will|would|can|could)(?:\s+[\w.×-]+){1,4}?\s+(?:run|work|load|serve|handle|cope|train(?:ed)?"
    r"|fine[\s-]*tun\w*|finetun\w*)\b)",
    re.I,
)
TRAINING_WORDS = re.compile(
    r"\b(train\w*|fine[\s-]*tun\w*|finetun\w*|pre[\s-]*train\w*|adam\w*|sgd|optimi[sz]er|zero|fsdp|gradients?)\b",
    re.I,
)
INFERENCE_WORDS = re.compile(
    r"\b(serv(?:e|ing)|inference|infer|run(?:ning)?|load(?:ing)?|host(?:ing)?|deploy\w*|generat\w*)\b", re.I
)
# Consumer cards go by their number alone ("a 4090"); a count never reads as one ("4090 GPUs" is a 4090).
CONSUMER = r"(?:20[6-8]0|30[5-9]0|40[6-9]0|50[6-9]0)(?:\s*ti)?"
GPU_NAME = (
    r"(?:a100|h100|h200|h800|a800|v100|b200|gb200|a10g?|a30|a40|t4|l4|l40s?|a[4-6]000|rtx\s*a?\d{4}(?:\s*ti)?|"
    rf"(?:geforce\s*)?{CONSUMER}|mi\d{{3}}x?)"
)
CARD = r"(?:gpus?|cards?|devices?|accelerators?)"
# A count in digits or in these words; numbers written in words reach the recognisers in digits, but for one alone,
# a pronoun as often (`mentor.understanding.numerals`). The longer words first, spaces as any gap.
NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "single": 1, "both": 2, "pair of": 2, "couple of": 2}
WORD_COUNT = "|".join(
    word.replace(" ", r"[\s-]*") for word in sorted(NUMBER_WORDS, key=lambda word: (-len(word), word))
)
COUNT = rf"((?!{CONSUMER}\b)\d{{1,5}}|(?:{WORD_COUNT})\b)"
# A gigabyte as learners write it: "80GB", "80 GiB" (converted exactly), "80 gigs" (decimal, as card makers count).
GB_UNIT = r"(gb|gib|gigs?)"
# One GPU's memory, where the wording ties it to a GPU, in this preference: "48 GB card", "24GB of VRAM",
# "H100 80GB", "A6000s (48GB)", and "on 4 x 80GB" or "a 4090 with 24GB". A bare "needs 96 GB" is a need, not a GPU,
# and so is what a size comes to ("7B weights at 8 bits come to 7 GB").
MEMORY_THEN_CARD = re.compile(
    rf"(?<![\w.])(\d+(?:\.\d+)?)\s*{GB_UNIT}\b\s*(?:(?:of\s*)?(?:vram|hbm\w*|memory)\s*)?"
    rf"(?:each|per\s*{CARD}|(?:nvidia\s*)?{GPU_NAME}s?\b|{CARD}\b)",
    re.I,
)
VRAM = re.compile(rf"(?<![\w.])(\d+(?:\.\d+)?)\s*{GB_UNIT}\b\s*(?:of\s*)?(?:vram|hbm\w*)\b", re.I)
NAME_THEN_MEMORY = re.compile(
    rf"\b{GPU_NAME}s?(?:[\s-]*(?:sxm\d?|pcie|nvl))?[\s-]*\(?(\d+(?:\.\d+)?)\s*{GB_UNIT}\b", re.I
)
ON_MEMORY = re.compile(
    rf"\b(?:on|in|into|within|across|with|over)\s+(?:(?:a\s+single|each|{WORD_COUNT}|\d{{1,5}})\s*"
    rf"(?:[x×*]\s*)?)?(?<![\d.])(\d+(?:\.\d+)?)\s*{GB_UNIT}\b",
    re.I,
)
GPU_MEMORY = (MEMORY_THEN_CARD, VRAM, NAME_THEN_MEMORY, ON_MEMORY)
# How many GPUs: "4×H100", "8 A100 40GB", "two 48GB cards", "a 24 GB GPU", "on 4 GPUs", "4 x 80GB", "8x80GB".
GPU_COUNT = re.compile(
    rf"(?<![\w.]){COUNT}\s*(?:[x×*]\s*)?"
    rf"(?:(?:nvidia\s*)?{GPU_NAME}s?\b|(?<![\d.])\d+(?:\.\d+)?\s*gi?b\s*(?:{GPU_NAME}s?\b|{CARD}\b)|{CARD}\b)"
    rf"|(?<![\w.])(\d{{1,5}})\s*[x×*]\s*(?<![\d.])\d+(?:\.\d+)?\s*gi?b\b",
    re.I,
)
# "on four of them", "two of those cards": the GPUs actually used, so read before any other count.
OF_THEM = re.compile(rf"(?<![\w.]){COUNT}\s+of\s+(?:them|those|these|the\s+{CARD}|(?:my|our)\s+{CARD})\b", re.I)
# A follow-up that changes the GPUs, the model or the precision of an earlier fit question: "what about on four
# of them?", "and with 40GB cards?", "how about a 70B model?". A new calculation ("and how long would it take on
# 8 of them?") is not one.
FOLLOW_UP = re.compile(
    r"^\W*(?:(?:so|ok(?:ay)?|but|then|now)\b\W*)*(?:and\b\W*)?"
    r"(?:(?:what|how)\s+about|(?:what\s+)?if|(?:on|with|using|across|over|for|in|to)\b)"
    r"|^\W*(?:(?:so|ok(?:ay)?|but|then|now)\b\W*)*and\s+(?:an?|just|only)\s"
    r"|\binstead\W*$",
    re.I,
)
# The bare count a follow-up may end on, written in words ("what about with two?", read in digits; "what about 40?"
# as written could be GB).
BARE_COUNT = re.compile(
    rf"^\W*(?:and\s+)?(?:what|how)\s+about\s+(?:(?:on|with|using|across|over)\s+)?(?:(?:just|only)\s+)?"
    rf"(\d{{1,5}}|{WORD_COUNT})\W*$",
    re.I,
)
NEW_QUESTION = re.compile(
    r"\b(how\s+(?:much|many|long|big|fast)|what\s+(?:is|are|does)|days?|hours?|weeks?|months?|tokens?|loss|"
    r"flops?|mfu|throughput|latency|bubble|kv)\b",
    re.I,
)
# A time question names GPUs too ("how long on 1024 H100 80GB?", "would it take 30 days?"): not a fit unless the
# fit is named as well.
TIME_WORDS = re.compile(r"\b(how\s+long|days?|hours?|weeks?|months?|mfu|wall[\s-]*clock|training\s+time)\b", re.I)
NAMED_FIT = re.compile(r"\b(fits?|enough|suffic\w*|hold|holds|memory|vram)\b", re.I)
FSDP = re.compile(r"\bfsdp\b", re.I)
SIXTEEN_BIT = re.compile(r"\b(fp16|bf16|half[\s-]*precision)\b", re.I)
FP8 = re.compile(r"\bfp8\b", re.I)
GIB_IN_GB = Decimal("1.073741824")  # 2^30 / 10^9, exactly
CALCULATION = "calculation"  # the kind of answer (mentor.understanding.reading.KINDS) of a question asking for a figure
UNCOUNTED = (ACTIVATION_MEMORY, KV_CACHE)  # memory a fit does not count: a question about it is theirs


def _gpu_memory(text: str) -> str | None:
    """One GPU's memory in GB as the calculator takes it ("80"); GiB are converted exactly."""
    for pattern in GPU_MEMORY:
        match = pattern.search(text)
        if match:
            number, unit = match.group(1), match.group(2).lower()
            return str((Decimal(number) * GIB_IN_GB).normalize()) if unit == "gib" else number
    return None


def _gpu_count(text: str, *, follow_up: bool = False, written: str = "") -> int | None:
    """The number of GPUs named in `text`, if any: "4×H100" is 4, "a 24 GB GPU" is 1, "4 of them" 4, and in a
    follow-up the learner `written` in words, "what about two?" 2."""
    match = OF_THEM.search(text) or GPU_COUNT.search(text) or (BARE_COUNT.search(text) if follow_up else None)
    if match is None:
        return None
    word = next(group for group in match.groups() if group).lower()
    if match.re is BARE_COUNT and word.isdigit() and (not written or re.search(r"\d", written)):
        return None  # typed as digits, a bare number could be GB
    return int(word) if word.isdigit() else NUMBER_WORDS[re.sub(r"[\s-]+", " ", word)]


def _bits(text: str) -> int | None:
    """The weight width named: "int4", "8-bit", "fp16" (16), "fp8" (8)."""
    if bits := first(BITS, text):
        return int(bits)
    if SIXTEEN_BIT.search(text):
        return 16
    if FP8.search(text):
        return 8
    return None


def _workload(text: str) -> str | None:
    """Training or inference, as the wording says; None when it says neither."""
    if TRAINING_WORDS.search(text):
        return "training"
    if INFERENCE_WORDS.search(text) or QUANT_WORDS.search(text) or _bits(text) is not None:
        return "inference"
    return None


def _followed_fit(text: str, context: PlanContext) -> PlannedCall | None:
    """The earlier fit question's call, when `text` is a follow-up to it that changes what a fit reads: "what about on
    four of them?"."""
    if not context.earlier or not FOLLOW_UP.search(text) or NEW_QUESTION.search(text):
        return None
    changed = (
        _gpu_count(text, follow_up=True, written=context.written) is not None
        or _gpu_memory(text) is not None
        or find_params(text) is not None
        or first(ZERO_STAGE, text) is not None
        or _bits(text) is not None
    )
    earlier = recognise_memory_fit(context.earlier, PlanContext()) if changed else None
    return earlier if isinstance(earlier, PlannedCall) else None


def recognise_memory_fit(text: str, context: PlanContext) -> Recognised:
    """A fit question with a model size and one GPU's memory: "will a 6B model fit on one 48 GB card?".

    Without a GPU memory in the question or earlier in the conversation there is nothing to compare with ("4×H100"
    alone does not say 80 GB or 94 GB), so the question is left to the other recognisers. A follow-up to a fit
    question ("what about on four of them?") keeps what it does not change from the earlier question. A question
    that leaves the model size or the GPU count out may ask for it (`_asked_for`).
    """
    if TIME_WORDS.search(text) and not NAMED_FIT.search(text):
        return None
    follow_up = not FIT_WORDS.search(text)
    earlier = _followed_fit(text, context) if follow_up else None
    if follow_up and earlier is None:
        return _asked_for(text, context)
    params, assumed = context.params_or_assume(text, allow_example=False)
    if not params:
        return _asked_for(text, context)
    memory, gpus = _gpu_memory(text), _gpu_count(text, follow_up=follow_up, written=context.written)
    if memory is None or follow_up:
        # The GPUs of an earlier question ("and will a 13B model fit?"): their memory, and their count unless named.
        if memory is None:
            memory = _gpu_memory(context.earlier)
            if memory is None:
                return None
            assumed = (*assumed, f"gpu_memory_gb {memory} from earlier in this conversation")
        if gpus is None and (gpus := _gpu_count(context.earlier)) is not None:
            assumed = (*assumed, f"num_gpus {gpus} from earlier in this conversation")
    arguments: dict[str, Any] = {"params": params, "gpu_memory_gb": memory}
    if gpus is None and earlier is not None and earlier.arguments["num_gpus"] is None:
        # The earlier question asked how many: a follow-up changing its model or GPUs ("and with 40GB cards?") too.
        assumed = (*assumed, "num_gpus: the fewest, as the earlier question asked how many")
    elif gpus is None:
        gpus = 1
        assumed = (*assumed, "num_gpus: 1, as no GPU count was named")
    arguments["num_gpus"] = gpus
    workload = _workload(text)
    reads_earlier = follow_up
    if workload is None and (workload := _workload(context.earlier)) is not None:
        assumed = (*assumed, f"workload {workload} from earlier in this conversation")
        reads_earlier = True
    if reads_earlier:  # the earlier bits, stage and optimizer too, after any named here
        text = f"{text} {context.earlier}"
    if workload is None:
        workload = "training"
        assumed = (*assumed, "workload: training, as the question names neither training nor inference")
    arguments["workload"] = workload
    return PlannedCall("memory_fit", arguments | _workload_arguments(text, workload), assumed)


def _asked_for(text: str, context: PlanContext) -> Recognised:
    """The fit's unknown, where the question names one GPU's memory and training or serving but leaves one of the
    fit's quantities out: the fewest GPUs when it names a model size and no count ("how many 80GB GPUs to train a
    70B model?", `num_gpus` null), the largest model when it asks for a figure and names no model size ("what's the
    biggest model I can fine-tune on an 80GB GPU?", `params` null; a question read as explaining, "how does ZeRO
    help on 80GB GPUs?", computes nothing). A question about a memory the fit does not count (activations, the KV
    cache) names GPUs too: its own calculator answers it."""
    memory, workload = _gpu_memory(text), _workload(text)
    if memory is None or workload is None or _about_uncounted(text, context):
        return None
    params, assumed = context.params_or_assume(text, allow_example=False)
    gpus = _gpu_count(text)
    if params and gpus is None:
        arguments = {"params": params, "gpu_memory_gb": memory, "num_gpus": None, "workload": workload}
    elif not params and context.kind == CALCULATION:
        if gpus is None:
            gpus = 1
            assumed = (*assumed, "num_gpus: 1, as no GPU count was named")
        arguments = {"params": None, "gpu_memory_gb": memory, "num_gpus": gpus, "workload": workload}
    else:
        return None
    return PlannedCall("memory_fit", arguments | _workload_arguments(text, workload), assumed)


def _about_uncounted(text: str, context: PlanContext) -> bool:
    """True when the question is about a memory the fit does not count: its calculator recognises the question, or
    the question names what that calculator's title names beyond the fit's own ("activation", "KV cache")."""
    named = stems_of(text)
    own = MEMORY_FIT.title_words
    return any(
        (c.recognise is not None and c.recognise(text, context) is not None) or bool(named & (c.title_words - own))
        for c in UNCOUNTED
    )


def _workload_arguments(text: str, workload: str) -> dict[str, Any]:
    """What `text` says of the workload: the ZeRO stage and optimizer of training, the width and groups of serving."""
    arguments: dict[str, Any] = {}
    if workload == "training":
        if stage := first(ZERO_STAGE, text):
            arguments["zero_stage"] = int(stage)
        elif FSDP.search(text):
            arguments["zero_stage"] = 3
        if optimizer := first(OPTIMIZER, text):
            arguments["optimizer"] = normalise_optimizer(optimizer)
    else:
        if (bits := _bits(text)) is not None:
            arguments["bits"] = bits
        if group := first(GROUP, text):
            arguments["group_size"] = int(group)
    return arguments


def counted(result: Mapping[str, Any]) -> str:
    """The calculator counting what a fit decision compared: the weights when serving, the model state when
    training, sharded by ZeRO over several GPUs."""
    if result.get("workload") == "inference":
        return "quantized_size"
    return "zero_memory" if result.get("zero_stage") else "training_memory"


MEMORY_FIT = Calculator.from_function(memory_fit, title="Memory fit", recognise=recognise_memory_fit, applies=counted)
