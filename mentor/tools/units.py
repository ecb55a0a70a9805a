"""Format exact values for explanations: "7B", "84 GB (≈78.23 GiB)", "5.88e23 FLOPs", "≈0.2727 (≈27.27%)".

A shown number is either exact (up to 7 significant digits: "31.40625 GB") or marked "≈" and rounded
half-to-even to 4 significant digits, so a learner quoting an explanation never quotes a rounded value as
if it were exact.
"""

from __future__ import annotations

from decimal import MAX_EMAX, MIN_EMIN, ROUND_HALF_EVEN, Context, Decimal
from fractions import Fraction

DIGITS = 4
EXACT_DIGITS = 7  # a value with at most this many significant digits is shown exactly, unrounded
APPROX = "≈"
COUNT_SUFFIXES = ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "K"))
DECIMAL_BYTES = ((10**15, "PB"), (10**12, "TB"), (10**9, "GB"), (10**6, "MB"), (10**3, "KB"))
BINARY_BYTES = ((2**50, "PiB"), (2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "bytes"))
SECONDS_PER_DAY = 86_400


def _round(value: Fraction, digits: int) -> tuple[Decimal, bool]:
    context = Context(prec=digits, rounding=ROUND_HALF_EVEN, Emax=MAX_EMAX, Emin=MIN_EMIN)
    rounded = context.divide(Decimal(value.numerator), Decimal(value.denominator))
    return rounded, Fraction(rounded) == value


def _rounded(value: Fraction, digits: int = DIGITS) -> tuple[Decimal, bool]:
    """Show short exact values in full (31.40625); round the rest to `digits` significant digits."""
    shown, exact = _round(value, max(digits, EXACT_DIGITS))
    return (shown, True) if exact else _round(value, digits)


def plain(value: Fraction | int, digits: int = DIGITS) -> str:
    """Write a number in positional notation ("31.41", "120"), prefixed "≈" when rounded."""
    rounded, exact = _rounded(Fraction(value), digits)
    text = format(rounded.normalize(), "f")
    return text if exact else APPROX + text


def scientific(value: Fraction | int, digits: int = DIGITS) -> str:
    """Write a number as "5.88e23" or "≈5.96e-8", prefixed "≈" when rounded."""
    exact_value = Fraction(value)
    if exact_value == 0:
        return "0"
    rounded, exact = _rounded(exact_value, digits)
    mantissa, exponent = format(rounded, f".{max(digits, EXACT_DIGITS) - 1}e").split("e")
    mantissa = mantissa.rstrip("0").rstrip(".") if "." in mantissa else mantissa
    text = f"{mantissa}e{int(exponent)}"
    return text if exact else APPROX + text


def number(value: Fraction | int, digits: int = DIGITS) -> str:
    """Write a number positionally when readable (integers below 1e7, 1e-4 ≤ |x| < 1e6), else as 5.9e-8."""
    exact_value = Fraction(value)
    if exact_value.denominator == 1 and abs(exact_value) < 10**7:
        return str(int(exact_value))
    if exact_value == 0 or Fraction(1, 10**4) <= abs(exact_value) < 10**6:
        return plain(exact_value, digits)
    return scientific(exact_value, digits)


def count(value: int | Fraction) -> str:
    """Write a count exactly: "7B", "1.4T", "350M" when that is exact, else "6,738,415,616"."""
    exact_value = Fraction(value)
    if exact_value.denominator != 1:
        return number(exact_value)
    whole = int(exact_value)
    if abs(whole) >= 10**15:
        text = scientific(whole, digits=DIGITS)
        return text if not text.startswith(APPROX) else f"{whole:,}"
    for size, suffix in COUNT_SUFFIXES:
        if abs(whole) >= size:
            rounded, exact = _round(Fraction(whole, size), DIGITS)
            return f"{format(rounded.normalize(), 'f')}{suffix}" if exact else f"{whole:,}"
    return str(whole)


def nbytes(value: Fraction | int) -> str:
    """Write a byte count with a decimal headline and binary units alongside: "84 GB (≈78.23 GiB)"."""
    exact_value = Fraction(value)
    if abs(exact_value) < 1000:
        return f"{number(exact_value)} bytes"
    decimal_size, decimal_unit = next((s, u) for s, u in DECIMAL_BYTES if abs(exact_value) >= s)
    binary_size, binary_unit = next((s, u) for s, u in BINARY_BYTES if abs(exact_value) >= s)
    headline = f"{number(exact_value / decimal_size)} {decimal_unit}"
    binary = f"{number(exact_value / binary_size)} {binary_unit}"
    if headline.startswith(APPROX) and exact_value.denominator == 1:
        # The headline is rounded: give the exact byte count first so nothing exact is lost.
        return f"{int(exact_value):,} bytes ≈ {headline.removeprefix(APPROX)} ({binary})"
    return f"{headline} ({binary})"


def flops(value: Fraction | int) -> str:
    """Write a FLOP count: "5.88e23 FLOPs"."""
    return f"{scientific(value)} FLOPs"


def tokens(value: int) -> str:
    """Write a token count: "1.4T tokens"."""
    return f"{count(value)} tokens"


def ratio(value: Fraction) -> str:
    """Write a fraction with its percentage: "≈0.2727 (≈27.27%)", "0.375 (37.5%)"."""
    return f"{plain(value)} ({plain(value * 100)}%)"


def duration(seconds: Fraction) -> str:
    """Write a duration in seconds and days: "≈4.601e6 s (≈53.25 days)"."""
    return f"{number(seconds)} s ({number(seconds / SECONDS_PER_DAY)} days)"


def power_of_two(exponent: int) -> str:
    """Write 2^e with its decimal value: "2^-24 (≈5.96e-8)"."""
    return f"2^{exponent} ({number(Fraction(2) ** exponent)})"


def tidy(explanation: str) -> str:
    """Write "= ≈x" as "≈ x" so a rounded result reads naturally."""
    return explanation.replace("= ≈", "≈ ")
