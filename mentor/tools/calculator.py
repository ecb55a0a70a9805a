"""What a calculator is: its function, arguments model, title and the recogniser of how learners ask for it.

Each calculator module declares its calculators with `Calculator.from_function`, next to the function and its
recogniser; `registry.py` lists them once for the LLM schemas, the HTTP route, the CLI and the planner.
"""

from __future__ import annotations

import copy
import inspect
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, get_type_hints

from pydantic import ValidationError

from mentor.errors import InvalidInput
from mentor.text.tokens import stems
from mentor.tools.parsing import ToolArgs, show
from mentor.tools.result import ToolResult
from mentor.tools.wording import Recogniser

WORDS = re.compile(r"[a-z0-9]+")  # "seq_len" is "seq" and "len"; "v100s" is "v100s" (its stem, "v100")


def stems_of(text: str) -> frozenset[str]:
    """The stems of `text`'s words, read as a calculator's own words are (`Calculator.vocabulary`, its title)."""
    return frozenset(stems(WORDS.findall(text.lower())))


def without_titles(schema: dict[str, Any], parent: str = "") -> dict[str, Any]:
    """`schema` without the "title" keys pydantic adds, keeping a property that is named "title"."""
    kept: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and not (parent == "properties" and isinstance(value, dict)):
            continue
        kept[key] = without_titles(value, key) if isinstance(value, dict) else value  # lists as they are, as langchain
    return kept


@dataclass(frozen=True)
class Calculator:
    """A calculator: its name, description (the function's docstring), argument model and function.

    `title` heads its result in an answer; `recognise` reads a learner's question for it (None: only the LLM
    and the calc API call it); `applies` names, from a run's result, the calculator whose rule that run applied
    (None: its own): a fit decision for serving counts a quantized size.
    """

    name: str
    description: str
    args_model: type[ToolArgs]
    function: Callable[[Any], ToolResult]
    title: str
    recognise: Recogniser | None = None
    applies: Callable[[Mapping[str, Any]], str] | None = None

    @classmethod
    def from_function(
        cls,
        function: Callable[[Any], ToolResult],
        *,
        title: str,
        recognise: Recogniser | None = None,
        applies: Callable[[Mapping[str, Any]], str] | None = None,
    ) -> Calculator:
        """Describe a calculator `def name(args: SomeArgs) -> ToolResult` with a docstring."""
        args_model = get_type_hints(function)["args"]
        # Tool descriptions are one paragraph; the docstring's line breaks are only source layout.
        description = " ".join((inspect.getdoc(function) or "").split())
        return cls(function.__name__, description, args_model, function, title, recognise, applies)

    def rule_of(self, result: Mapping[str, Any]) -> str:
        """The calculator whose rule the run that gave `result` applied."""
        return self.applies(result) if self.applies is not None else self.name

    @cached_property
    def vocabulary(self) -> frozenset[str]:
        """The stems of every word the calculator is described in: its name, title, description and arguments
        (names, descriptions, allowed values): what it models, in its own words."""
        schema = json.dumps(self.args_model.model_json_schema())
        return stems_of(" ".join((self.name, self.title, self.description, schema)))

    @cached_property
    def title_words(self) -> frozenset[str]:
        """The stems of its title's words: what an answer heads its result with ("activation", "memory")."""
        return stems_of(self.title)

    def named_in(self, text: str) -> bool:
        """True when `text` names every word of the calculator's title ("activation memory", "activations' memory")."""
        return self.title_words <= stems_of(text)

    def models(self, concept: str) -> bool:
        """True when every word of `concept` is one the calculator is described in ("fp8 e5m2" for the number
        format; not "qlora" for full training memory: a method it does not model)."""
        words = [w for w in WORDS.findall(concept.lower()) if not w[0].isdigit()]  # a number is an argument
        # A plural of a word it knows is known: "v100s" (no stemmer takes a name to its singular).
        return all(s in self.vocabulary or s.removesuffix("s") in self.vocabulary for s in stems(words))

    @cached_property
    def openai_schema(self) -> dict[str, Any]:
        """Return the OpenAI function-calling schema {"type": "function", "function": {...}}."""
        # pydantic's schema with its titles dropped, anyOf kept: what langchain's convert_to_openai_tool renders
        # for these models (tests/test_tools.py compares them), without its first call's imports (langsmith, the
        # tracers: ~0.45 s of every start that builds the LLM engine). Name and description come from the
        # calculator, not from the model class.
        schema = self.args_model.model_json_schema()
        schema.pop("description", None)  # the argument model's docstring: the tool's description is the function's
        parameters = without_titles(schema)
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
