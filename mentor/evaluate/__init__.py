"""Golden set -> answers through the HTTP API -> deterministic metrics -> report; the threshold gate for CI.

In order: `load_golden` the cases of a split; `run_in_process` them (or `run_cases` with any httpx client, e.g.
one pointed at a deployment); `compute_metrics`; `write_report`; `check_thresholds` for the CI verdict.
"""

from mentor.evaluate.golden import CATEGORIES, Case, Expect, GoldenInfo, golden_info, load_golden
from mentor.evaluate.inprocess import corpus_settings, in_process_client, run_in_process
from mentor.evaluate.metrics import METRICS, compute_metrics, judge, pii_leaks
from mentor.evaluate.report import export_records, write_report
from mentor.evaluate.runner import CaseResult, fetch_stored_rows, run_cases
from mentor.evaluate.thresholds import check_thresholds

__all__ = [
    "CATEGORIES",
    "METRICS",
    "Case",
    "CaseResult",
    "Expect",
    "GoldenInfo",
    "check_thresholds",
    "compute_metrics",
    "corpus_settings",
    "export_records",
    "fetch_stored_rows",
    "golden_info",
    "in_process_client",
    "judge",
    "load_golden",
    "pii_leaks",
    "run_cases",
    "run_in_process",
    "write_report",
]
