"""Parse numbers the way people and language models write them ("7B", "1.4T", "13 billion") exactly.

Every value becomes a `fractions.Fraction` built from its decimal text, never through a binary float, so
"1.4T" is exactly 1_400_000_000_000. The pydantic field types at the bottom plug these parsers into the
calculators' argument models and advertise `integer | number | string` in the JSON schema.
"""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainValidator, WithJsonSchema

from mentor.errors import InvalidInput

# The one table of scale words and suffixes ("13 billion", "7B", "1.4T"), as powers of ten, lowercase. The
# planner's wording and the grounding check read their values here. Counts are counts of things, so "m" is million.
SCALE_WORDS: dict[str, int] = {"thousand": 3, "million": 6, "billion": 9, "trillion": 12}
SCALE_SUFFIXES: dict[str, int] = {"k": 3, "m": 6, "mn": 6, "b": 9, "bn": 9, "t": 12, "tn": 12}
MULTIPLIERS: dict[str, int] = {name: 10**power for name, power in {**SCALE_WORDS, **SCALE_SUFFIXES}.items()}

NUMBER = re.compile(
    r"""^(?P<sign>[+-])?
        (?P<mantissa>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|\.\d+)
        (?:[eE](?P<exponent>[+-]?\d+))?
        \s*(?P<suffix>[A-Za-z]+|%)?$""",
    re.VERBOSE,
)
MAX_TEXT_CHARS = 64
# Bounds keep every parsed value inside binary64's range, so a float result can only overflow through
# arithmetic (which `to_number` catches), and keep "1e999999999" from building a gigantic integer.
MAX_MAGNITUDE = Fraction(10) ** 300
MIN_MAGNITUDE = Fraction(1, 10**300)
MAX_EXPONENT = 400

EXAMPLES = '7000000000, 7e9, "7B", "1.4T" or "13 billion"'


SHOWN_CHARS = 80  # an error message quotes a caller's value up to here: a 4,000-digit number is not repeated back


