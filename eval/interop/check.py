"""Load mentor's exports with the real DeepEval and RAGAS and write what came out as JSON.

Run with the interpreter of the isolated venv (eval/interop/env.py) and the checkout on PYTHONPATH, so that
`mentor.interop` is imported without mentor's own dependencies:

    PYTHONPATH=. "$(python eval/interop/env.py python)" eval/interop/check.py \
        --deepeval deepeval.jsonl --ragas ragas.jsonl --ragas-multiturn ragas-multiturn.jsonl --out summary.json

tests/test_eval_interop.py runs it on a fresh export and asserts on the summary. Offline: only metrics that need
no LLM are scored (RAGAS' id-based context precision/recall and tool-call accuracy).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

# Set before the tools are imported: neither may phone home from a test run.
os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "1")
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
warnings.simplefilter("ignore", DeprecationWarning)  # ragas 0.4 warns on its own metric imports

from mentor.interop import deepeval_dataset, deepeval_test_cases, ragas_dataset, read_records  # noqa: E402


def check_deepeval(path: Path) -> dict[str, Any]:
    from deepeval.dataset import EvaluationDataset
    from deepeval.test_case import LLMTestCase, ToolCall

    records = read_records(path)
    plain_failures = []
    for record in records:
        try:
            LLMTestCase(**record)
        except (TypeError, ValueError):
            plain_failures.append(record["name"])
    cases = deepeval_test_cases(records)
    goldens = EvaluationDataset()
    goldens.add_goldens_from_jsonl_file(str(path))  # DeepEval's own loader, default key names
    with tempfile.TemporaryDirectory() as tmp:
        array = Path(tmp) / "records.json"  # add_test_cases_from_json_file reads one JSON array
        array.write_text(json.dumps(records), encoding="utf-8")
        from_json = EvaluationDataset()
        from_json.add_test_cases_from_json_file(
            str(array),
            input_key_name="input",
            actual_output_key_name="actual_output",
            expected_output_key_name="expected_output",
            retrieval_context_key_name="retrieval_context",
            tools_called_key_name="tools_called",
            expected_tools_key_name="expected_tools",
        )
    return {
        "records": len(records),
        "plain_llm_test_case_failures": plain_failures,
        "test_cases": [
            {
                "name": case.name,
                "input": case.input,
                "actual_output": case.actual_output,
                "expected_output": case.expected_output,
                "retrieval_context": len(case.retrieval_context or []),
                "tools_called": [[t.name, t.input_parameters] for t in case.tools_called or []],
                "expected_tools": [[t.name, t.input_parameters] for t in case.expected_tools or []],
                "tool_objects": all(
                    isinstance(t, ToolCall) for t in (case.tools_called or []) + (case.expected_tools or [])
                ),
                "metadata": case.metadata,
            }
            for case in cases
        ],
        "dataset_test_cases": len(deepeval_dataset(records).test_cases),
        "goldens_from_jsonl": len(goldens.goldens),
        "golden_tool_calls": sum(len(g.tools_called or []) for g in goldens.goldens),
        "test_cases_from_json_file": len(from_json.test_cases),
        "json_file_tool_calls": sum(len(c.tools_called or []) for c in from_json.test_cases),
    }


def check_ragas(single: Path, multi: Path) -> dict[str, Any]:
    from ragas import EvaluationDataset, evaluate
    from ragas.metrics import IDBasedContextPrecision, IDBasedContextRecall, ToolCallAccuracy

    single_turn = ragas_dataset(read_records(single))
    multi_turn = ragas_dataset(read_records(multi))
    context = evaluate(
        single_turn, metrics=[IDBasedContextPrecision(), IDBasedContextRecall()], show_progress=False
    ).to_pandas()
    tools = evaluate(multi_turn, metrics=[ToolCallAccuracy()], show_progress=False).to_pandas()
    return {
        "single_turn": {
            "samples": len(single_turn),
            "multi_turn": single_turn.is_multi_turn(),
            "from_jsonl": len(EvaluationDataset.from_jsonl(str(single))),
            "references": sum(s.reference is not None for s in single_turn),
            "context_precision": [_score(v) for v in context["id_based_context_precision"]],
            "context_recall": [_score(v) for v in context["id_based_context_recall"]],
        },
        "multi_turn": {
            "samples": len(multi_turn),
            "multi_turn": multi_turn.is_multi_turn(),
            "from_jsonl": len(EvaluationDataset.from_jsonl(str(multi))),
            "messages": [[type(m).__name__ for m in s.user_input] for s in multi_turn],
            "reference_tool_calls": [[[c.name, c.args] for c in s.reference_tool_calls or []] for s in multi_turn],
            "tool_call_accuracy": [_score(v) for v in tools["tool_call_accuracy"]],
        },
    }


def _score(value: Any) -> float | None:
    return None if value is None or value != value else float(value)  # NaN: the metric had nothing to score


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deepeval", type=Path, required=True)
    parser.add_argument("--ragas", type=Path, required=True)
    parser.add_argument("--ragas-multiturn", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    summary = {"deepeval": check_deepeval(args.deepeval), **check_ragas(args.ragas, args.ragas_multiturn)}
    args.out.write_text(json.dumps(summary, indent=1, ensure_ascii=False, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
