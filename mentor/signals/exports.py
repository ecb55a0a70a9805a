"""Exports in the formats analysts' tools read: CSV, JSON lines and xAPI 1.0.3 statements."""

from __future__ import annotations

import csv
import io
import json
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

XAPI_VERSION = "1.0.3"
ASKED = {"id": "http://adlnet.gov/expapi/verbs/asked", "display": {"en-US": "asked"}}
STATEMENT_NAMESPACE = uuid.UUID("6b0f3c1e-9a57-4f3e-8d3b-3a0b6f2b9c11")  # stable statement ids across exports
CSV_COLUMNS = [
    "question_id",
    "created_at",
    "learner",
    "conversation_id",
    "module_id",
    "module_version",
    "section_id",
    "text",
    "redactions",
    "style",
    "channel",
    "engine",
    "model",
    "prompt_version",
    "out_of_scope",
    "coverage",
    "grounded",
    "answer",
    "relevance",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "fallback_reason",
    "cited_sections",
    "tools",
    "feedback",
    "read_as",  # added last (migration 0004), so a spreadsheet reading columns by position still finds the others
    "lti_context",  # migration 0005: the LTI course, pseudonymised
]
FORMATS = ("csv", "jsonl", "xapi")
# A spreadsheet opening a CSV runs a cell that starts with one of these as a formula (tab and carriage return are
# dropped first, then what follows is read): OWASP's CSV-injection list. Learners write the question text.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
MEDIA_TYPES = {"csv": "text/csv", "jsonl": "application/x-ndjson", "xapi": "application/x-ndjson"}


def export_lines(rows: Iterable[dict[str, Any]], fmt: str, *, home_page: str) -> Iterator[str]:
    """Yield the export as text pieces, one row at a time (so it can be streamed)."""
    if fmt == "csv":
        yield _csv_line(CSV_COLUMNS)
        for row in rows:
            yield _csv_line([neutralise_formula(_csv_value(row, column)) for column in CSV_COLUMNS])
    elif fmt == "jsonl":
        for row in rows:
            yield json.dumps(row, ensure_ascii=False) + "\n"
    else:
        for row in rows:
            yield json.dumps(xapi_statement(row, home_page=home_page), ensure_ascii=False) + "\n"


def _csv_line(values: list[Any]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer).writerow(values)
    return buffer.getvalue()


def neutralise_formula(value: Any) -> Any:
    """Quote a text cell a spreadsheet would run as a formula with a leading `'`; leave other values as they are."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def _csv_value(row: dict[str, Any], column: str) -> Any:
    if column == "cited_sections":
        return ";".join(row["section_ids"])
    if column == "tools":
        return ";".join(t["name"] for t in row["tool_calls"])
    if column == "feedback":
        return ";".join(f["rating"] for f in row["feedback"])
    if column == "redactions":
        return ";".join(row["redactions"])
    return row[column]


def xapi_statement(row: dict[str, Any], *, home_page: str) -> dict[str, Any]:
    """One xAPI 1.0.3 statement: the learner (an account) asked about a module section."""
    base = home_page.rstrip("/")
    section = row["section_id"] or "out-of-scope"
    extension = f"{base}/xapi/extensions"
    return {
        "id": str(uuid.uuid5(STATEMENT_NAMESPACE, row["question_id"])),
        "version": XAPI_VERSION,
        "actor": {"objectType": "Agent", "account": {"homePage": base, "name": row["learner"]}},
        "verb": ASKED,
        "object": {
            "objectType": "Activity",
            "id": f"{base}/modules/{row['module_id']}/sections/{section}",
            "definition": {
                "type": "http://adlnet.gov/expapi/activities/lesson",
                "name": {"en-US": f"{row['module_id']} § {section}"},
            },
        },
        "result": {"response": row["answer"]},
        "context": {
            "registration": str(uuid.UUID(row["conversation_id"])),
            "extensions": {
                f"{extension}/question": row["text"],
                # As mentor read it (null before it was recorded): tells an LRS a misreading from a module gap.
                f"{extension}/read-as": row["read_as"],
                f"{extension}/lti-context": row["lti_context"],
                f"{extension}/passages": row["passages"],
                f"{extension}/tools": row["tool_calls"],
                f"{extension}/grounding": {
                    "grounded": row["grounded"],
                    "unsupported_sentences": row["unsupported_sentences"],
                    "untraced_numbers": row["untraced_numbers"],
                },
                f"{extension}/engine": {
                    "engine": row["engine"],
                    "model": row["model"],
                    "prompt_version": row["prompt_version"],
                },
                f"{extension}/out-of-scope": row["out_of_scope"],
            },
        },
        "timestamp": row["created_at"],
    }
