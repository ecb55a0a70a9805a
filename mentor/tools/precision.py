"""Mixed-precision facts: the limits of each float format, and what loss scaling does to a gradient."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from pydantic import Field

from mentor.tools import units
from mentor.tools.calculator import Calculator
from mentor.tools.formats import FORMATS, round_to_format
from mentor.tools.parsing import PositiveNumber, ToolArgs, choice_type, number_type
from mentor.tools.result import ToolResult, normalised_arguments, to_number
from mentor.tools.wording import PlanContext, PlannedCall, Recognised, eval_power, find_params, first

FormatName = choice_type(*FORMATS)


class NumberFormatArgs(ToolArgs):
    format: FormatName = Field(description="Float format: fp32, fp16, bf16, fp8_e4m3 or fp8_e5m2.")  # type: ignore[valid-type]


def number_format(args: NumberFormatArgs) -> ToolResult:
    """Give a float format's bit layout and exact limits: max, smallest normal and subnormal, epsilon.

    IEEE 754 for fp32/fp16 (and bf16, its truncated fp32); OCP FP8 for E4M3 (no infinities, max 448) and E5M2.
    Epsilon is the gap between 1 and the next representable number, 2^-mantissa_bits.
    """
    fmt = FORMATS[args.format]
    exact = {
        "max": fmt.max,
        "min_normal": fmt.min_normal,
        "min_subnormal": fmt.min_subnormal,
        "epsilon": fmt.epsilon,
    }
    # Every limit is a short binary fraction, so the float is exact, not a rounding of it.
    result: dict[str, int | float] = {
        "exponent_bits": fmt.exponent_bits,
        "mantissa_bits": fmt.mantissa_bits,
        **{key: float(value) for key, value in exact.items()},
    }
    top = fmt.max_exponent
    explanation = (
        f"{fmt.name} = {fmt.note}: 1 sign + {fmt.exponent_bits} exponent "
        f"+ {fmt.mantissa_bits} mantissa bits, "
        f"bias {fmt.bias}; max = (1 + {fmt.max_mantissa}/2^{fmt.mantissa_bits}) × 2^{top} "
        f"= {units.number(fmt.max)}; min normal = {units.power_of_two(fmt.min_exponent)}; "
        f"min subnormal = {units.power_of_two(fmt.min_exponent - fmt.mantissa_bits)}; "
        f"epsilon = {units.power_of_two(-fmt.mantissa_bits)}."
    )
    return ToolResult(
        name="number_format",
        arguments=normalised_arguments(args),
        result=result,
        explanation=units.tidy(explanation),
    )


class LossScalingArgs(ToolArgs):
    gradient: number_type() = Field(  # type: ignore[valid-type]
        description='A gradient value, e.g. 1e-8 or "1e-8" (any sign).'
    )
    scale: PositiveNumber = Field(65536, description="Loss scale S the loss (hence every gradient) is multiplied by.")
    format: FormatName = Field("fp16", description="Format the gradients are stored in.")  # type: ignore[valid-type]


def loss_scaling(args: LossScalingArgs) -> ToolResult:
    """Check whether a gradient under- or overflows a float format, with and without loss scaling by S.

    IEEE round-to-nearest-even with subnormals (no flush-to-zero): a nonzero value underflows when it rounds
    to 0, i.e. |g| ≤ min_subnormal/2 (the tie goes to the even 0); it overflows when it rounds past max
    (fp16: |g·S| ≥ 65520, max + half an ulp). max_unscaled_gradient = max/S, the largest gradient whose scaled
    value stays within max.
    """
    fmt = FORMATS[args.format]
    g, s = args.gradient, args.scale
    scaled = g * s
    underflows_unscaled = g != 0 and round_to_format(g, fmt) == 0
    underflows_scaled = scaled != 0 and round_to_format(scaled, fmt) == 0
    overflows_scaled = abs(round_to_format(scaled, fmt)) > fmt.max
    max_unscaled = fmt.max / s

    def fate(value: Fraction, underflows: bool, overflows: bool = False) -> str:
        if underflows:
            half = units.number(fmt.min_subnormal / 2)
            return f"rounds to 0 in {fmt.name}: underflow (|value| ≤ min_subnormal/2 = {half})"
        if overflows:
            return f"overflows {fmt.name} (max {units.number(fmt.max)})"
        if value == 0:
            return "is exactly 0"
        stored = units.number(round_to_format(value, fmt))
        if abs(value) < fmt.min_normal:
            normal = units.number(fmt.min_normal)
            return f"rounds to the subnormal {stored} (below min normal {normal}: precision lost)"
        return f"rounds to {stored}, within {fmt.name}'s normal range"

    explanation = (
        f"unscaled gradient {units.number(g)} {fate(g, underflows_unscaled)}; "
        f"scaled gradient = {units.number(g)} × {units.number(s)} = {units.number(scaled)}, which "
        f"{fate(scaled, underflows_scaled, overflows_scaled)}; "
        f"largest gradient that stays within max after scaling = {units.number(fmt.max)} / {units.number(s)} "
        f"= {units.number(max_unscaled)}."
    )
    return ToolResult(
        name="loss_scaling",
        arguments=normalised_arguments(args),
        result={
            "underflows_unscaled": underflows_unscaled,
            "scaled_gradient": to_number(scaled, name="scaled_gradient"),
            "underflows_scaled": underflows_scaled,
            "overflows_scaled": overflows_scaled,
            "max_unscaled_gradient": to_number(max_unscaled, name="max_unscaled_gradient"),
        },
        explanation=units.tidy(explanation),
    )


# ---- how learners ask --------------------------------------------------------------------------------------

FORMAT = re.compile(r"\b(fp32|fp16|bf16|fp8[\s_-]*e4m3|fp8[\s_-]*e5m2|e4m3|e5m2)\b", re.I)
FORMAT_WORDS = re.compile(
    r"\b(max(?:imum)?|largest|smallest|min(?:imum)?|range|epsilon|exponent|mantissa|"
    r"limits?|representable|subnormal)\b",
    re.I,
)
GRADIENT = re.compile(r"gradients?\s*(?:of|=|value|is|at|around|~)?\s*(\d+(?:\.\d+)?e-\d+|0\.0\d+)", re.I)
LOSS_SCALE = re.compile(r"(?:loss\s*)?scal(?:e|ing)(?:\s*factor)?\s*(?:of|=|s\s*=)?\s*(2\s*\^\s*\d+|\d{2,})", re.I)
SCALING_WORDS = re.compile(r"scal|underflow|fp16", re.I)


def normalise_format(name: str) -> str:
    """Map "e4m3", "FP8-E4M3" and friends onto the calculator's format names."""
    key = re.sub(r"[\s_-]+", "", name.lower())
    return {"e4m3": "fp8_e4m3", "fp8e4m3": "fp8_e4m3", "e5m2": "fp8_e5m2", "fp8e5m2": "fp8_e5m2"}.get(key, key)


