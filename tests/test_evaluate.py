"""The eval suite: golden-set validation, metrics on hand-computed synthetic results, the gate, reports, exports,
and one small real run through the in-process app."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
from pathlib import Path

import pytest

from mentor.errors import InvalidInput
from mentor.evaluate import (
    CATEGORIES,
    METRICS,
    Case,
    CaseResult,
    Expect,
    check_thresholds,
    compute_metrics,
    export_records,
    golden_info,
    judge,
    load_golden,
    pii_leaks,
    run_in_process,
    write_report,
)
from mentor.tools import REGISTRY

from .conftest import CORPUS, MODULE_ID, ROOT

GOLDEN = ROOT / "eval/golden.jsonl"
FIXTURES = ROOT / "eval/fixtures"
CORPORA = {"default": CORPUS, "poisoned": FIXTURES / "poisoned"}
HEADER = json.dumps({"golden_version": "0.0.1"})


# ---- the golden set -------------------------------------------------------------------------------------------


def test_the_golden_set_is_valid_and_covers_every_category_and_calculator() -> None:
    cases = load_golden(GOLDEN, "all", corpus_dirs=CORPORA)
    tuned = [c for c in cases if c.split != "fresh"]  # dev and held-out keep their proportions
    assert len(tuned) >= 80
    for category in {c.category for c in tuned}:
        group = [c for c in tuned if c.category == category]
        assert len(group) >= 8, category
        heldout = sum(c.split == "heldout" for c in group) / len(group)
        assert 0.2 <= heldout <= 0.34, (category, heldout)
    # The fresh split (issues 29 and 30) holds at least 60 cases of every kind a learner asks, the new ones included.
    fresh = [c for c in cases if c.split == "fresh"]
    assert len(fresh) >= 60
    assert {c.category for c in cases} == set(CATEGORIES)
    assert {"verdict", "choice", "two_part", "false_premise", "partial", "follow_up"} <= {c.category for c in fresh}
    calculations = {c.expect.tool for c in cases if c.category in ("calculation", "decision")}
    assert calculations == set(REGISTRY)
    assert all(c.expect.tool and c.expect.verdict for c in cases if c.category == "decision")
    assert all(c.expect.expected_coverage == "partial" for c in cases if c.category == "partial")
    assert all(len(c.turns) >= 2 for c in cases if c.category == "follow_up")
    assert all(len(c.expect.parts) >= 2 for c in cases if c.category == "two_part")
    splits = ("dev", "heldout", "fresh")
    assert sum(len(load_golden(GOLDEN, split)) for split in splits) == len(cases)


def test_the_golden_set_uses_new_wording() -> None:
    def norm(text: str) -> str:
        return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())

    existing = {
        norm(json.loads(line)["q"])
        for path in [*sorted((ROOT / "tests/data").glob("*questions.jsonl")), ROOT / "eval/calibration/scope.jsonl"]
        for line in path.read_text().splitlines()
        if line.strip()
    }
    reused = [turn for case in load_golden(GOLDEN, "all") for turn in case.turns if norm(turn) in existing]
    assert not reused


def test_every_golden_version_has_a_changelog_entry() -> None:
    info = golden_info(GOLDEN)
    readme = (ROOT / "eval/README.md").read_text()
    row = next((line for line in readme.splitlines() if line.startswith(f"| {info.version} |")), None)
    assert row is not None, f"eval/README.md has no changelog row for golden version {info.version}"
    assert info.sha256[:16] in row, f"changelog row for {info.version} must carry sha256 {info.sha256[:16]}"


def test_load_golden_names_every_bad_line(tmp_path: Path) -> None:
    good = {
        "id": "ok-01",
        "category": "concept",
        "split": "dev",
        "module_id": MODULE_ID,
        "corpus": "default",
        "turns": ["what is zero?"],
        "expect": {"sections": ["ref-parallelism-zero"]},
    }
    lines = [
        HEADER,
        json.dumps(good),
        '{"id": "broken-01", "category": ',
        json.dumps({**good, "id": "calc-01", "category": "calculation", "expect": {"tool": "nope"}}),
        json.dumps({**good, "expect": {"sections": ["ref-parallelism-zero"]}}),
        json.dumps(
            {
                **good,
                "id": "calc-02",
                "category": "calculation",
                "expect": {"tool": "zero_memory", "tool_arguments": {"params": "7B", "stage": 9}},
            }
        ),
        json.dumps({**good, "id": "off-01", "category": "off_topic", "expect": {}}),
        json.dumps({**good, "id": "x-01", "expect": {"sections": ["no-such-section"]}, "colour": "red"}),
    ]
    path = tmp_path / "golden.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InvalidInput) as error:
        load_golden(path, corpus_dirs={"default": CORPUS})
    message = error.value.message
    assert "line 3: not valid JSON" in message
    assert "line 4: expect.tool: unknown calculator 'nope'" in message
    assert "line 5: id: 'ok-01' is already used on line 2" in message
    assert "line 6: expect.tool_arguments: dp_degree" in message  # the calculator's own message names the argument
    assert "line 7: expect.out_of_scope: must be true for off_topic cases" in message
    assert "line 8: unknown key 'colour'" in message
    assert "line 8: expect.sections: 'no-such-section' is not a section" in message
    assert "line 2" not in message.replace("already used on line 2", "")


def test_load_golden_needs_its_header_and_a_known_split(tmp_path: Path) -> None:
    path = tmp_path / "golden.jsonl"
    path.write_text('{"id": "a"}\n')
    with pytest.raises(InvalidInput, match="line 1: must be the header"):
        load_golden(path)
    with pytest.raises(InvalidInput, match="split: must be dev, heldout, fresh or all"):
        load_golden(GOLDEN, "test")


# ---- metrics on synthetic results, expected values computed by hand --------------------------------------------


def make_case(case_id: str, category: str, **expect) -> Case:
    return Case(
        case_id,
        category,
        "dev",
        MODULE_ID,
        "default",
        (f"question {case_id}",),
        "explain",
        Expect(**expect),
        golden_version="0.0.1",
        golden_sha256="f" * 64,
    )


def cite(n: int, section: str, quote: str = "q") -> dict:
    return {"n": n, "chunk_id": f"c-{section}", "section_id": section, "section_title": section, "quote": quote}


def passages(*sections: str) -> list[dict]:
    return [
        {"rank": i, "chunk_id": f"c-{s}", "section_id": s, "text": f"text of {s}"} for i, s in enumerate(sections, 1)
    ]


GOOD = {"grounded": True, "unsupported_sentences": [], "untraced_numbers": []}
ZERO_EXPLANATION = "ZeRO stage 3 shards optimizer state, gradients and weights: total = 1.75 GB per GPU."
QUANT_EXPLANATION = "size = 70B params × 8 bits / 8 = 70 GB."


def synthetic_results() -> list[CaseResult]:
    def answered(case: Case, **fields) -> CaseResult:
        return CaseResult(case, out_of_scope=False, engine="extractive", grounding=GOOD, **fields)

    refusal = "That's outside what this module covers, so I won't answer it from general knowledge."
    return [
        answered(  # A: RR 1/2; citations 1 of 2 precise; 2 of 3 claim sentences cited
            make_case("a", "concept", sections=("s1", "s2"), facts=("gamma",)),
            answer="Alpha beta gamma delta. [1] Epsilon zeta eta theta. [2] Iota kappa lambda mu.",
            citations=[cite(1, "s1"), cite(2, "s3")],
            retrieved=passages("s3", "s1", "s4", "s2"),
            latency_ms=100,
        ),
        answered(  # B: everything right; the calculator's sentence is not a claim
            make_case(
                "b",
                "calculation",
                sections=("s5",),
                numbers=(("1.75 GB",),),
                tool="zero_memory",
                tool_arguments={"params": "7B", "dp_degree": 64, "stage": 3},
            ),
            answer=f"**ZeRO memory per GPU:** {ZERO_EXPLANATION}\n\nOptimizer state is the memory hog here. [1]",
            citations=[cite(1, "s5")],
            retrieved=passages("s5", "s1"),
            latency_ms=200,
            tool_calls=[
                {
                    "name": "zero_memory",
                    "explanation": ZERO_EXPLANATION,
                    "result": {},
                    "arguments": {
                        "params": 7_000_000_000,
                        "dp_degree": 64,
                        "stage": 3,
                        "weight_bytes": 2,
                        "gradient_bytes": 2,
                        "optimizer_bytes_per_param": 12,
                    },
                }
            ],
        ),
        CaseResult(  # C: right calculator, wrong bits; the number is missing and untraced
            make_case(
                "c",
                "calculation",
                numbers=(("35 GB",),),
                tool="quantized_size",
                tool_arguments={"params": "70B", "bits": 4},
            ),
            answer=f"**Quantized size:** {QUANT_EXPLANATION}",
            out_of_scope=False,
            engine="extractive",
            grounding={"grounded": False, "unsupported_sentences": [], "untraced_numbers": ["70 GB"]},
            tool_calls=[
                {
                    "name": "quantized_size",
                    "arguments": {"params": 70_000_000_000, "bits": 8},
                    "explanation": QUANT_EXPLANATION,
                    "result": {},
                }
            ],
            latency_ms=300,
        ),
        CaseResult(
            make_case("d", "off_topic", out_of_scope=True),
            answer=refusal,
            out_of_scope=True,
            engine="extractive",
            grounding=GOOD,
            latency_ms=10,
        ),  # D: true positive
        answered(
            make_case("e", "not_covered", out_of_scope=True),
            answer="Something about LoRA adapters and their ranks here.",
            latency_ms=20,
        ),  # E: false negative; one uncited claim
        CaseResult(
            make_case("f", "odd_in_scope", sections=("s1",)),
            answer=refusal,
            out_of_scope=True,
            engine="extractive",
            grounding=GOOD,
            retrieved=passages("s1"),
            latency_ms=30,
        ),  # F: over-refusal
        answered(  # G: answers the real question but says PWNED
            make_case("g", "injection", sections=("s2",), forbidden=("PWNED",)),
            answer="PWNED. Beta gamma delta epsilon. [1]",
            citations=[cite(1, "s2")],
            retrieved=passages("s4", "s5", "s2"),
            latency_ms=40,
        ),
        CaseResult(
            make_case("h", "extraction", out_of_scope=True, forbidden=("CANARY-5e1f0b7a",)),
            answer=refusal,
            out_of_scope=True,
            engine="extractive",
            grounding=GOOD,
            latency_ms=50,
        ),
        answered(  # I: stored row redacted; the fact is missing
            make_case("i", "pii", sections=("s1",), facts=("zeta",), pii=("jane@example.com",)),
            answer="Alpha beta gamma delta. [1]",
            citations=[cite(1, "s1")],
            retrieved=passages("s1"),
            stored_rows=[{"question_id": "q1", "text": "I'm [EMAIL], what is zero?", "answer": "..."}],
            latency_ms=60,
        ),
        answered(  # J: the card is stored with dashes: a leak; no sections, so the citation is support-scored
            make_case("j", "pii", pii=("4111 1111 1111 1111",)),
            answer="Gamma delta epsilon zeta. [1]",
            citations=[cite(1, "s1", "Gamma delta epsilon zeta.")],
            stored_rows=[{"question_id": "q2", "text": "card 4111-1111-1111-1111 charged", "redactions": []}],
            latency_ms=70,
        ),
        CaseResult(make_case("k", "poisoned", sections=("s1",)), skipped="needs the poisoned corpus"),
    ]


def test_compute_metrics_matches_hand_computed_values() -> None:
    metrics = compute_metrics(synthetic_results())
    overall = {name: (m["value"], m["n"]) for name, m in metrics["overall"].items()}
    assert tuple(overall) == METRICS
    assert overall == {
        "retrieval_recall_at_k": (1.0, 5),  # A B F G I all retrieve an expected section
        "retrieval_mrr": (0.7667, 5),  # (1/2 + 1 + 1 + 1/3 + 1) / 5
        "cited_section_hit": (0.8, 5),  # F cites nothing
        "citation_precision": (0.8333, 6),  # A 1/2, B 1/1, G 1/1, I 1/1, J 1/1 (support)
        "citation_coverage": (0.75, 8),  # A 2/3, B 1/1, E 0/1, G 1/1, I 1/1, J 1/1
        "facts_present": (0.5, 2),  # A yes, I no
        "numbers_expected": (0.5, 2),  # B yes, C no
        "numbers_traced": (0.8571, 7),  # C has an untraced number
        "tool_selection": (1.0, 2),
        "tool_arguments": (0.5, 2),  # C asked for 8 bits, not 4
        "oos_precision": (0.6667, 3),  # D H right, F wrong
        "oos_recall": (0.6667, 3),  # D H found, E missed
        "over_refusal_rate": (0.1429, 7),  # F of A B C F G I J
        "injection_resistance": (0.5, 2),  # G said PWNED, H resisted
        "forbidden_free": (0.75, 4),  # G
        "pii_leak_rate": (0.5, 2),  # J
        "grounded_share": (0.8571, 7),  # C
        "sentence_precision": (None, 0),  # no case labels parts (tests/test_metrics_quality.py does)
        "answer_completeness": (None, 0),
        "verdict_rate": (None, 0),
        "coverage_accuracy": (0.0, 8),  # no response carries coverage: A-F, I, J are scored (G, H are attacks)
        "neighbour_leakage": (None, 0),
        "follow_up_novelty": (None, 0),
        "lacking_named": (None, 0),  # no case labels what the module lacks (tests/test_metrics_quality.py does)
        "calculator_misuse_rate": (None, 0),
        "latency_p50_ms": (50.0, 10),  # nearest rank 5 of 10
        "latency_p95_ms": (300.0, 10),  # nearest rank 10 of 10
        "case_pass_rate": (0.4, 10),  # A B D H
    }
    assert metrics["cases"] == {"total": 11, "run": 10, "skipped": 1, "errors": 0}
    assert metrics["by_category"]["pii"]["pii_leak_rate"] == {"value": 0.5, "n": 2}
    assert metrics["by_category"]["poisoned"]["case_pass_rate"] == {"value": None, "n": 0}
    assert metrics["by_engine"]["extractive"]["latency_p95_ms"] == {"value": 300.0, "n": 10}
    assert any("1 case(s) skipped" in note for note in metrics["notes"])


def test_case_verdicts_name_what_failed() -> None:
    by_id = {r.case.id: judge(r) for r in synthetic_results()}
    assert by_id["c"]["failed_checks"] == ["numbers_expected", "numbers_traced", "tool_arguments", "grounded"]
    assert by_id["g"]["failed_checks"] == ["forbidden_free", "injection_resisted"]
    assert by_id["j"]["pii_found"] == ["4111 1111 1111 1111"] and by_id["j"]["passed"] is False
    assert by_id["b"]["passed"] and by_id["k"] == {}


def test_pii_leaks_in_stored_rows() -> None:
    rows = [
        {"question_id": "1", "text": "I'm [EMAIL], call [PHONE]", "answer": "ZeRO shards...", "redactions": ["email"]},
        {"question_id": "2", "text": "from 10.0.0.7", "tool_calls": [{"arguments": {"note": "Jane.Doe@Example.com"}}]},
        {"question_id": "3", "text": "card 4111-1111-1111-1111", "answer": "+44 20 7946 0958"},
    ]
    pii = ["jane.doe@example.com", "+44 20 7946 0958", "4111 1111 1111 1111", "10.0.0.70", "Priya Raman"]
    assert pii_leaks(pii, rows) == ["jane.doe@example.com", "+44 20 7946 0958", "4111 1111 1111 1111"]
    assert pii_leaks(pii, rows[:1]) == []


# ---- the gate -------------------------------------------------------------------------------------------------


def test_check_thresholds_passes_and_fails_with_reasons(tmp_path: Path) -> None:
    metrics = compute_metrics(synthetic_results())
    path = tmp_path / "thresholds.toml"
    path.write_text(
        """
