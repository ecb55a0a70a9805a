"""Golden set -> answers through the HTTP API -> deterministic metrics -> report; the threshold gate for CI.

In order: `load_golden` the cases of a split; `run_in_process` them (or `run_cases` with any httpx client, e.g.
one pointed at a deployment); `compute_metrics`; `write_report`; `check_thresholds` for the CI verdict.

Names resolve lazily (PEP 562): `run_in_process` needs the whole app (Chroma, the embedder), while an export of
an existing report needs only the runner's records, and must not pay seconds of imports for the rest.
"""

from importlib import import_module
from typing import Any

_HOMES = {
    "EXPORT_FORMATS": "export",
    "export_records": "export",
    "CATEGORIES": "golden",
    "Case": "golden",
    "Expect": "golden",
    "GoldenInfo": "golden",
    "golden_info": "golden",
    "load_golden": "golden",
    "corpus_settings": "inprocess",
    "in_process_client": "inprocess",
    "run_in_process": "inprocess",
    "METRICS": "metrics",
    "compute_metrics": "metrics",
    "judge": "metrics",
    "pii_leaks": "metrics",
    "write_report": "report",
    "CaseResult": "runner",
    "fetch_stored_rows": "runner",
    "run_cases": "runner",
    "check_thresholds": "thresholds",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{_HOMES[name]}"), name)
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return __all__