def recognise_loss_scaling(text: str, context: PlanContext) -> Recognised:
    """A small gradient with a format or scaling words: "gradient of 1e-8 in fp16 with loss scale 2^16"."""
    gradient = first(GRADIENT, text)
    if not (gradient and (FORMAT.search(text) or SCALING_WORDS.search(text))):
        return None
    arguments: dict[str, Any] = {"gradient": gradient}
    if scale := first(LOSS_SCALE, text):
        arguments["scale"] = int(eval_power(scale))
    if fmt := first(FORMAT, text):
        arguments["format"] = normalise_format(fmt)
    return PlannedCall("loss_scaling", arguments)


def recognise_number_format(text: str, context: PlanContext) -> Recognised:
    """The limits of up to three named formats, with no model size: "max of fp16 and bf16"."""
    if not (FORMAT.search(text) and FORMAT_WORDS.search(text)) or find_params(text):
        return None
    formats = [normalise_format(f) for f in dict.fromkeys(m.group(1).lower() for m in FORMAT.finditer(text))]
    return [PlannedCall("number_format", {"format": f}) for f in formats[:3]]


NUMBER_FORMAT = Calculator.from_function(number_format, title="Number format", recognise=recognise_number_format)
LOSS_SCALING = Calculator.from_function(loss_scaling, title="Loss scaling", recognise=recognise_loss_scaling)
