"""Binary floating-point formats used in training, and exact round-to-nearest-even into them."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True, slots=True)
class FloatFormat:
    """A binary float format: sign bit, exponent bits, mantissa (fraction) bits, largest normal exponent."""

    name: str
    exponent_bits: int
    mantissa_bits: int
    max_exponent: int
    max_mantissa: int  # the largest finite value is (1 + max_mantissa / 2^mantissa_bits) · 2^max_exponent
    note: str

    @property
    def bias(self) -> int:
        return 2 ** (self.exponent_bits - 1) - 1

    @property
    def min_exponent(self) -> int:
        """Exponent of the smallest normal number, 1 − bias."""
        return 1 - self.bias

    @property
    def max(self) -> Fraction:
        return (1 + Fraction(self.max_mantissa, 2**self.mantissa_bits)) * Fraction(2) ** self.max_exponent

    @property
    def min_normal(self) -> Fraction:
        return Fraction(2) ** self.min_exponent

    @property
    def min_subnormal(self) -> Fraction:
        return Fraction(2) ** (self.min_exponent - self.mantissa_bits)

    @property
    def epsilon(self) -> Fraction:
        """Gap between 1 and the next representable number."""
        return Fraction(1, 2**self.mantissa_bits)


def _ieee(name: str, exponent_bits: int, mantissa_bits: int, note: str) -> FloatFormat:
    # IEEE 754 layout: the all-ones exponent is reserved for inf/NaN, so the top normal exponent is bias.
    bias = 2 ** (exponent_bits - 1) - 1
    return FloatFormat(name, exponent_bits, mantissa_bits, bias, 2**mantissa_bits - 1, note)


FORMATS: dict[str, FloatFormat] = {
    "fp32": _ieee("fp32", 8, 23, "IEEE 754 binary32"),
    "fp16": _ieee("fp16", 5, 10, "IEEE 754 binary16"),
    "bf16": _ieee("bf16", 8, 7, "bfloat16, fp32's exponent range with 7 mantissa bits"),
    # OCP 8-bit Floating Point Specification (OFP8) 2023 / NVIDIA Hopper FP8: E4M3 has no infinities and
    # uses only S.1111.111 for NaN, so the all-ones exponent holds normals up to 1.75 · 2^8 = 448.
    "fp8_e4m3": FloatFormat("fp8_e4m3", 4, 3, 8, 6, "OCP FP8 E4M3, no infinities, NaN only at S.1111.111"),
    # E5M2 follows IEEE conventions (inf and NaN in the all-ones exponent): max 1.75 · 2^15 = 57344.
    "fp8_e5m2": _ieee("fp8_e5m2", 5, 2, "OCP FP8 E5M2, IEEE-style inf and NaN"),
}


def _floor_log2(value: Fraction) -> int:
    """Return ⌊log2 value⌋ exactly for value > 0."""
    exponent = value.numerator.bit_length() - value.denominator.bit_length()
    # The bit-length estimate is off by at most one; settle it with exact comparisons.
    if Fraction(2) ** exponent > value:
        exponent -= 1
    elif Fraction(2) ** (exponent + 1) <= value:
        exponent += 1
    return exponent


def round_to_format(value: Fraction, fmt: FloatFormat) -> Fraction:
    """Round exactly to the nearest representable magnitude, ties to even (IEEE 754 default rounding).

    The exponent is not capped above, so a result larger than `fmt.max` means the value overflows
    (to inf in IEEE formats, to NaN or saturation in E4M3); a result of 0 means it underflowed.
    """
    if value == 0:
        return Fraction(0)
    magnitude = abs(value)
    # Below the normal range the spacing stays that of the smallest normal binade: subnormals.
    exponent = max(_floor_log2(magnitude), fmt.min_exponent)
    quantum = Fraction(2) ** (exponent - fmt.mantissa_bits)
    steps = magnitude / quantum
    rounded = round(steps)  # Fraction.__round__ rounds half to even, exactly
    result = rounded * quantum
    return result if value > 0 else -result
