"""MkDocs hook: the reference pages are written from the code at build time, so they cannot drift from it.

A page asks for a reference with a block `<!-- generated: NAME -->` … `<!-- /generated -->`; the block's own text
(a note for readers of the raw Markdown, e.g. on GitHub) is replaced by the reference NAME:

- `settings`: every field of `mentor.settings.Settings`: its environment variables, type, default and description;
- `cli`: every command of the Typer app `mentor.cli:app`, as `mentor COMMAND --help` shows it;
- `openapi`: every operation and schema of the app's OpenAPI document (`create_app(settings).openapi()`: building
  the app runs no lifespan, so nothing is loaded, indexed or opened).

`eval/README.md` (the eval suite's own reference, outside `docs/`) is published as the page `eval-suite.md`.
"""

from __future__ import annotations

import json
import re
import types
import typing
from collections.abc import Callable, Iterator
from itertools import cycle
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"<!-- generated: (?P<name>[a-z]+) -->.*?<!-- /generated -->", re.DOTALL)
EVAL_SUITE = "eval-suite.md"


# ---- shared Markdown helpers ----------------------------------------------------------------------------------


def cell(text: str) -> str:
    """Text safe inside a Markdown table cell: one line; outside code spans, pipes, asterisks and `<` escaped ("/v1/
    signals/*, DELETE /v1/learners/*" is no emphasis). Inside code spans a pipe is no column separator, and an
    escape would show."""
    parts = " ".join(text.split()).split("`")
    return "`".join(part if odd else escape_outside_code(part) for odd, part in zip(cycle((False, True)), parts))


def escape_outside_code(text: str) -> str:
    return text.replace("|", "\\|").replace("*", "\\*").replace("<", "&lt;")


def prose(text: str) -> str:
    """Plain help text as Markdown: no accidental emphasis or HTML."""
    return text.replace("\\", "\\\\").replace("*", "\\*").replace("<", "&lt;")


def code(text: str) -> str:
    """Inline code that survives backticks in the text."""
    return f"`` {text} ``" if "`" in text else f"`{text}`"


# ---- settings -------------------------------------------------------------------------------------------------


def type_name(annotation: Any) -> str:
    """A field's type as a reader says it: `int`, `path`, `one of a, b`, `secret`; `or unset` for optional ones."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        named = " or ".join(type_name(arg) for arg in args)
        return f"{named}, or unset" if len(args) < len(typing.get_args(annotation)) else named
    if origin is typing.Literal:
        return "one of " + ", ".join(code(str(value)) for value in typing.get_args(annotation))
    names = {"str": "text", "Path": "path", "SecretStr": "secret", "bool": "true/false"}
    name = getattr(annotation, "__name__", str(annotation))
    return names.get(name, name)


def bounds(field: Any) -> str:
    """The range or pattern a field's value must keep to, from its metadata (`ge`, `le`, `gt`, `pattern`)."""
    parts = []
    for item in field.metadata:
        for attribute, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            if getattr(item, attribute, None) is not None:
                parts.append(f"{sign} {getattr(item, attribute)}")
        if getattr(item, "pattern", None):
            parts.append(f"matches {code(item.pattern)}")
    return ", ".join(parts)


def default_of(field: Any) -> str:
    if field.default_factory is not None:
        return "computed (see the description)"
    if field.default is None:
        return "unset"
    if field.default == "":
        return "empty"
    value = str(field.default).lower() if isinstance(field.default, bool) else str(field.default)
    return code(value)


def env_names(name: str, field: Any, prefix: str) -> list[str]:
    """The environment variables a field is read from: `PREFIX_NAME`, or its upper-case validation aliases."""
    alias = field.validation_alias
    choices = getattr(alias, "choices", None) or ([alias] if isinstance(alias, str) else [])
    names = [choice for choice in choices if isinstance(choice, str) and choice.isupper()]
    return names or [f"{prefix}{name}".upper()]


