"""Load `mentor eval export` records into DeepEval and RAGAS objects.

Only the standard library is imported here; DeepEval or RAGAS is imported when a loader is called. So this module
also works where only the eval tool is installed and mentor's own dependencies are not (ragas and mentor want
different `openai` majors): put the checkout on PYTHONPATH or `pip install --no-deps` it there.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deepeval.dataset import EvaluationDataset as DeepEvalDataset
    from deepeval.test_case import LLMTestCase
    from ragas import EvaluationDataset as RagasDataset


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """Read a JSON-lines export (one record per line; blank lines ignored)."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def deepeval_test_cases(records: Iterable[Mapping[str, Any]]) -> list[LLMTestCase]:
    """Build DeepEval `LLMTestCase`s from `deepeval` export records, tool calls as `ToolCall` objects."""
    from deepeval.test_case import LLMTestCase, ToolCall

    cases = []
    for index, record in enumerate(records):
        if "input" not in record or "actual_output" not in record:
            raise ValueError(f"record {index}: not a deepeval export record (no input / actual_output)")
        # LLMTestCase(**record) refuses plain dicts for the tool lists: it wants ToolCall objects.
        fields = dict(record)
        for key in ("tools_called", "expected_tools"):
            if fields.get(key) is not None:
                fields[key] = [ToolCall(**call) for call in fields[key]]
        cases.append(LLMTestCase(**fields))
    return cases


def deepeval_dataset(records: Iterable[Mapping[str, Any]]) -> DeepEvalDataset:
    """A DeepEval `EvaluationDataset` holding one test case per `deepeval` export record."""
    from deepeval.dataset import EvaluationDataset

    dataset = EvaluationDataset()
    for case in deepeval_test_cases(records):
        dataset.add_test_case(case)
    return dataset


def ragas_dataset(records: Iterable[Mapping[str, Any]]) -> RagasDataset:
    """A RAGAS `EvaluationDataset` from `ragas` (single-turn) or `ragas-multiturn` export records."""
    from ragas import EvaluationDataset

    # The records are already in RAGAS' own shape; this only spares the caller the import.
    return EvaluationDataset.from_list([dict(record) for record in records])
