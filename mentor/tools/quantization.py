"""Size of a weight-quantized model, counting the per-group scales and zero points."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from pydantic import Field, field_validator

from mentor.tools import units
from mentor.tools.calculator import Calculator
from mentor.tools.memory import optimizer_widths
from mentor.tools.parsing import Count, ToolArgs, count_type
from mentor.tools.result import ToolResult, normalised_arguments, to_number
from mentor.tools.wording import PlanContext, PlannedCall, Recognised, first, widths

# Integer widths used for weights in practice (1-bit/binary through int16), plus full 32-bit.
ALLOWED_BITS = (*range(1, 17), 32)


class QuantizedSizeArgs(ToolArgs):
    params: Count = Field(description='Number of weights, e.g. "70B".')
    bits: Count = Field(description="Bits per quantized weight: a whole number 1-16, or 32.")
    group_size: Count | None = Field(
        None, description="Weights sharing one scale (e.g. 128 for GPTQ/AWQ); null = no per-group overhead."
    )
    scale_bits: count_type(minimum=0, maximum=32) = Field(  # type: ignore[valid-type]
        16, description="Bits of each group's scale (16 for an fp16 scale)."
    )
    zero_point_bits: count_type(minimum=0, maximum=32) = Field(  # type: ignore[valid-type]
        0, description="Bits of each group's zero point (0 for symmetric quantization)."
    )

    @field_validator("bits")
    @classmethod
    def _known_width(cls, bits: int) -> int:
        return check_bits(bits)


def check_bits(bits: int) -> int:
    """Refuse a weight width no format uses (shared with the memory-fit decision)."""
    if bits not in ALLOWED_BITS:
        raise ValueError(f"must be a whole number from 1 to 16, or 32 (got {bits})")
    return bits


def weight_bits(
    bits: int, group_size: int | None, scale_bits: int = 16, zero_point_bits: int = 0
) -> tuple[Fraction, str]:
    """Bits stored per weight, counting per-group scales and zero points, and the sum in words."""
    if group_size is None:
        return Fraction(bits), f"bits per weight = {bits} (no per-group scales counted)"
    overhead = scale_bits + zero_point_bits
    bits_per_weight = bits + Fraction(overhead, group_size)
    return bits_per_weight, (
        f"bits per weight = {bits} + ({scale_bits} scale + {zero_point_bits} zero-point bits) "
        f"/ {group_size} weights per group = {units.number(bits_per_weight)}"
    )


def quantized_size(args: QuantizedSizeArgs) -> ToolResult:
    """Compute a quantized model's size: bits per weight = bits + (scale_bits + zero_point_bits) / group_size.

    Without group_size only the weights are counted (a per-tensor scale is negligible), so bits per weight
    is exactly `bits`. Size is params × bits_per_weight / 8 bytes; GB = 10^9 bytes.
    """
    bits_per_weight, per_weight = weight_bits(args.bits, args.group_size, args.scale_bits, args.zero_point_bits)
    total = args.params * bits_per_weight / 8
    explanation = (
        f"{per_weight}; size = {units.count(args.params)} params × {units.number(bits_per_weight)} bits / 8 "
        f"= {units.nbytes(total)}."
    )
    return ToolResult(
        name="quantized_size",
        arguments=normalised_arguments(args),
        result={
            "bits_per_weight": to_number(bits_per_weight, name="bits_per_weight"),
            "total_bytes": to_number(total, name="total_bytes"),
        },
        explanation=units.tidy(explanation),
    )


# ---- how learners ask --------------------------------------------------------------------------------------

QUANT_WORDS = re.compile(r"\b(int\d|quanti[sz]\w*|\d+[\s-]*bits?|gptq|awq|w\da\d+)\b", re.I)
GROUP = re.compile(r"group[\s-]*size\s*(?:of|=)?\s*(\d+)|\bgroups?\s+of\s+(\d+)|\bg(\d{2,4})\b", re.I)
# The calculator's other widths, by the word that names them: "scale" -> scale_bits, "zero" -> zero_point_bits.
OTHER_WIDTHS = {name.split("_")[0]: name for name in QuantizedSizeArgs.model_fields if name.endswith("_bits")}
MAX_WIDTHS = 3  # "13B in int4, int8 or fp16?": one size each


def recognise_quantized_size(text: str, context: PlanContext) -> Recognised:
    """A width and a model size (from this question or an earlier one): "int4 70B", "70B in 4-bit, group 128"; one
    call per width named ("13B in int4 vs int8?")."""
    if not QUANT_WORDS.search(text):
        return None
    widths, other_widths = widths_named(text)
    params, assumed = context.params_or_assume(text, allow_example=False)
    if not (widths and params):
        return None
    rest: dict[str, Any] = dict(other_widths)
    if group := first(GROUP, text):
        rest["group_size"] = int(group)
    calls = [
        PlannedCall("quantized_size", {"params": params, "bits": bits, **rest}, assumed) for bits in widths[:MAX_WIDTHS]
    ]
    return calls if len(calls) > 1 else calls[0]


def widths_named(text: str) -> tuple[list[int], dict[str, int]]:
    """The weight widths `text` names, in order, each once, and the calculator's other widths: a width followed by
    the name of another of its arguments is that argument's ("8-bit scales" is `scale_bits`), not the weights'; one
    written before an optimizer is the optimizer's ("8-bit Adam", a variant no calculator models), wherever it is
    named (the module's spelling of it too, "8-bit Adam ... (int8)")."""
    weights: dict[int, None] = {}
    others: dict[str, int] = {}
    optimizers = optimizer_widths(text)
    for width, after in widths(text):
        if width in optimizers:
            continue
        named = OTHER_WIDTHS.get(after.group(1).lower().removesuffix("s")) if after is not None else None
        if named is not None:
            others.setdefault(named, width)
        else:
            weights.setdefault(width, None)
    return list(weights), others


QUANTIZED_SIZE = Calculator.from_function(
    quantized_size, title="Quantized model size", recognise=recognise_quantized_size
)
