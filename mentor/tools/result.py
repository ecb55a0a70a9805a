"""The value every calculator returns, and the one place exact Fractions become JSON numbers."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from pydantic import BaseModel

from mentor.errors import InvalidInput

Number = int | float
# Clients read JSON numbers as binary64, so a larger integer would arrive as inf: refuse it like a float.
MAX_JSON_NUMBER = Fraction(sys.float_info.max)


def to_number(value: Fraction | int, *, name: str = "result") -> Number:
    """Convert an exact value once, at the end: int when integral, else the nearest finite float."""
    exact = Fraction(value)
    if exact.denominator == 1 and abs(exact) <= MAX_JSON_NUMBER:
        return int(exact)
    try:
        approx = float(exact)  # int / int true division: correctly rounded, raises rather than returning inf
    except OverflowError:
        approx = math.inf
    if not math.isfinite(approx):
        raise InvalidInput(f"{name}: the result is too large to represent; check the arguments")
    return approx


def jsonable(value: object, *, name: str = "argument") -> Any:
    """Render a validated argument value as JSON: Fractions as numbers, mappings recursively."""
    if isinstance(value, Fraction):
        return to_number(value, name=name)
    if isinstance(value, dict):
        return {key: jsonable(item, name=f"{name}.{key}") for key, item in value.items()}
    return value


def normalised_arguments(args: BaseModel, **overrides: object) -> dict[str, Any]:
    """Return the arguments a calculator actually used, defaults filled in, as JSON values."""
    values: dict[str, object] = dict(args)
    values.update(overrides)
    return {key: jsonable(value, name=key) for key, value in values.items()}


@dataclass(frozen=True, slots=True)
class ToolResult:
    """One calculator run: what was asked, what came out, and the worked formula in words."""

    name: str
    arguments: dict[str, Any]
    result: dict[str, Any]
    explanation: str = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON shape used by the HTTP API and by tool messages to the LLM."""
        return {
            "name": self.name,
            "arguments": dict(self.arguments),
            "result": dict(self.result),
            "explanation": self.explanation,
        }