def show(value: object) -> str:
    """Show a caller's value as JSON would (`"7B"`, `true`, `1.5`), shortened, for error messages."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError, RecursionError):  # RecursionError: lists nested ~1,000 deep
        return type(value).__name__
    return text if len(text) <= SHOWN_CHARS else f"{text[: SHOWN_CHARS - 1]}…"


def _number_from_text(text: str) -> Fraction:
    """Parse decimal text with an optional exponent and size suffix into an exact Fraction."""
    cleaned = " ".join(text.split())
    if len(cleaned) > MAX_TEXT_CHARS:
        raise ValueError(f"must be a number such as {EXAMPLES} (got a {len(cleaned)}-character string)")
    match = NUMBER.match(cleaned)
    if match is None:
        raise ValueError(f"must be a number such as {EXAMPLES} (got {show(text)})")
    suffix = (match["suffix"] or "").lower()
    if suffix == "%":
        multiplier = Fraction(1, 100)
    else:
        # Plural words ("2 millions") mean the same as the singular.
        word = suffix[:-1] if suffix.endswith("s") and suffix[:-1] in MULTIPLIERS else suffix
        if word and word not in MULTIPLIERS:
            allowed = "k, M, B, T, thousand, million, billion, trillion or %"
            raise ValueError(f"unknown suffix {show(match['suffix'])} in {show(text)}; use {allowed}")
        multiplier = Fraction(MULTIPLIERS.get(word, 1))
    exponent = int(match["exponent"] or 0)
    if abs(exponent) > MAX_EXPONENT:
        raise ValueError(f"is out of range (got {show(text)})")
    value = Fraction(match["mantissa"].replace(",", "")) * Fraction(10) ** exponent * multiplier
    return -value if match["sign"] == "-" else value


def to_fraction(value: object) -> Fraction:
    """Turn a JSON value (int, float or numeric string) into an exact Fraction; raise ValueError if not."""
    if isinstance(value, bool):
        # bool is an int subclass; `true` for a count is a caller mistake, not the number 1.
        raise ValueError(f"must be a number, not a boolean (got {str(value).lower()})")
    if isinstance(value, Fraction):
        result = value
    elif isinstance(value, int):
        result = Fraction(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"must be a finite number (got {value})")
        # repr() is the shortest decimal that round-trips, i.e. what the caller wrote: 1e-08, not the
        # binary value 1.0000000000000000209e-08 that Fraction(float) would give.
        result = Fraction(repr(value))
    elif isinstance(value, str):
        result = _number_from_text(value)
    else:
        raise ValueError(f"must be a number such as {EXAMPLES} (got {show(value)})")
    if result and not MIN_MAGNITUDE <= abs(result) <= MAX_MAGNITUDE:
        raise ValueError(f"is out of range: its magnitude must lie between 1e-300 and 1e300 (got {show(value)})")
    return result


def to_count(value: object, *, minimum: int = 1) -> int:
    """Turn a JSON value into a whole number at least `minimum`; raise ValueError if it is not one."""
    number = to_fraction(value)
    if number.denominator != 1:
        raise ValueError(f"must be a whole number (got {show(value)})")
    if number < minimum:
        raise ValueError(f"must be at least {minimum} (got {show(value)})")
    return int(number)


def parse_number(value: object, *, name: str = "value") -> Fraction:
    """Parse a number like 7e9, "1.4T" or "13 billion" exactly; raise InvalidInput naming `name`."""
    try:
        return to_fraction(value)
    except ValueError as error:
        raise InvalidInput(f"{name}: {error}") from None


def parse_count(value: object, *, name: str = "value", minimum: int = 1) -> int:
    """Parse a whole count like "7B" or "7,000,000,000"; raise InvalidInput naming `name`."""
    try:
        return to_count(value, minimum=minimum)
    except ValueError as error:
        raise InvalidInput(f"{name}: {error}") from None


# ---- pydantic field types -------------------------------------------------------------------------------

COUNT_SCHEMA = {"anyOf": [{"type": "integer"}, {"type": "number"}, {"type": "string"}]}
NUMBER_SCHEMA = {"anyOf": [{"type": "number"}, {"type": "string"}]}


def _fmt_bound(bound: Fraction) -> str:
    return str(bound.numerator) if bound.denominator == 1 else f"{float(bound):g}"


def count_type(*, minimum: int = 1, maximum: int | None = None) -> Any:
    """Return a field type for a whole count in [minimum, maximum] that also accepts "7B"-style text."""

    def validate(value: object) -> int:
        count = to_count(value, minimum=minimum)
        if maximum is not None and count > maximum:
            raise ValueError(f"must be at most {maximum} (got {show(value)})")
        return count

    return Annotated[int, PlainValidator(validate), WithJsonSchema(COUNT_SCHEMA)]


def enum_count_type(*allowed: int) -> Any:
    """Return a field type for a whole number from a short fixed list, e.g. a ZeRO stage."""
    words = ", ".join(str(option) for option in allowed[:-1]) + f" or {allowed[-1]}"

    def validate(value: object) -> int:
        try:
            number = to_count(value, minimum=min(allowed))
        except ValueError:
            number = None
        if number not in allowed:
            raise ValueError(f"must be {words} (got {show(value)})")
        return number

    schema = {"anyOf": [{"type": "integer", "enum": list(allowed)}, {"type": "string"}]}
    return Annotated[int, PlainValidator(validate), WithJsonSchema(schema)]


def number_type(
    *,
    above: Fraction | int | None = None,
    at_least: Fraction | int | None = None,
    at_most: Fraction | int | None = None,
) -> Any:
    """Return a field type for an exact rational number with optional bounds (`above` is exclusive)."""

    def validate(value: object) -> Fraction:
        number = to_fraction(value)
        if above is not None and number <= above:
            raise ValueError(f"must be greater than {_fmt_bound(Fraction(above))} (got {show(value)})")
        if at_least is not None and number < at_least:
            raise ValueError(f"must be at least {_fmt_bound(Fraction(at_least))} (got {show(value)})")
        if at_most is not None and number > at_most:
            raise ValueError(f"must be at most {_fmt_bound(Fraction(at_most))} (got {show(value)})")
        return number

    return Annotated[Fraction, PlainValidator(validate), WithJsonSchema(NUMBER_SCHEMA)]


def _lower(value: object) -> object:
    # Names of formats and optimizers are case- and separator-insensitive: "BF16", "fp8-e4m3".
    return value.strip().lower().replace("-", "_").replace(" ", "_") if isinstance(value, str) else value


def choice_type(*options: str) -> Any:
    """Return a field type for one of `options`, matched case-insensitively."""
    return Annotated[Literal[options], BeforeValidator(_lower)]  # type: ignore[valid-type]


Count = count_type()
PositiveNumber = number_type(above=0)


class ToolArgs(BaseModel):
    """Base of every calculator's arguments: unknown keys are errors, defaults go through the parsers too."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)