def settings_reference() -> str:
    """A table of every `Settings` field: its environment variables, type and bounds, and default beside its
    description (two columns, so that the description keeps the width on a laptop's screen)."""
    from mentor.settings import Settings

    prefix = Settings.model_config.get("env_prefix", "")
    rows = ["| variable | what it does |", "|---|---|"]
    for name, field in Settings.model_fields.items():
        if not field.description:
            raise PluginError(f"Settings.{name} has no description= (STYLE.md: every field described)")
        variables = "<br>or ".join(code(variable) for variable in env_names(name, field, prefix))
        kind = type_name(field.annotation) + (f" ({bounds(field)})" if bounds(field) else "")
        about = f"{variables}<br>{cell(kind)}<br>default: {cell(default_of(field))}"
        rows.append(f"| {about} | {cell(field.description)} |")
    count = len(Settings.model_fields)
    return f"{count} settings, generated from `mentor/settings.py` when this site was built.\n\n" + "\n".join(rows)


# ---- command line ---------------------------------------------------------------------------------------------


def walk_commands(command: Any, context: Any, path: list[str]) -> Iterator[tuple[list[str], Any, Any]]:
    """Every command and sub-command with its click context, depth first, in the order `--help` lists them."""
    yield path, command, context
    for name in getattr(command, "list_commands", lambda _: [])(context):
        sub = command.get_command(context, name)
        if sub is not None and not sub.hidden:
            yield from walk_commands(sub, sub.context_class(sub, info_name=name, parent=context), [*path, name])


def help_markdown(text: str) -> str:
    """A command's docstring as paragraphs (click's `\\b` no-rewrap markers dropped)."""
    paragraphs = [" ".join(part.split()) for part in text.replace("\b", "").split("\n\n")]
    return "\n\n".join(prose(paragraph) for paragraph in paragraphs if paragraph)


def cli_reference() -> str:
    """One section per command: what it does, its usage line, and its arguments and options as `--help` has them."""
    import typer.main

    from mentor.cli import app

    root = typer.main.get_command(app)
    out = []
    for path, command, context in walk_commands(root, root.context_class(root, info_name="mentor"), ["mentor"]):
        heading = "###" if len(path) <= 2 else "####"  # under the page's "Every command"; sub-commands below
        out.append(f"{heading} {' '.join(path)}\n")
        if command.help:
            out.append(help_markdown(command.help) + "\n")
        usage = command.get_usage(context).removeprefix("Usage: ")
        out.append(f"```\n{usage}\n```\n")
        # --help is left out: every command has it (the page says so once).
        records = [param.get_help_record(context) for param in command.get_params(context) if param.name != "help"]
        items = [f"- {code(names)}: {prose(' '.join(text.split()))}" for names, text in filter(None, records)]
        if items:
            out.append("\n".join(items) + "\n")
    return "\n".join(out)


# ---- HTTP API -------------------------------------------------------------------------------------------------


def openapi_document() -> dict[str, Any]:
    from mentor.api.app import create_app
    from mentor.settings import Settings

    # model_construct: the defaults, without reading this machine's MENTOR_* variables; the document depends on none.
    return create_app(Settings.model_construct()).openapi()


TAG_TITLES = {"openai": "OpenAI-compatible", "lti": "LTI"}


def schema_link(name: str) -> str:
    return f"[{name}](#{name.lower()})"


def schema_type(schema: dict[str, Any]) -> str:
    """A JSON schema's type in a few words, schema names linked to their section below."""
    if "$ref" in schema:
        return schema_link(schema["$ref"].rsplit("/", 1)[-1])
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            kinds = [schema_type(part) for part in schema[key]]
            return " or ".join(dict.fromkeys(kind for kind in kinds if kind != "null")) + (
                ", or null" if "null" in kinds else ""
            )
    if "enum" in schema:
        return "one of " + ", ".join(code(str(value)) for value in schema["enum"])
    if "const" in schema:
        return code(str(schema["const"]))
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {schema_type(schema.get('items', {}))}"
    if kind == "object" and "additionalProperties" in schema and isinstance(schema["additionalProperties"], dict):
        return f"object of {schema_type(schema['additionalProperties'])}"
    return f"{kind} ({schema['format']})" if "format" in schema else str(kind)


def default_text(schema: dict[str, Any]) -> str:
    """A parameter's or field's default as JSON would write it (`false`, `"explain"`); empty when it has none."""
    if schema.get("default") is None:
        return ""
    return code(json.dumps(schema["default"], ensure_ascii=False))


