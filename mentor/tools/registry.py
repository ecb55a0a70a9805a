"""The one registry of calculators: it feeds the LLM tool schemas, the HTTP route and the CLI.

Built once at import from pure data (functions, pydantic models, docstrings): no I/O, no environment.
"""

from __future__ import annotations

import copy
import inspect
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, get_type_hints

from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ValidationError

from mentor.errors import InvalidInput, NotFound
from mentor.tools.activations import activation_memory
from mentor.tools.memory import kv_cache, training_memory, zero_memory
from mentor.tools.parallel import parallel_layout, pipeline_bubble
from mentor.tools.parsing import ToolArgs, show
from mentor.tools.precision import loss_scaling, number_format
from mentor.tools.quantization import quantized_size
from mentor.tools.result import ToolResult
from mentor.tools.scaling import chinchilla_optimal, scaling_law_loss, training_time


@dataclass(frozen=True)
class Calculator:
    """A calculator: its name, description (the function's docstring), argument model and function."""

    name: str
    description: str
    args_model: type[ToolArgs]
    function: Callable[[Any], ToolResult]

    @classmethod
    def from_function(cls, function: Callable[[Any], ToolResult]) -> Calculator:
        """Describe a calculator `def name(args: SomeArgs) -> ToolResult` with a docstring."""
        args_model = get_type_hints(function)["args"]
        # Tool descriptions are one paragraph; the docstring's line breaks are only source layout.
        description = " ".join((inspect.getdoc(function) or "").split())
        return cls(function.__name__, description, args_model, function)

    @cached_property
    def openai_schema(self) -> dict[str, Any]:
        """Return the OpenAI function-calling schema {"type": "function", "function": {...}}."""
        # langchain renders the pydantic model cleanly (titles dropped, anyOf kept); name and description
        # come from the calculator, not from the model class.
        rendered = convert_to_openai_tool(self.args_model)
        parameters = rendered["function"]["parameters"]
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": parameters},
        }

    @property
    def json_schema(self) -> dict[str, Any]:
        """Return the JSON schema of the arguments object (for GET /v1/tools)."""
        return copy.deepcopy(self.openai_schema["function"]["parameters"])

    def run(self, arguments: Mapping[str, Any]) -> ToolResult:
        """Validate `arguments` and compute; raise InvalidInput with a plain message naming the argument."""
        try:
            args = self.args_model.model_validate(dict(arguments))
        except ValidationError as error:
            raise InvalidInput(self._plain_message(error)) from None
        return self.function(args)

    def _plain_message(self, error: ValidationError) -> str:
        """Turn pydantic's first error into "argument: what is wrong (got ...)"; no pydantic URLs."""
        first = error.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"])
        kind, message, given = first["type"], first["msg"], first.get("input")
        if kind == "missing":
            text = f"required argument is missing for {self.name}"
        elif kind == "extra_forbidden":
            text = f"unknown argument for {self.name}; allowed: {', '.join(self.args_model.model_fields)}"
        elif kind.startswith("bool"):
            text = f"must be true or false (got {show(given)})"
        elif kind == "literal_error":
            text = f"{message.replace('Input should be', 'must be')} (got {show(given)})"
        elif kind == "value_error":
            # Checks across several arguments carry no location; their text starts with the argument blamed.
            text = message.removeprefix("Value error, ")
        else:
            text = message.replace("Input should be", "must be")
        return f"{where}: {text}" if where else text


CALCULATORS = (
    training_memory,
    zero_memory,
    chinchilla_optimal,
    scaling_law_loss,
    training_time,
    quantized_size,
    pipeline_bubble,
    activation_memory,
    kv_cache,
    number_format,
    loss_scaling,
    parallel_layout,
)
REGISTRY: dict[str, Calculator] = {
    calculator.name: calculator for calculator in map(Calculator.from_function, CALCULATORS)
}


def get_calculator(name: str) -> Calculator:
    """Return the calculator called `name`; raise NotFound listing the available names."""
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        raise NotFound(f"unknown calculator {name!r}; available: {', '.join(REGISTRY)}") from None


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
