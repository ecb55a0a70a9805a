"""Starter questions (mentor/starters.py): made from a module's own headings, the ones naming its topics first, with
no module's words in the code; served on GET /v1/modules for the box."""

from __future__ import annotations

from pathlib import Path

from mentor.corpus import parse_module
from mentor.starters import STARTERS, TEMPLATE, starters, subject_of

from .conftest import MODULE_ID, ROOT

SECOND = """---
module_id: T.starters.01
title: Baking bread
prerequisites: []
topics:
  - sourdough starters
  - oven temperature
---

# Baking bread {#overview}

Bread is flour, water, salt and time.

## Why bake at home {#why}

It tastes better.

## 1 — Keeping a sourdough starter alive (s3) {#sourdough}

Feed it daily.

## Kneading by hand {#kneading}

Fold and push.

## Oven temperature and steam {#oven}

Start hot, then lower the heat.
"""


def second_module():
    return parse_module(SECOND, Path("T.starters.01.md"))


def test_the_headings_naming_the_topics_come_first_in_reading_order() -> None:
    found = starters(second_module())
    assert [s.section_id for s in found] == ["why", "sourdough", "oven"]  # two topics' headings, then the first other
    assert found[1].question == TEMPLATE.format(subject="keeping a sourdough starter alive")
    assert found[2].question == "What should I understand about oven temperature and steam?"
    assert found[1].section_title == "1 — Keeping a sourdough starter alive (s3)"


def test_a_module_without_topics_offers_its_first_sections() -> None:
    bare = parse_module(SECOND.replace("topics:\n  - sourdough starters\n  - oven temperature\n", ""), Path("x.md"))
    assert [s.section_id for s in starters(bare)] == ["why", "sourdough", "kneading"]
    assert all(s.section_id != "overview" for s in starters(bare))  # the module's own title is no starter


def test_a_subject_keeps_names_and_loses_numbering_and_codes() -> None:
    assert subject_of("2 — Mixed-precision training (q22)") == "mixed-precision training"
    assert subject_of("ZeRO stages") == "ZeRO stages"
    assert subject_of("3. Mixture of experts (MoE)") == "mixture of experts (MoE)"  # no digit: part of the subject
    assert subject_of("GPU memory:") == "GPU memory"


def test_the_code_holds_no_module_text() -> None:
    code = (ROOT / "mentor/starters.py").read_text()
    for word in ("ZeRO", "precision", "Chinchilla", "scaling", "parallelism", "Training at scale"):
        assert word not in code, word


def test_modules_lists_three_starters_from_the_real_modules_topic_headings(client, runtime) -> None:
    (module,) = client.get("/v1/modules").json()
    assert module["id"] == MODULE_ID
    offered = module["starters"]
    assert len(offered) == STARTERS
    titles = {s.id: s.title for s in runtime.modules[MODULE_ID].sections}
    for starter in offered:
        assert subject_of(titles[starter["section_id"]]) in starter["question"]
    assert [s["section_id"] for s in offered] == ["ref-parallelism-zero", "ref-mixed-precision", "ref-scaling-laws"]


def test_a_starter_asked_is_answered_from_the_module(client) -> None:
    (module,) = client.get("/v1/modules").json()
    for starter in module["starters"]:
        answer = client.post("/v1/chat", json={"module_id": MODULE_ID, "message": starter["question"]}).json()
        assert not answer["out_of_scope"] and answer["citations"], (starter, answer["answer"])
