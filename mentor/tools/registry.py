"""The one registry of calculators: it feeds the LLM tool schemas, the HTTP route, the CLI and the planner.

Built once at import from pure data (functions, pydantic models, docstrings): no I/O, no environment.
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Mapping
from typing import Any

from mentor.errors import InvalidInput, NotFound
from mentor.tools.activations import ACTIVATION_MEMORY
from mentor.tools.allocation import COMPARE_ALLOCATIONS
from mentor.tools.calculator import Calculator
from mentor.tools.fit import MEMORY_FIT
from mentor.tools.memory import KV_CACHE, TRAINING_MEMORY, ZERO_MEMORY
from mentor.tools.parallel import PARALLEL_LAYOUT, PIPELINE_BUBBLE
from mentor.tools.precision import LOSS_SCALING, NUMBER_FORMAT
from mentor.tools.quantization import QUANTIZED_SIZE
from mentor.tools.result import ToolResult
from mentor.tools.scaling import CHINCHILLA_OPTIMAL, SCALING_LAW_LOSS, TRAINING_TIME

# The LLM sees the tools in this order (tool_schemas), and GET /v1/tools lists them in it.
CALCULATORS: tuple[Calculator, ...] = (
    TRAINING_MEMORY,
    ZERO_MEMORY,
    CHINCHILLA_OPTIMAL,
    SCALING_LAW_LOSS,
    TRAINING_TIME,
    QUANTIZED_SIZE,
    PIPELINE_BUBBLE,
    ACTIVATION_MEMORY,
    KV_CACHE,
    NUMBER_FORMAT,
    LOSS_SCALING,
    PARALLEL_LAYOUT,
    MEMORY_FIT,
    COMPARE_ALLOCATIONS,
)
REGISTRY: dict[str, Calculator] = {calculator.name: calculator for calculator in CALCULATORS}
# The planner asks the recognisers in this order and takes the first answer, so the narrower wording goes
# first: a gradient with "fp16" is loss scaling, not a format question; "int4 70B" is a quantized size, not
# training memory; "ZeRO on 64 GPUs" is ZeRO, not a parallel layout; a KV-cache question without its shapes
# stops the search (an empty plan) rather than fall to training memory; a question with a model size, tokens
# and "loss" is a loss prediction before it is a Chinchilla one; bare memory words with a size come last.
# Decisions come before the calculators they reuse: "can I fine-tune 13B on 8 A100 40GB with ZeRO-3?" is a fit
# (it names a GPU's memory), not ZeRO memory; "does 70B fit on a 24 GB GPU in int4?" is a fit, not a quantized
# size; "13B on 500B tokens or 40B on 150B tokens?" is a comparison, not one loss or one Chinchilla optimum.
PLANNING_ORDER: tuple[Calculator, ...] = (
    LOSS_SCALING,
    NUMBER_FORMAT,
    PIPELINE_BUBBLE,
    MEMORY_FIT,
    ZERO_MEMORY,
    ACTIVATION_MEMORY,
    KV_CACHE,
    PARALLEL_LAYOUT,
    QUANTIZED_SIZE,
    TRAINING_TIME,
    COMPARE_ALLOCATIONS,
    SCALING_LAW_LOSS,
    CHINCHILLA_OPTIMAL,
    TRAINING_MEMORY,
)


def get_calculator(name: str) -> Calculator:
    """Return the calculator called `name`; raise NotFound listing the available names."""
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        raise NotFound(f"unknown calculator {name!r}; available: {', '.join(REGISTRY)}") from None


def title_of(name: str) -> str:
    """The heading of calculator `name` in an answer ("Training memory"); the name itself if unknown."""
    calculator = REGISTRY.get(name)
    return calculator.title if calculator else name


def description_of(name: str) -> str:
    """What calculator `name` computes, as the LLM reads it in its tool schema; empty if unknown."""
    calculator = REGISTRY.get(name)
    return calculator.description if calculator else ""


def rule_of(name: str, result: Mapping[str, Any] | None) -> str:
    """The calculator whose rule a run of calculator `name` applied, read from its result: its own, or for a fit
    decision the memory it counted (a quantized size when serving, training memory when training)."""
    calculator = REGISTRY.get(name)
    return calculator.rule_of(result or {}) if calculator else name


def explain_json_error(error: BaseException | None) -> str:
    """Why JSON text could not be decoded, in plain words (for `--args`, tool calls and HTTP bodies)."""
    if isinstance(error, json.JSONDecodeError):
        return f"not valid JSON ({error.msg} at position {error.pos})"
    if isinstance(error, UnicodeDecodeError):
        return "not valid JSON (not UTF-8 text)"
    if isinstance(error, RecursionError):  # json.loads recurses once per level: 100,000 "[" exhaust the stack
        return "JSON nested too deeply to read"
    if isinstance(error, ValueError):  # Python refuses integers of more than 4,300 digits (sys.int_info)
        return f"JSON with a number of more than {sys.get_int_max_str_digits()} digits"
    return "not valid JSON"


def _decode(arguments: Mapping[str, Any] | str | None) -> Mapping[str, Any]:
    """Accept arguments as a mapping or as the JSON text a model sends; empty means no arguments."""
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError) as error:
            raise InvalidInput(f"arguments: {explain_json_error(error)}") from None
    if not isinstance(arguments, Mapping):
        raise InvalidInput(f"arguments: must be a JSON object (got {type(arguments).__name__})")
    return arguments


def run_tool(name: str, arguments: Mapping[str, Any] | str | None = None) -> ToolResult:
    """Run calculator `name` on JSON arguments; raise NotFound or InvalidInput with a plain message."""
    return get_calculator(name).run(_decode(arguments))


def tool_schemas() -> list[dict[str, Any]]:
    """Return the OpenAI function-calling schemas of every calculator, in registry order."""
    # Copies, so a caller that edits a schema (e.g. to add "strict") cannot change the registry.
    return [copy.deepcopy(calculator.openai_schema) for calculator in REGISTRY.values()]
