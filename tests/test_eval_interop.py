"""Eval interop through the real tools: the dev split is run against a live mentor over HTTP, exported, and
loaded by DeepEval and RAGAS (in the isolated venv of eval/interop/env.py, pinned in eval/interop/requirements.txt);
promptfoo (eval/promptfoo, from npm) runs the same cases through /v1/chat/completions. Each tool's reading of a
case is compared with mentor's own verdicts on it, so a shape that loads but means something else fails too.

The isolated environments are built once and cached (.ci/run builds them before the tests; built here otherwise,
which takes minutes): neither fits in the project venv (ragas wants openai < 3).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mentor.api import create_app
from mentor.evaluate import EXPORT_FORMATS, Case, CaseResult, Expect, export_records, load_golden, run_cases
from mentor.framing import REDIRECT_OPENINGS

from .chat_helpers import serve
from .conftest import MODULE_ID, ROOT, UNLIMITED, make_settings

ENV_SCRIPT = ROOT / "eval/interop/env.py"
CHECK_SCRIPT = ROOT / "eval/interop/check.py"
PROMPTFOO_CONFIG = ROOT / "eval/promptfoo/promptfooconfig.yaml"
BUILD_TIMEOUT_S = 1800  # a cold build measured 3 min (venv) and 2.5 min (promptfoo) on a busy 2-core machine


# ---- the export shapes, by hand ---------------------------------------------------------------------------------

FIRST, SECOND = "zero stage 2 for a 7B model on 32 gpus?", "and with stage 3?"
ZERO_CALL = {
    "name": "zero_memory",
    "arguments": {"params": 7_000_000_000, "dp_degree": 32, "stage": 3, "weight_bytes": 2},
    "result": {"total_bytes": 1_076_562_500},
    "explanation": "ZeRO stage 3 ...",
}


def follow_up(**expect: Any) -> CaseResult:
    case = Case(
        "follow-x", "follow_up", "dev", MODULE_ID, "default", (FIRST, SECOND), "explain",
        Expect(sections=("ref-parallelism-zero",), **expect), golden_version="0.0.1", golden_sha256="f" * 64,
    )  # fmt: skip
    return CaseResult(
        case,
        answer="Stage 3 shards the weights too: 1.08 GB per GPU. [1]",
        out_of_scope=False,
        coverage="full",
        citations=[{"n": 1, "chunk_id": "c2", "section_id": "ref-parallelism-zero", "quote": "ZeRO-3 shards weights."}],
        retrieved=[{"rank": 1, "chunk_id": "c1", "section_id": "one-liners", "text": "ZeRO shards state."}],
        tool_calls=[ZERO_CALL],
        transcript=[{"message": FIRST, "answer": "Stage 2: 17.06 GB per GPU. [1]"}, {"message": SECOND, "answer": ""}],
    )


def test_a_follow_up_is_a_ragas_conversation_with_its_tool_call() -> None:
    result = follow_up(tool="zero_memory", tool_arguments={"params": "7B", "dp_degree": 32, "stage": 3})
    (sample,) = export_records([result], "ragas-multiturn")
    assert sample["user_input"] == [
        {"type": "human", "content": FIRST},
        {"type": "ai", "content": "Stage 2: 17.06 GB per GPU. [1]"},
        {"type": "human", "content": SECOND},
        {"type": "ai", "content": "", "tool_calls": [{"name": "zero_memory", "args": ZERO_CALL["arguments"]}]},
        {"type": "tool", "content": '{"total_bytes": 1076562500}'},
        {
            "type": "ai",
            "content": result.answer,
            "metadata": {
                "retrieved_contexts": ["ZeRO-3 shards weights.", "ZeRO shards state."],
                "retrieved_context_ids": ["ref-parallelism-zero", "one-liners"],
            },
        },
    ]
    # "7B" in the calculator's own units, only the arguments the case names; no reference answer to invent.
    assert sample["reference_tool_calls"] == [
        {"name": "zero_memory", "args": {"params": 7_000_000_000, "dp_degree": 32, "stage": 3}}
    ]
    assert sample["reference"] is None
    (single,) = export_records([result], "ragas")
    assert single["user_input"] == f"{FIRST}\n{SECOND}" and single["reference"] is None
    assert single["retrieved_context_ids"] == ["ref-parallelism-zero", "one-liners"]


def test_single_turn_cases_are_not_multi_turn_samples_and_references_are_kept_when_given() -> None:
    result = follow_up(reference="Stage 3 needs about 1.08 GB per GPU.")
    result.tool_calls = []
    single_turn = CaseResult(dataclasses.replace(result.case, turns=(SECOND,)), answer="x")
    assert export_records([single_turn], "ragas-multiturn") == []
    (sample,) = export_records([result], "ragas-multiturn")
    assert [m["type"] for m in sample["user_input"]] == ["human", "ai", "human", "ai"]
    assert sample["reference"] == "Stage 3 needs about 1.08 GB per GPU." and sample["reference_tool_calls"] == []
    (record,) = export_records([result], "deepeval")
    assert record["expected_output"] == "Stage 3 needs about 1.08 GB per GPU." and record["expected_tools"] == []
    assert set(EXPORT_FORMATS) == {"ragas", "ragas-multiturn", "deepeval"}
    with pytest.raises(ValueError, match="must be one of ragas, ragas-multiturn, deepeval"):
        export_records([result], "csv")  # type: ignore[arg-type]


def test_the_loader_module_imports_without_the_eval_tools_or_mentor_dependencies(tmp_path: Path) -> None:
    # A bare interpreter (no site-packages) with only the checkout on the path: the stdlib is all it needs.
    code = "import mentor.interop as m; print(sorted(n for n in dir(m) if not n.startswith('_')))"
    done = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": str(ROOT)}
    )
    assert done.returncode == 0, done.stderr
    assert "deepeval_test_cases" in done.stdout and "ragas_dataset" in done.stdout


# ---- through the real tools -----------------------------------------------------------------------------------


def interop_tool(name: str) -> Path:
    """The cached isolated tool (`python` or `promptfoo`), built first if this machine has none yet."""
    done = subprocess.run(
        [sys.executable, str(ENV_SCRIPT), name], capture_output=True, text=True, timeout=BUILD_TIMEOUT_S
    )
    assert done.returncode == 0, f"eval/interop/env.py {name} failed:\n{done.stderr[-3000:]}"
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def live(tmp_path_factory, embedder) -> Iterator[tuple[str, Any]]:
    """A mentor of its own (its own index and signals database) served by uvicorn on a free port."""
    from mentor.runtime import build_runtime

    settings = make_settings(tmp_path_factory.mktemp("interop"), **UNLIMITED)
    runtime = build_runtime(settings, embedder=embedder)
    with serve(create_app(settings, runtime=runtime)) as url:
        yield url, runtime


@pytest.fixture(scope="module")
def results(live) -> list[CaseResult]:
    """The dev split asked over HTTP; poisoned cases come back skipped (they need the fixture corpus)."""
    url, runtime = live
    cases = load_golden(ROOT / "eval/golden.jsonl", "dev")

    async def run() -> list[CaseResult]:
        async with httpx.AsyncClient(base_url=url, timeout=120) as client:
            return await run_cases(cases, client=client, analyst_token=runtime.analyst_token)

    return asyncio.run(run())


@pytest.fixture(scope="module")
def exports(results, tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("exports")
    paths = {}
    for fmt in ("deepeval", "ragas", "ragas-multiturn"):
        paths[fmt] = out / f"{fmt}.jsonl"
        lines = [json.dumps(record, ensure_ascii=False) + "\n" for record in export_records(results, fmt)]
        paths[fmt].write_text("".join(lines), encoding="utf-8")
    return paths


@pytest.fixture(scope="module")
def loaded(exports, tmp_path_factory) -> dict[str, Any]:
    """What DeepEval and RAGAS made of the exports (eval/interop/check.py in the isolated venv)."""
    python = interop_tool("python")
    work = tmp_path_factory.mktemp("check")
    summary = work / "summary.json"
    command = [str(python), str(CHECK_SCRIPT), "--out", str(summary)]
    command += ["--deepeval", str(exports["deepeval"]), "--ragas", str(exports["ragas"])]
    command += ["--ragas-multiturn", str(exports["ragas-multiturn"])]
    # Only the checkout on the path: mentor.interop must load without mentor's own dependencies.
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(work), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, capture_output=True, text=True, cwd=work, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(summary.read_text())


def answered(results: list[CaseResult]) -> list[CaseResult]:
    return [r for r in results if r.skipped is None]


@pytest.mark.slow
def test_every_exported_record_becomes_a_deepeval_test_case(results, exports, loaded) -> None:
    kept = answered(results)
    records = [json.loads(line) for line in exports["deepeval"].read_text().splitlines()]
    deepeval = loaded["deepeval"]
    assert deepeval["records"] == len(records) == len(kept) >= 130
    # The problem the loader solves: LLMTestCase(**record) refuses every record with a tool call in it.
    with_tools = {r["name"] for r in records if r["tools_called"] or r["expected_tools"]}
    assert len(with_tools) >= 30 and set(deepeval["plain_llm_test_case_failures"]) == with_tools
    cases = deepeval["test_cases"]
    assert [c["name"] for c in cases] == [r.case.id for r in kept]
    for case, result in zip(cases, kept, strict=True):
        assert case["tool_objects"], case["name"]
        assert case["input"] == "\n".join(result.case.turns) and case["actual_output"] == result.answer
        assert case["tools_called"] == [[c["name"], c["arguments"]] for c in result.tool_calls]
        # No golden case has a reference answer: nothing for an LLM judge to score against.
        assert case["expected_output"] is None
        assert case["metadata"]["category"] == result.case.category
        assert case["metadata"]["coverage"] == result.coverage
        if result.verdicts.get("tool_arguments"):
            # Expected arguments in the calculator's units, so they equal the call's where mentor says they match.
            ((name, expected),) = case["expected_tools"]
            calls = [args for called, args in case["tools_called"] if called == name]
            assert any(all(args.get(k) == v for k, v in expected.items()) for args in calls), case["name"]
    # DeepEval's EvaluationDataset, and its own file loaders on the same export.
    assert deepeval["dataset_test_cases"] == len(records)
    assert deepeval["goldens_from_jsonl"] == deepeval["test_cases_from_json_file"] == len(records)
    calls = sum(len(r["tools_called"]) for r in records)
    assert deepeval["golden_tool_calls"] == deepeval["json_file_tool_calls"] == calls > 0


@pytest.mark.slow
def test_a_report_exports_the_same_records_as_the_run(results, exports, tmp_path) -> None:
    # What `mentor eval export --from-report DIR` writes is what the tools were shown to load above.
    from mentor.evaluate import compute_metrics, write_report
    from mentor.evaluate.report import read_results

    write_report(results, compute_metrics(results), tmp_path)
    again = read_results(tmp_path, ROOT / "eval/golden.jsonl")
    for fmt, path in exports.items():
        assert export_records(again, fmt) == [json.loads(line) for line in path.read_text().splitlines()], fmt


@pytest.mark.slow
def test_ragas_loads_single_and_multi_turn_samples_and_scores_them_offline(results, loaded) -> None:
    kept = answered(results)
    single = loaded["single_turn"]
    assert single["samples"] == single["from_jsonl"] == len(kept) and single["multi_turn"] is False
    assert single["references"] == 0  # no generated reference sentence
    for result, recall in zip(kept, single["context_recall"], strict=True):
        if result.verdicts["retrieval_hit"]:
            assert recall is not None and recall > 0, result.case.id  # the same section ids on both sides

    follow_ups = [r for r in kept if len(r.case.turns) > 1]
    multi = loaded["multi_turn"]
    assert multi["samples"] == multi["from_jsonl"] == len(follow_ups) >= 10 and multi["multi_turn"] is True
    for result, messages, reference, accuracy in zip(
        follow_ups, multi["messages"], multi["reference_tool_calls"], multi["tool_call_accuracy"], strict=True
    ):
        assert messages.count("HumanMessage") == len(result.case.turns), result.case.id
        assert messages.count("ToolMessage") == len(result.tool_calls)
        assert messages[0] == "HumanMessage" and messages[-1] == "AIMessage"
        assert [name for name, _ in reference] == ([result.case.expect.tool] if result.case.expect.tool else [])
        if result.verdicts.get("tool_arguments"):
            assert accuracy == 1.0, result.case.id  # RAGAS' ToolCallAccuracy agrees with mentor's verdict
    assert any(r.tool_calls for r in follow_ups)


@pytest.mark.slow
def test_promptfoo_runs_the_golden_set_through_the_openai_route(live, results, tmp_path) -> None:
    url, _ = live
    promptfoo = interop_tool("promptfoo")
    out = tmp_path / "promptfoo.json"
    env = {
        **os.environ,
        "MENTOR_URL": url,
        "MENTOR_GOLDEN_SPLIT": "dev",
        "PROMPTFOO_CONFIG_DIR": str(tmp_path / "promptfoo-home"),
        "PROMPTFOO_DISABLE_TELEMETRY": "1",
        "PROMPTFOO_DISABLE_UPDATE": "1",
    }
    command = [str(promptfoo), "eval", "-c", str(PROMPTFOO_CONFIG), "-o", str(out)]
    command += ["--no-cache", "--no-write", "--no-table", "--no-progress-bar"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
    # promptfoo exits 100 when some assertion failed; the cases are compared with mentor's verdicts below.
    assert done.returncode in (0, 100), done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads(out.read_text())["results"]
    assert report["stats"]["errors"] == 0
    by_id = {r.case.id: r for r in results}
    rows = report["results"]
    assert sorted(row["testCase"]["description"] for row in rows) == sorted(
        r.case.id for r in results if r.case.corpus == "default" and r.case.style == "explain"
    )
    agreements = {"scope": "scope_correct", "coverage": "coverage_correct", "tool": "tool_selected"}
    agreements |= {"facts": "facts_present", "forbidden": "forbidden_free"}
    for row in rows:
        result = by_id[row["testCase"]["description"]]
        assert row["response"]["metadata"]["mentor"]["module_id"] == result.case.module_id
        passed: dict[str, bool] = {}
        for component in row["gradingResult"]["componentResults"]:
            metric = component["assertion"]["metric"]
            passed[metric] = passed.get(metric, True) and component["pass"]
        if len(result.case.turns) > 1:
            continue  # promptfoo sends the earlier turns without their answers; mentor's run had them
        for metric, verdict in agreements.items():
            if result.verdicts.get(verdict) is not None:
                assert passed[metric] == result.verdicts[verdict], (result.case.id, metric)
        if result.verdicts.get("numbers_expected"):
            assert passed["numbers"], result.case.id


@pytest.mark.slow
def test_promptfoos_own_openai_provider_asks_mentor_as_a_model(live, tmp_path) -> None:
    # The stock provider keeps only the message text (so the golden config uses the http provider), but it must
    # work as with any OpenAI-compatible server: base URL, any key, the module id as the model.
    url, _ = live
    wanted = {"calc-zero-01", "offtopic-01"}
    cases = {c.id: c for c in load_golden(ROOT / "eval/golden.jsonl", "all") if c.id in wanted}
    config = {
        "prompts": ["{{ question }}"],
        "providers": [{"id": f"openai:chat:{MODULE_ID}", "config": {"apiBaseUrl": f"{url}/v1", "apiKey": "unused"}}],
        "tests": [
            {
                "description": "calc-zero-01",
                "vars": {"question": cases["calc-zero-01"].turns[-1]},
                "assert": [{"type": "contains-any", "value": list(cases["calc-zero-01"].expect.numbers[0])}],
            },
            {
                "description": "offtopic-01",
                "vars": {"question": cases["offtopic-01"].turns[-1]},
                "assert": [{"type": "starts-with", "value": REDIRECT_OPENINGS[1]}],
            },
        ],
    }
    (tmp_path / "openai.json").write_text(json.dumps(config))
    out = tmp_path / "out.json"
    command = [str(interop_tool("promptfoo")), "eval", "-c", "openai.json", "-o", str(out)]
    command += ["--no-cache", "--no-write", "--no-table", "--no-progress-bar"]
    env = {**os.environ, "PROMPTFOO_CONFIG_DIR": str(tmp_path / "home"), "PROMPTFOO_DISABLE_TELEMETRY": "1"}
    env.pop("OPENAI_API_KEY", None)
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    stats = json.loads(out.read_text())["results"]["stats"]
    assert (stats["successes"], stats["failures"], stats["errors"]) == (2, 0, 0)