def operation_markdown(method: str, path: str, operation: dict[str, Any], schemes: dict[str, Any]) -> str:
    out = [f"#### {method.upper()} {path}\n"]
    description = operation.get("description") or operation.get("summary", "")
    if description:
        out.append(description.strip() + "\n")
    security = [name for requirement in operation.get("security", []) for name in requirement]
    if security:
        optional = any(not requirement for requirement in operation["security"])
        names = ", ".join(f"{code(name)} ({schemes.get(name, {}).get('scheme', 'key')})" for name in security)
        out.append(f"**Credentials:** {names}{', or none' if optional else ''}.\n")
    parameters = operation.get("parameters", [])
    if parameters:
        out += ["| parameter | in | type | required | default | description |", "|---|---|---|---|---|---|"]
        for parameter in parameters:
            schema = parameter.get("schema", {})
            row = (
                code(parameter["name"]),
                parameter["in"],
                cell(schema_type(schema)),
                "yes" if parameter.get("required") else "",
                cell(default_text(schema)),
                cell(parameter.get("description", "")),
            )
            out.append("| " + " | ".join(row) + " |")
        out.append("")
    body = operation.get("requestBody")
    if body:
        kinds = [
            f"{code(media)} {schema_type(content.get('schema', {}))}" for media, content in body["content"].items()
        ]
        out.append(f"**Body{' (required)' if body.get('required') else ''}:** {', '.join(kinds)}\n")
    out.append("**Responses:**\n")
    for status, response in sorted(operation["responses"].items()):
        media = [
            f"{code(kind)}" + (f" {schema_type(content['schema'])}" if content.get("schema") else "")
            for kind, content in response.get("content", {}).items()
        ]
        out.append(
            f"- `{status}` {cell(response.get('description', ''))}" + (f" ({', '.join(media)})" if media else "")
        )
    return "\n".join(out) + "\n"


def schema_markdown(name: str, schema: dict[str, Any]) -> str:
    out = [f"### {name}\n"]
    if schema.get("description"):
        out.append(cell(schema["description"]) + "\n")
    properties = schema.get("properties", {})
    if properties:
        required = set(schema.get("required", []))
        out += ["| field | type | required | default | description |", "|---|---|---|---|---|"]
        for field, spec in properties.items():
            row = (
                code(field),
                cell(schema_type(spec)),
                "yes" if field in required else "",
                cell(default_text(spec)),
                cell(spec.get("description", "")),
            )
            out.append("| " + " | ".join(row) + " |")
    elif "enum" in schema or "type" in schema:
        out.append(f"Type: {schema_type(schema)}.")
    return "\n".join(out) + "\n"


def openapi_reference() -> str:
    """Every operation grouped by tag (paths, methods, credentials, parameters, body, status codes), then schemas.

    Headings fit under the page's "Every route" (tags ###, operations ####); "Schemas" is a section of its own."""
    document = openapi_document()
    schemes = document.get("components", {}).get("securitySchemes", {})
    by_tag: dict[str, list[str]] = {}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            tag = (operation.get("tags") or ["other"])[0]
            by_tag.setdefault(tag, []).append(operation_markdown(method, path, operation, schemes))
    out = [
        f"Generated from the OpenAPI document of mentor {document['info']['version']} (`/openapi.json` of a running "
        "server, interactive at `/docs`) when this site was built.\n"
    ]
    if schemes:
        out.append("### Credentials\n")
        out += [
            f"- {code(name)}: {cell(spec.get('description', spec.get('type', '')))}" for name, spec in schemes.items()
        ]
        out.append("")
    for tag, sections in by_tag.items():
        out.append(f"### {TAG_TITLES.get(tag, tag.capitalize())} routes\n")
        out += sections
    out.append("## Schemas\n")
    for name, schema in sorted(document.get("components", {}).get("schemas", {}).items()):
        out.append(schema_markdown(name, schema))
    return "\n".join(out)


# ---- MkDocs events --------------------------------------------------------------------------------------------

GENERATORS: dict[str, Callable[[], str]] = {
    "settings": settings_reference,
    "cli": cli_reference,
    "openapi": openapi_reference,
}


def on_files(files: Files, config: Any) -> Files:
    """Publish eval/README.md (outside docs/) as a page of its own."""
    files.append(File.generated(config, EVAL_SUITE, abs_src_path=str(ROOT / "eval" / "README.md")))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Replace each `<!-- generated: NAME -->` block with the reference NAME, written from the code now."""

    def generate(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in GENERATORS:
            raise PluginError(f"{page.file.src_uri}: no generator named {name!r} (known: {', '.join(GENERATORS)})")
        return GENERATORS[name]()

    return BLOCK.sub(generate, markdown)
