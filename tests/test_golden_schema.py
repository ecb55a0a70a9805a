"""The answer-quality keys of the golden set (parts, verdict, coverage, repeat_ok) and the decision, partial and
neighbour categories: what load_golden accepts, and every problem it names with its line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mentor.errors import InvalidInput
from mentor.evaluate import load_golden
from mentor.evaluate.golden import match_text

from .conftest import CORPUS, MODULE_ID, ROOT

HEADER = json.dumps({"golden_version": "0.0.1"})
FIT = {"tool": "memory_fit", "tool_arguments": {"params": "7B", "gpu_memory_gb": 80}}


def line(case_id: str, category: str, expect: dict, turns: tuple[str, ...] = ("a question",)) -> str:
    return json.dumps(
        {
            "id": case_id,
            "category": category,
            "split": "dev",
            "module_id": MODULE_ID,
            "turns": list(turns),
            "expect": expect,
        }
    )


def write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "golden.jsonl"
    path.write_text("\n".join([HEADER, *lines]) + "\n")
    return path


def test_good_cases_load_and_keep_their_labels(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        line(
            "two-part",
            "concept",
            {"sections": ["ref-parallelism-zero"], "parts": [["stage 1 optimizer states"], ["stage 2 also gradients"]]},
        ),
        line("fit", "decision", {**FIT, "verdict": "no"}),
        line("half", "partial", {"sections": ["ref-mixed-precision"], "coverage": "partial"}),
        line("ring", "neighbour", {"out_of_scope": True}),
        line("again", "follow_up", {"repeat_ok": True}, turns=("what is zero?", "say that again?")),
    )
    cases = {c.id: c for c in load_golden(path, corpus_dirs={"default": CORPUS})}
    assert cases["two-part"].expect.parts == (("stage 1 optimizer states",), ("stage 2 also gradients",))
    assert cases["two-part"].expect.expected_coverage == "full"
    assert cases["fit"].expect.verdict == "no" and cases["half"].expect.expected_coverage == "partial"
    assert cases["ring"].expect.expected_coverage == "none" and cases["again"].expect.repeat_ok
    assert cases["fit"].to_dict()["expect"]["verdict"] == "no"
    assert cases["two-part"].to_dict()["expect"]["parts"] == [["stage 1 optimizer states"], ["stage 2 also gradients"]]
    assert "coverage" not in cases["fit"].to_dict()["expect"]  # written only when labelled


def test_every_problem_with_the_new_keys_is_named_with_its_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        line("d1", "decision", {"tool": "memory_fit", "tool_arguments": {"params": "7B", "gpu_memory_gb": 80}}),  # 2
        line("d2", "decision", {"verdict": "No"}),  # 3
        line("p1", "partial", {"sections": ["ref-mixed-precision"]}),  # 4
        line("n1", "neighbour", {}),  # 5
        line("c1", "concept", {"sections": ["ref-parallelism-zero"], "parts": [["Stage 2  also"], []]}),  # 6
        line("c2", "concept", {"sections": ["ref-parallelism-zero"], "parts": [["ring attention"]]}),  # 7
        line("c3", "concept", {"sections": ["overview"], "coverage": "some", "repeat_ok": True}),  # 8
        line("o1", "off_topic", {"out_of_scope": True, "parts": [["zero"]], "coverage": "full"}),  # 9
        line("c4", "concept", {"sections": ["overview"], "coverage": "none"}),  # 10
        line("i1", "injection", {"forbidden": ["PWNED"], "coverage": "full"}),  # 11
        line("f1", "follow_up", {"repeat_ok": "yes"}, turns=("a", "b")),  # 12
        line("c5", "concept", {"sections": ["overview"], "parts": "zero"}),  # 13
    )
    with pytest.raises(InvalidInput) as error:
        load_golden(path, corpus_dirs={"default": CORPUS})
    message = error.value.message
    expected = [
        "line 2: expect: a decision case needs the calculator (tool) and the verdict",
        "line 3: expect.verdict: must be a non-empty lowercase string",
        "line 3: expect: a decision case needs the calculator (tool) and the verdict",
        'line 4: expect.coverage: a partial case must expect "partial"',
        "line 5: expect.out_of_scope: must be true for neighbour cases",
        "line 6: expect.parts[0]: 'Stage 2  also' must be lowercase, single-spaced",
        "line 6: expect.parts[1]: must be a non-empty list of non-empty strings",
        f"line 7: expect.parts[0]: 'ring attention' is in no quotable sentence of {MODULE_ID}",
        "line 8: expect.coverage: must be one of full, partial, none (got 'some')",
        "line 8: expect.repeat_ok: only a follow_up case",
        "line 9: expect: an out-of-scope case has no parts or verdict, and coverage none",
        "line 10: expect.coverage: none is for out-of-scope cases",
        "line 11: expect.coverage: injection cases are not scored on coverage",
        "line 12: expect.repeat_ok: must be true or false",
        "line 13: expect.parts: must be a list of parts",
    ]
    for problem in expected:
        assert problem in message, problem
    assert message.count("line ") == len(expected), message


def test_match_text_is_how_labels_and_answers_are_compared() -> None:
    assert match_text("ZeRO  shards [1] the\noptimizer state. [2, 3]") == "zero shards the optimizer state."
    assert match_text("Stage 2 also gradients") == "stage 2 also gradients"


def test_the_poisoned_fixture_is_the_module_with_an_errata_section_appended() -> None:
    # The fixture was a copy of the module from before its glossary: poisoned cases then read "zero-2" as nothing
    # the module knew and refused it, measuring the copy's staleness, not the poison.
    module = (ROOT / "corpus/p10-llm-systems-frontier-02.md").read_text(encoding="utf-8")
    poisoned = (ROOT / "eval/fixtures/poisoned/p10-llm-systems-frontier-02.md").read_text(encoding="utf-8")
    assert poisoned.startswith(module.rstrip("\n")) and "{#errata}" in poisoned[len(module.rstrip("\n")) :]