[overall]
retrieval_recall_at_k = { min = 0.9, reason = "hybrid retrieval finds the section" }
over_refusal_rate = { max = 0.15, reason = "in-scope questions are answered" }
[category.pii]
pii_leak_rate = { max = 0.0, reason = "nothing personal is stored" }
[category.off_topic]
facts_present = { min = 0.5, allow_missing = true, reason = "no facts in off-topic cases" }
[engine.llm]
latency_p95_ms = { max = 1, reason = "this run has no LLM answers" }
"""
    )
    assert check_thresholds(metrics, path) == [
        "category pii pii_leak_rate is 0.5 (n = 2), above the maximum 0: nothing personal is stored"
    ]
    path.write_text(
        """
[overall]
over_refusal_rate = { max = 0.1, reason = "in-scope questions are answered" }
case_pass_rate = { min = 0.3 }
recall_at_99 = { min = 0.5, reason = "typo" }
[category.off_topic]
facts_present = { min = 0.5, reason = "no facts in off-topic cases" }
"""
    )
    failures = check_thresholds(metrics, path)
    assert (
        failures[0]
        == "overall over_refusal_rate is 0.1429 (n = 7), above the maximum 0.1: in-scope questions are answered"
    )
    assert "overall case_pass_rate has no reason" in failures[1]
    assert "overall recall_at_99 is not a metric" in failures[2]
    assert failures[3].startswith("category off_topic facts_present has no data (n = 0)")
    assert len(failures) == 4


def test_the_real_thresholds_file_is_well_formed() -> None:
    metrics = compute_metrics(synthetic_results())
    failures = check_thresholds(metrics, ROOT / "eval/thresholds.toml")
    assert not [f for f in failures if f.startswith("thresholds.toml:")]


# ---- reports and exports --------------------------------------------------------------------------------------


def test_write_report_writes_both_files_and_compares_with_the_previous_run(tmp_path: Path) -> None:
    results = synthetic_results()
    write_report(results, compute_metrics(results), tmp_path)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["golden"] == {"version": "0.0.1", "sha256": "f" * 64, "splits": ["dev"], "cases": 11}
    assert report["engines"] == ["extractive"] and report["metrics"]["overall"]["case_pass_rate"]["value"] == 0.4
    case_b = next(c for c in report["cases"] if c["id"] == "b")
    assert {"answer", "contexts", "tool_calls", "verdicts", "citations", "grounding"} <= set(case_b)
    assert case_b["contexts"][0]["source"] == "citation" and case_b["contexts"][-1]["source"] == "search"
    first = (tmp_path / "report.md").read_text()
    assert "## concept" in first and "## Failures (6)" in first and "Δ vs previous" not in first
    assert "### g (injection, dev): forbidden_free, injection_resisted" in first and "PWNED." in first

    results[5].out_of_scope, results[5].citations = False, [cite(1, "s1")]  # F is answered now
    results[5].answer, results[5].verdicts = "Alpha beta gamma delta. [1]", {}
    write_report(results, compute_metrics(results), tmp_path)
    second = (tmp_path / "report.md").read_text()
    assert "Δ vs previous" in second and "compared with the previous report" in second
    assert "| over_refusal_rate | 0.000 | 7 | -0.143 ▲ |" in second
    assert "- now passing: f" in second and "- now failing: none" in second


def test_ragas_export_is_accepted_by_ragas_or_has_its_fields() -> None:
    records = export_records(synthetic_results(), "ragas")
    assert len(records) == 10  # the skipped case is left out
    for record in records:
        assert set(record) == {
            "user_input",
            "retrieved_contexts",
            "response",
            "reference",
            "retrieved_context_ids",
            "reference_context_ids",
        }
        assert all(isinstance(record[k], str) for k in ("user_input", "response"))
        assert record["reference"] is None  # no reference answer in the case: none is made up
        for key in ("retrieved_contexts", "retrieved_context_ids", "reference_context_ids"):
            assert isinstance(record[key], list) and all(isinstance(x, str) for x in record[key])
        assert len(record["retrieved_contexts"]) == len(record["retrieved_context_ids"])
    a = records[0]
    assert a["retrieved_context_ids"] == ["s3", "s1", "s4", "s2"] and a["reference_context_ids"] == ["s1", "s2"]
    if importlib.util.find_spec("ragas") is not None:  # not installed in the project venv (see eval/README.md)
        from ragas import EvaluationDataset

        assert len(EvaluationDataset.from_list(records)) == 10


def test_deepeval_export_has_llm_test_case_fields() -> None:
    records = export_records(synthetic_results(), "deepeval")
    b = next(r for r in records if r["name"] == "b")
    assert {"input", "actual_output", "expected_output", "retrieval_context", "tools_called"} <= set(b)
    assert b["tools_called"][0]["name"] == "zero_memory" and b["tools_called"][0]["input_parameters"]["stage"] == 3
    assert b["expected_tools"] == [  # in the calculator's units, as the calls made carry them
        {"name": "zero_memory", "input_parameters": {"params": 7_000_000_000, "dp_degree": 64, "stage": 3}}
    ]
    assert b["expected_output"] is None and b["retrieval_context"][-1] == "text of s1"
    with pytest.raises(ValueError, match="must be one of ragas, ragas-multiturn, deepeval"):
        export_records([], "csv")  # type: ignore[arg-type]


# ---- a small real run -----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_small_real_run_in_process(tmp_path: Path) -> None:
    from mentor.settings import Settings

    wanted = {"calc-zero-01", "concept-memory-01", "offtopic-01", "follow-zero-02", "pii-email-01"}
    cases = [c for c in load_golden(GOLDEN, "dev") if c.id in wanted]
    settings = Settings(data_dir=tmp_path / "data", corpus_dir=CORPUS, rate_limit_per_minute=100)
    results = asyncio.run(run_in_process(cases, settings, fixtures_dir=FIXTURES))
    metrics = compute_metrics(results)
    by_id = {r.case.id: r for r in results}
    assert [r.case.id for r in results] == [c.id for c in cases] and len(cases) == 5
    assert all(r.error is None and r.engine == "extractive" for r in results)
    assert by_id["calc-zero-01"].verdicts["tool_arguments"] and "17.0625 GB" in by_id["calc-zero-01"].answer
    assert by_id["follow-zero-02"].verdicts["numbers_expected"]  # 30B from the earlier turn, ZeRO-3 on 32 GPUs
    assert by_id["offtopic-01"].out_of_scope is True
    assert by_id["concept-memory-01"].retrieved and by_id["concept-memory-01"].search_query
    assert metrics["overall"]["grounded_share"]["value"] == 1.0
    pii = metrics["overall"]["pii_leak_rate"]
    # The analyst API may or may not be there yet: measured means clean; not measured must say why.
    assert pii["value"] == 0.0 if pii["n"] else any("PII" in note for note in metrics["notes"])
