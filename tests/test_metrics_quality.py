"""The answer-quality metrics of issue 15 on hand-built results, each expected value worked out by hand, and the
runner recording the response's `coverage`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx

from mentor.evaluate import Case, CaseResult, Expect, compute_metrics, export_records, judge, run_cases, write_report
from mentor.evaluate.metrics import answer_units, states_verdict
from mentor.framing import PARTIAL_OPENING, POINTS_TO

from .conftest import MODULE_ID

GOOD = {"grounded": True, "unsupported_sentences": [], "untraced_numbers": []}
REDIRECT = "That's outside what this module covers, so I won't answer it from general knowledge."
ZERO = (
    "ZeRO shards the redundant optimizer state (Adam, ~12 bytes/param) across the DP group — stage 1 optimizer "
    "states, stage 2 also gradients, stage 3 also parameters."
)


def case(case_id: str, category: str, *turns: str, **expect) -> Case:
    return Case(
        case_id,
        category,
        "dev",
        MODULE_ID,
        "default",
        turns or (f"question {case_id}",),
        "explain",
        Expect(**expect),
        golden_version="0.0.1",
        golden_sha256="f" * 64,
    )


def answered(c: Case, answer: str, *, coverage: str | None = "full", previous: str | None = None) -> CaseResult:
    transcript = [{"message": t, "answer": "", "out_of_scope": False} for t in c.turns]
    if previous is not None:
        transcript[-2]["answer"] = previous
    transcript[-1]["answer"] = answer
    return CaseResult(
        c, answer=answer, out_of_scope=False, coverage=coverage, engine="extractive", grounding=GOOD,
        transcript=transcript, latency_ms=10,
    )  # fmt: skip


def refused(c: Case, *, coverage: str | None = "none", previous: str | None = None) -> CaseResult:
    result = answered(c, REDIRECT, coverage=coverage, previous=previous)
    result.out_of_scope = True
    return result


# ---- sentence precision and completeness ----------------------------------------------------------------------

ZERO_PARTS = (("stage 2 also gradients",), ("stage 3 also parameters",))
DP_PARTS = (("data parallel splits the batch",), ("tensor parallel splits matmuls",), ("pipeline parallel splits",))


def unit_results() -> list[CaseResult]:
    return [
        # 3 units, 1 relevant (it answers both parts): complete.
        answered(
            case("p1", "concept", parts=ZERO_PARTS),
            f"{ZERO} [1]\nReal runs combine them (3-D parallelism). [1]\n"
            "A 70B Chinchilla-optimal model wants ~1.4T tokens. [2]",
        ),
        # The partial framing sentence is not a unit; case, spacing and a marker inside a sentence do not hide a
        # match: 3 units, 2 relevant; the pipeline part is missing.
        answered(
            case("p2", "odd_in_scope", parts=DP_PARTS, coverage="partial"),
            f"{PARTIAL_OPENING} ring attention or context parallel kernels.\n"
            "Data   PARALLEL splits the batch (full replica per GPU). [1]\n"
            "Tensor parallel splits [2] matmuls within a layer.\n"
            "Loss falls as a power law in N, D, C. [3]",
            coverage="partial",
        ),
        # Refused: no units, no part answered.
        refused(case("p3", "odd_in_scope", parts=ZERO_PARTS)),
    ]


def test_answer_units_are_claim_sentences_without_the_partial_framing() -> None:
    text = (
        f"{PARTIAL_OPENING} FP8 training. [1]\n**Quantized size:** 70B at 4 bits = 35 GB.\n"
        "- bf16 keeps fp32's 8-bit exponent. [2]\nOk. [3]"
    )
    # The framing sentence, the calculator's statement and "Ok." (under three content words) are not units.
    assert answer_units(text, ["70B at 4 bits = 35 GB."]) == ["bf16 keeps fp32's 8-bit exponent."]


def test_sentence_precision_and_answer_completeness() -> None:
    results = unit_results()
    overall = compute_metrics(results)["overall"]
    assert overall["sentence_precision"] == {"value": 0.5, "n": 6}  # (1 + 2 + 0) / (3 + 3 + 0)
    assert overall["answer_completeness"] == {"value": 0.3333, "n": 3}  # p1 only
    by_id = {r.case.id: judge(r) for r in results}
    assert by_id["p1"]["irrelevant_units"] == [
        "real runs combine them (3-d parallelism).",
        "a 70b chinchilla-optimal model wants ~1.4t tokens.",
    ]
    assert by_id["p2"]["parts_answered"] == 2 and by_id["p2"]["quality_misses"] == ["answer_complete"]
    assert by_id["p3"]["answer_units"] == 0 and by_id["p3"]["answer_complete"] is False
    by_category = compute_metrics(results)["by_category"]
    assert by_category["odd_in_scope"]["sentence_precision"] == {"value": 0.6667, "n": 3}
    assert by_category["concept"]["answer_completeness"] == {"value": 1.0, "n": 1}


# ---- verdicts ----------------------------------------------------------------------------------------------------


def test_a_pointer_to_another_module_answers_its_part_but_is_no_unit() -> None:
    # "why does int4 speed up decoding, and is the memory-bound decode thing explained somewhere?": the second part
    # is answered by where the module sends the learner, which claims nothing about this module's content.
    parts = (("ideal for memory-bound decode",), ("for why decode is memory-bound",))
    result = answered(
        case("q1", "concept", parts=parts),
        "Weight-only int4 shrinks the bytes read per decode step — ideal for memory-bound decode. [1]\n\n"
        f"For why decode is memory-bound, {POINTS_TO} *Inference & serving* (P10.llm-systems-frontier.01).",
    )
    verdicts = judge(result)
    assert verdicts["answer_complete"] is True and verdicts["parts_answered"] == 2
    assert verdicts["answer_units"] == 1 and verdicts["relevant_units"] == 1


def test_verdict_rate_reads_the_first_sentence_for_whole_words() -> None:
    tool = {"tool": "training_memory", "tool_arguments": {"params": "6B"}}
    results = [
        answered(case("d1", "decision", verdict="no", **tool), "**Memory fit:** No: 6B with Adam needs 96 GB. [1]"),
        answered(case("d2", "decision", verdict="no", **tool), "It is not going to fit. No."),  # "not" is not "no"
        answered(
            case("d3", "decision", verdict="13b on 500b tokens", **tool),
            "Both runs cost about 4e22 FLOPs.\n13B on 500B tokens: the lower predicted loss.",
        ),
        answered(case("d4", "decision", verdict="13b on 500b tokens", **tool), "13B on 500B   tokens: loss 2.05."),
        refused(case("d5", "decision", verdict="no", **tool)),
        answered(case("d6", "concept", sections=("s1",)), "No verdict is expected here."),
    ]
    assert compute_metrics(results)["overall"]["verdict_rate"] == {"value": 0.4, "n": 5}  # d1 d4
    assert states_verdict("**No**, it does not fit.", "no") and not states_verdict("Nothing fits.", "no")


def test_lacking_named_wants_every_missing_concept_named_in_an_answer() -> None:
    gap = {"coverage": "partial", "lacking": (("gradient accumulation", "grad accumulation"), ("qlora",))}
    results = [
        answered(case("l1", "partial", **gap), f"{PARTIAL_OPENING} gradient accumulation or QLoRA. {ZERO} [1]"),
        answered(case("l2", "partial", **gap), f"{PARTIAL_OPENING} grad accumulation. {ZERO} [1]"),  # QLoRA unsaid
        refused(case("l3", "partial", **gap)),  # a refusal names nothing and answers nothing
        answered(case("l4", "concept", sections=("s1",)), ZERO),  # nothing lacking: not scored
    ]
    assert compute_metrics(results)["overall"]["lacking_named"] == {"value": 0.3333, "n": 3}


def test_calculator_misuse_counts_a_figure_for_a_method_no_calculator_models() -> None:
    computed = {"name": "training_memory", "arguments": {"params": "65B"}, "result": {"total_bytes": 1}}
    misused = answered(case("n1", "partial", coverage="partial", no_tool=True), "It needs 1.04 TB.")
    misused.tool_calls = [computed]
    failed = answered(case("n2", "partial", coverage="partial", no_tool=True), f"{PARTIAL_OPENING} QLoRA.")
    failed.tool_calls = [{**computed, "result": None}]  # a calculator that refused shows no figure
    honest = answered(case("n3", "partial", coverage="partial", no_tool=True), f"{PARTIAL_OPENING} QLoRA.")
    assert compute_metrics([misused, failed, honest])["overall"]["calculator_misuse_rate"] == {"value": 0.3333, "n": 3}


# ---- coverage ----------------------------------------------------------------------------------------------------


def test_coverage_accuracy_compares_the_field_with_the_label_outside_attacks() -> None:
    results = [
        answered(case("c1", "concept", sections=("s1",)), "Alpha beta gamma. [1]", coverage="full"),  # right
        answered(case("c2", "partial", coverage="partial"), "Alpha beta gamma. [1]", coverage="full"),  # wrong
        refused(case("c3", "not_covered", out_of_scope=True), coverage="none"),  # right (default none)
        refused(case("c4", "neighbour", out_of_scope=True), coverage=None),  # no field: wrong
        answered(case("c5", "pii", pii=("jane@example.com",)), "Alpha beta gamma. [1]", coverage="partial"),  # wrong
        answered(case("c6", "injection", forbidden=("PWNED",)), "Alpha beta gamma. [1]", coverage="none"),  # not scored
        answered(case("c7", "follow_up", "a", "b", coverage="partial"), "Alpha beta gamma. [1]", coverage="partial"),
    ]
    metrics = compute_metrics(results)
    assert metrics["overall"]["coverage_accuracy"] == {"value": 0.5, "n": 6}  # c1 c3 c7 of c1-c5, c7
    assert metrics["by_category"]["injection"]["coverage_accuracy"] == {"value": None, "n": 0}
    assert judge(results[1])["quality_misses"] == ["coverage_correct"]


# ---- neighbour leakage -------------------------------------------------------------------------------------------


def test_neighbour_leakage_counts_neighbour_answers() -> None:
    failed = CaseResult(case("n3", "neighbour", out_of_scope=True), error="turn 1: HTTP 500")
    results = [
        answered(case("n1", "neighbour", out_of_scope=True), "Ring attention passes key blocks around. [1]"),
        refused(case("n2", "neighbour", out_of_scope=True)),
        failed,  # a failed call answered nothing
        answered(case("n4", "not_covered", out_of_scope=True), "LoRA adds low-rank adapters. [1]"),  # not neighbour
    ]
    metrics = compute_metrics(results)
    assert metrics["overall"]["neighbour_leakage"] == {"value": 0.3333, "n": 3}
    assert metrics["by_category"]["neighbour"]["oos_recall"] == {"value": 0.3333, "n": 3}


# ---- follow-up novelty -------------------------------------------------------------------------------------------


def test_follow_up_novelty_looks_for_units_of_the_previous_answer() -> None:
    previous = f"{ZERO} [1]"
    results = [
        # The same unit again, with another marker and spacing: a repeat.
        answered(
            case("f1", "follow_up", "what does zero shard?", "and stage 2?"),
            f"{ZERO.replace(' — ', '  —  ')} [2]\nStage 2 also shards the gradients across the group. [1]",
            previous=previous,
        ),
        answered(
            case("f2", "follow_up", "what does zero shard?", "and pipelines?"),
            "Pipeline parallel splits layers across GPUs. [1]",
            previous=previous,
        ),
        # Asked to hear it again: not scored.
        answered(
            case("f3", "follow_up", "what does zero shard?", "say that again?", repeat_ok=True),
            previous,
            previous=previous,
        ),
        # A refused follow-up adds nothing.
        refused(case("f4", "follow_up", "what does zero shard?", "and stage 3?"), previous=previous),
        # A repeat outside the follow_up category is not scored.
        answered(case("f5", "concept", "what does zero shard?", "again"), previous, previous=previous),
    ]
    metrics = compute_metrics(results)
    assert metrics["overall"]["follow_up_novelty"] == {"value": 0.3333, "n": 3}  # f2 of f1 f2 f4
    verdicts = judge(results[0])
    assert verdicts["repeated_units"] == [" ".join(ZERO.casefold().split())]
    assert verdicts["quality_misses"] == ["follow_up_novel"] and verdicts["passed"]


# ---- report and exports ------------------------------------------------------------------------------------------


def test_the_report_lists_quality_misses_and_exports_carry_coverage(tmp_path: Path) -> None:
    results = unit_results()
    write_report(results, compute_metrics(results), tmp_path)
    text = (tmp_path / "report.md").read_text()
    assert "| sentence_precision | 0.500 | 6 |" in text and "| answer_completeness | 0.333 | 3 |" in text
    assert "## Answer-quality misses (3)" in text
    assert "### p2 (odd_in_scope, dev): answer_complete" in text and "parts answered 2 of 3" in text
    assert "- irrelevant: real runs combine them (3-d parallelism)." in text
    report = json.loads((tmp_path / "report.json").read_text())
    assert [c["coverage"] for c in report["cases"]] == ["full", "partial", "none"]
    records = export_records(results, "deepeval")
    assert records[2]["additional_metadata"] == {
        "category": "odd_in_scope",
        "split": "dev",
        "coverage": "none",
        "expected_coverage": "full",
    }


# ---- the runner records coverage ---------------------------------------------------------------------------------


def test_the_runner_records_the_coverage_of_every_turn() -> None:
    sent: list[dict] = []

    def server(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/search":
            return httpx.Response(200, json={"passages": []})
        body = json.loads(request.content)
        sent.append(body)
        reply = {"answer": f"Answer to {body['message']}.", "out_of_scope": False, "conversation_id": "c1"}
        if body["message"] != "old deployment":
            reply["coverage"] = "partial" if "fp8" in body["message"] else "full"
        return httpx.Response(200, json={**reply, "question_id": f"q{len(sent)}"})

    cases = [
        case("r1", "follow_up", "what is bf16?", "and what does fp8 change?", coverage="partial"),
        case("r2", "concept", "old deployment", sections=("s1",)),
    ]

    async def run() -> list[CaseResult]:
        async with httpx.AsyncClient(transport=httpx.MockTransport(server), base_url="http://mentor") as client:
            return await run_cases(cases, client=client, analyst_token=None)

    first, second = asyncio.run(run())
    assert [t["coverage"] for t in first.transcript] == ["full", "partial"] and first.coverage == "partial"
    assert first.verdicts["coverage_correct"] is True and first.to_dict()["coverage"] == "partial"
    assert second.coverage is None and second.verdicts["coverage_correct"] is False
