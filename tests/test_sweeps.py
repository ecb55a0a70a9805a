"""Robustness sweeps (mentor/evaluate/sweeps.py): the generator, and today's engine against the targets."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from dataclasses import replace

import pytest
from typer.testing import CliRunner
from wordfreq import zipf_frequency

from mentor.cli import SWEEP_SEED, app
from mentor.evaluate.golden import Case, load_golden
from mentor.evaluate.sweeps import (
    ABBREVIATED_FREQUENCY,
    CHATTER_TEMPLATES,
    DEFAULT_SEED,
    EDGE_PUNCTUATION,
    KINDS,
    OFF_TOPIC_QUESTIONS,
    ORDER_TEMPLATES,
    QWERTY_NEIGHBOURS,
    SWEPT_CATEGORIES,
    VARIANT_KINDS,
    Variant,
    covered,
    format_table,
    generate_variants,
    run_sweeps,
    same_section,
    sweep_cases,
)
from mentor.evaluate.sweeps import Reading as SweepReading

from .conftest import MODULE_ID, ROOT

ORDER_WORDS = ("bypass", "override", "ignore", "pretend", "forget", "act as", "acting as", "disregard", "skip", "rules")
# What the next engine must reach (see the brief of the sweeps); today's engine misses some of them.
SAME_SECTION_MIN = 0.95
FLAGGED_MAX = 0.02
COVERED_REFUSED_MAX = 0.02


@pytest.fixture(scope="module")
def dev_cases() -> list[Case]:
    return load_golden(ROOT / "eval" / "golden.jsonl", "dev")


@pytest.fixture(scope="module")
def variants(dev_cases: list[Case]) -> list[Variant]:
    return generate_variants(dev_cases, DEFAULT_SEED)


def of_kind(variants: list[Variant], kind: str) -> list[Variant]:
    return [variant for variant in variants if variant.kind == kind]


def core(token: str) -> tuple[str, str, str]:
    """A token split into its leading punctuation, its word and its trailing punctuation."""
    word = token.strip(EDGE_PUNCTUATION)
    lead = token[: len(token) - len(token.lstrip(EDGE_PUNCTUATION))]
    return lead, word, token[len(lead) + len(word) :]


def one_slip(word: str, wrong: str) -> bool:
    """Whether `wrong` is `word` with one neighbouring key, one letter dropped, or two adjacent letters swapped."""
    if len(wrong) == len(word) - 1:
        return any(word[:i] + word[i + 1 :] == wrong for i in range(len(word)))
    if len(wrong) != len(word):
        return False
    diff = [i for i in range(len(word)) if word[i] != wrong[i]]
    if len(diff) == 1:
        i = diff[0]
        return wrong[i].lower() in QWERTY_NEIGHBOURS[word[i].lower()] and wrong[i].isupper() == word[i].isupper()
    return (
        len(diff) == 2 and diff[1] == diff[0] + 1 and (word[diff[0]], word[diff[1]]) == (wrong[diff[1]], wrong[diff[0]])
    )


def test_the_swept_cases_are_single_turn_in_scope_dev_cases(dev_cases: list[Case]) -> None:
    swept = sweep_cases(dev_cases)
    assert len(swept) >= 100
    assert {case.category for case in swept} == set(SWEPT_CATEGORIES)
    assert all(len(case.turns) == 1 and not case.expect.out_of_scope and case.split == "dev" for case in swept)
    with pytest.raises(ValueError, match="dev split only"):
        sweep_cases([*dev_cases[:3], replace(dev_cases[0], split="heldout")])


def test_variants_are_the_same_for_a_seed_and_differ_across_seeds(dev_cases: list[Case], variants) -> None:
    assert generate_variants(dev_cases, DEFAULT_SEED) == variants
    assert generate_variants(dev_cases, DEFAULT_SEED + 1) != variants
    assert SWEEP_SEED == DEFAULT_SEED  # the CLI's default, written out so that parsing imports nothing


def test_every_kind_rewrites_every_case_it_can(dev_cases: list[Case], variants: list[Variant]) -> None:
    swept = sweep_cases(dev_cases)
    counts = Counter(variant.kind for variant in variants)
    assert set(counts) == set(KINDS)
    for kind in ("shorthand", "order_words", "chatter"):
        assert counts[kind] == len(swept)
    # A typo needs a word of four letters or more: "bf16?" has none.
    assert len(swept) - 5 <= counts["typo"] < len(swept)
    questions = {case.question for case in swept}
    for variant in variants:
        if variant.kind != "topic_switch":
            assert variant.text != variant.bare and variant.bare in questions
    for kind in VARIANT_KINDS:  # one variant per case
        assert len({variant.case_id for variant in of_kind(variants, kind)}) == counts[kind]


def test_a_typo_is_one_keyboard_slip_in_one_or_two_long_words(variants: list[Variant]) -> None:
    hows = Counter()
    for variant in of_kind(variants, "typo"):
        assert variant.bare is not None
        before, after = variant.bare.split(), variant.text.split()
        assert len(before) == len(after)
        changed = [(b, a) for b, a in zip(before, after, strict=True) if b != a]
        assert 1 <= len(changed) <= 2 and len(changed) == variant.note.count("->")
        for source, typed in changed:
            lead, word, trail = core(source)
            assert len(word) >= 4 and word.isascii() and word.isalpha(), source
            assert typed.startswith(lead) and typed.endswith(trail)
            assert one_slip(word, typed[len(lead) : len(typed) - len(trail)]), (source, typed)
        hows.update(re.findall(r"(neighbour|drop|swap):", variant.note))
    assert set(hows) == {"neighbour", "drop", "swap"}


def test_an_abbreviation_drops_the_vowels_of_common_words_only(variants: list[Variant]) -> None:
    abbreviated = of_kind(variants, "abbreviated")
    assert len(abbreviated) >= 100
    for variant in abbreviated:
        assert variant.bare is not None
        before, after = variant.bare.split(), variant.text.split()
        changed = [(b, a) for b, a in zip(before, after, strict=True) if b != a]
        assert changed and len(changed) == variant.note.count("->")
        for source, typed in changed:
            lead, word, trail = core(source)
            short = typed[len(lead) : len(typed) - len(trail)]
            assert zipf_frequency(word, "en") >= ABBREVIATED_FREQUENCY and word.islower(), source
            assert short == word[0] + "".join(ch for ch in word[1:] if ch not in "aeiou") != word
            assert len(short) >= 3


def test_the_keyboard_map_is_symmetric() -> None:
    assert set(QWERTY_NEIGHBOURS) == set("abcdefghijklmnopqrstuvwxyz")
    for key, neighbours in QWERTY_NEIGHBOURS.items():
        assert all(key in QWERTY_NEIGHBOURS[other] for other in neighbours), key


def test_shorthand_drops_apostrophes_and_final_punctuation_and_shortens(variants: list[Variant]) -> None:
    shortened = of_kind(variants, "shorthand")
    for variant in shortened:
        assert "'" not in variant.text and "’" not in variant.text
        assert not variant.text.endswith(("?", ".", "!"))
    words = Counter(word for variant in shortened for word in variant.text.split())
    assert all(words[short] > 0 for short in ("u", "r", "y", "n", "w/", "pls", "whats"))
    assert Counter(variant.note for variant in shortened).keys() == {"casing: lower", "casing: caps"}


def test_templates_keep_the_question_text(variants: list[Variant]) -> None:
    assert len(ORDER_TEMPLATES) >= 10 and len(CHATTER_TEMPLATES) >= 10
    assert all(template.count("{q}") == 1 for template in (*ORDER_TEMPLATES, *CHATTER_TEMPLATES))
    for word in ORDER_WORDS:
        assert any(word in template.lower() for template in ORDER_TEMPLATES), word
    for kind, templates in (("order_words", ORDER_TEMPLATES), ("chatter", CHATTER_TEMPLATES)):
        for variant in of_kind(variants, kind):
            assert variant.note in templates and variant.text == variant.note.replace("{q}", variant.bare or "")


def test_topic_switches_pair_a_covered_question_with_an_off_topic_or_unrelated_one(
    dev_cases: list[Case], variants: list[Variant]
) -> None:
    assert len(OFF_TOPIC_QUESTIONS) >= 25 and len(set(OFF_TOPIC_QUESTIONS)) == len(OFF_TOPIC_QUESTIONS)
    by_question = {case.question: case for case in sweep_cases(dev_cases)}
    switches = of_kind(variants, "topic_switch")
    off_topic = [v for v in switches if v.must_refuse]
    bare = [v for v in off_topic if v.note == "off-topic"]
    chatted = [v for v in off_topic if v.note != "off-topic"]
    assert bare and all(v.text in OFF_TOPIC_QUESTIONS and v.bare is None for v in bare)
    assert len(chatted) == len(bare) and all(v.note in CHATTER_TEMPLATES and v.bare is None for v in chatted)
    assert all(any(v.text == v.note.replace("{q}", q) for q in OFF_TOPIC_QUESTIONS) for v in chatted)
    assert all(covered(by_question[v.before or ""]) for v in switches)
    unrelated = [v for v in switches if not v.must_refuse]
    assert unrelated and all(v.bare == v.text for v in unrelated)
    for v in unrelated:
        first, second = by_question[v.before or ""], by_question[v.text]
        assert covered(second) and not set(first.expect.sections) & set(second.expect.sections)
    assert sum(len(v.text.split()) <= 8 for v in unrelated) >= 0.9 * len(unrelated)


def test_eval_sweep_takes_the_dev_split_only() -> None:
    result = CliRunner().invoke(app, ["eval", "sweep", "--split", "heldout"])
    assert result.exit_code == 2 and "'heldout' is not one of dev" in result.output


def test_sweeps_meet_the_targets(runtime, dev_cases: list[Case]) -> None:
    report = asyncio.run(run_sweeps(runtime.chat, dev_cases, module_id=MODULE_ID, seed=DEFAULT_SEED))
    misses = []
    for kind in VARIANT_KINDS:
        summary = report.kind(kind)
        if summary.n == 0 or (summary.same_section or 0) < SAME_SECTION_MIN:
            misses.append(f"{kind}: same_section {summary.same_section} < {SAME_SECTION_MIN}")
        if (summary.flagged or 0) > FLAGGED_MAX:
            misses.append(f"{kind}: flagged {summary.flagged} > {FLAGGED_MAX}")
    switch = report.kind("topic_switch")
    if switch.offtopic_n == 0 or switch.offtopic_answered:
        misses.append(f"topic_switch: {switch.offtopic_answered} of {switch.offtopic_n} off-topic turns answered")
    if switch.covered_n == 0 or (switch.covered_refused or 0) > COVERED_REFUSED_MAX:
        misses.append(f"topic_switch: covered_refused {switch.covered_refused} > {COVERED_REFUSED_MAX}")
    assert not misses, "\n".join(misses) + "\n\n" + format_table(report)


def test_a_variant_answered_where_its_bare_question_is_refused_is_judged_by_the_sections_the_case_expects() -> None:
    """Every swept question is in scope: a rewrite answered from an expected section, where the bare question is
    refused, made nothing worse (before, it counted as moved); answered from another section, it did."""
    refused, answered = SweepReading(True, (), False), SweepReading(False, ("why-it-matters",), False)
    assert same_section(answered, refused, ("concept", "why-it-matters"))
    assert not same_section(answered, refused, ("ref-quantization",))
    assert not same_section(answered, refused)  # no expectation to judge by: refused iff the bare one was
    assert same_section(refused, refused, ("concept",))
