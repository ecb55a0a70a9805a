"""Text know-how: tokens, citation markers, sentence rules, the Markdown walker and quotable units."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mentor.corpus import chunk_module, load_corpus
from mentor.text import (
    ANSWER,
    CLAIMS,
    MODULE,
    ROUGH,
    blocks,
    cited,
    has_marker,
    prune_markers,
    rank_markers,
    split_sentences,
    split_units,
    strip_inline,
    strip_markers,
    tokenize,
)
from mentor.text.units import clauses

from .conftest import CORPUS

# ---- tokens -------------------------------------------------------------------------------------------------


def test_tokenize_keeps_numbers_and_drops_stopwords() -> None:
    assert tokenize("What is the int4 size of a 70B model?") == ["int4", "size", "70b", "model"]


def test_tokenize_joins_hyphens_and_meets_british_spelling() -> None:
    assert "overtrain" in tokenize("over-train smaller models")
    assert tokenize("quantisation") == tokenize("quantization") == ["quantiz"]


def test_tokenize_reads_a_comparative_as_its_adjective() -> None:
    # "why train a small model on more tokens?" is answered by "over-train smaller models ..."
    assert tokenize("smaller models") == tokenize("small model") == ["small", "model"]
    assert tokenize("the cheapest, fastest option") == tokenize("cheap fast option")
    assert tokenize("layer") == ["layer"]  # only the listed comparatives: "-er" is not cut from every word


# ---- markers ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("no markers", set()),
        ("shards it [1].", {1}),
        ("both [1, 3] and [2]", {1, 2, 3}),
        ("a range [2-4], a dash range [5–6], a list [7; 9]", {2, 3, 4, 5, 6, 7, 9}),
        ("[2020] is still read as a number", {2020}),
    ],
)
def test_cited_reads_lists_and_ranges(text: str, numbers: set[int]) -> None:
    assert cited(text) == numbers


def test_a_range_is_capped() -> None:
    assert cited("[1-99999]") == set(range(1, 52))


def test_strip_and_has_marker_take_lists_only_when_asked() -> None:
    text = "one [1], two [1, 2], none [x]"
    assert strip_markers(text) == "one , two , none [x]"
    assert strip_markers(text, " ", lists=False) == "one  , two [1, 2], none [x]"
    assert has_marker("only [1, 2]") and not has_marker("only [1, 2]", lists=False)
    assert has_marker("just [3]", lists=False) and not has_marker("[x] [ 1]")


def test_rank_markers_are_single_numbers_of_at_most_two_digits() -> None:
    text = "a [1] b [12] c [123] d [2020] e [1, 2] f [3] g [03]"
    assert rank_markers(text) == [1, 12, 3, 3]
    assert prune_markers(text, {1, 3}) == "a [1] b  c [123] d [2020] e [1, 2] f [3] g [03]"


@given(st.text(alphabet="[]0123456789,;- x", max_size=30))
def test_rank_markers_read_exactly_the_bracketed_one_or_two_digit_numbers(text: str) -> None:
    assert rank_markers(text) == [int(n) for n in re.findall(r"\[(\d{1,2})\]", text)]


# ---- sentences ----------------------------------------------------------------------------------------------


def test_answer_rules_keep_markers_and_closers_with_their_sentence() -> None:
    text = 'ZeRO shards it. [1] Stage 3 adds "parameters." [2, 3] (Stage 2 does not.) Done!'
    assert split_sentences(text) == [
        "ZeRO shards it. [1]",
        'Stage 3 adds "parameters." [2, 3]',
        "(Stage 2 does not.)",
        "Done!",
    ]


def test_answer_rules_skip_abbreviations() -> None:
    text = "Use bf16, e.g. on A100. Kaplan et al. 2020 disagree. fp16, bf16 etc. are formats. It ends etc. Next one."
    assert split_sentences(text, ANSWER) == [
        "Use bf16, e.g. on A100.",
        "Kaplan et al. 2020 disagree.",
        "fp16, bf16 etc. are formats.",
        "It ends etc.",
        "Next one.",
    ]


def test_claim_rules_know_four_abbreviations_and_comma_lists() -> None:
    assert split_sentences("See e.g. this. Or cf. that. [1-2] Then.", CLAIMS) == [
        "See e.g. this.",
        "Or cf.",
        "that.",
        "[1-2] Then.",
    ]
    assert split_sentences("One. [1, 2] Two.", CLAIMS) == ["One. [1, 2]", "Two."]


def test_module_rules_cut_only_before_a_word_and_after_a_bare_end_mark() -> None:
    # The extractive engine's cuts, kept as they are: "optimal." ends in "al." and so does not split.
    text = "ZeRO shards state. — it is optimal. Next, e.g. 7B. (See above.) Then `x`. *Bold* end."
    assert split_sentences(text, MODULE) == [
        "ZeRO shards state. — it is optimal. Next, e.g. 7B.",
        "(See above.) Then `x`.",
        "*Bold* end.",
    ]


def test_rough_rules_cut_at_every_end_mark_and_line_break() -> None:
    assert split_sentences("Use it, e.g. here [1]\nand there. [2]", ROUGH) == [
        "Use it, e.g.",
        "here [1]",
        "and there.",
        "[2]",
    ]


# ---- Markdown blocks ----------------------------------------------------------------------------------------

ANSWER_MARKDOWN = """## Memory {#memory}

The module works it out [2]:
continued here.

- first item
  wrapped
1. numbered

| Model | Memory |
|---|---|
| 7B | 84 GB |

> quoted text
---
```python
x = 1

```
"""


def test_blocks_read_answers_as_markdown() -> None:
    found = blocks(ANSWER_MARKDOWN)
    assert [(b.kind, b.text) for b in found] == [
        ("heading", "Memory"),
        ("paragraph", "The module works it out [2]: continued here."),
        ("item", "first item wrapped"),
        ("item", "numbered"),
        ("table", "Model | Memory"),
        ("table", "7B | 84 GB"),
        ("paragraph", "quoted text"),
        ("code", "x = 1"),
    ]
    items, rows = found[2:4], found[4:6]
    assert items[0].group == items[1].group != rows[0].group == rows[1].group
    assert items[0].lead_in == items[1].lead_in == 1  # the paragraph that leads into the list
    assert rows[0].lead_in is None and rows[1].cells == ("7B", "84 GB")
    assert found[2].after_blank and not found[3].after_blank


def test_a_fence_closes_only_on_its_own_characters() -> None:
    found = blocks("~~~\n```python\n# not a heading\n~~~\nafter")
    assert [(b.kind, b.text) for b in found] == [
        ("code", "```python"),
        ("code", "# not a heading"),
        ("paragraph", "after"),
    ]


def test_lenient_blocks_read_chunk_text_as_the_extractive_engine_does() -> None:
    text = "> a note\n1. numbered\n* * *\n~~~\n| | |\n| x | y |\n```\n```lang"
    assert [(b.kind, b.text) for b in blocks(text, lenient=True)] == [
        ("paragraph", "> a note 1. numbered"),
        ("item", "* * ~~~"),
        ("table", "x | y"),
    ]


def test_strip_inline_keeps_citation_links_as_markers() -> None:
    assert strip_inline("**ZeRO** shards [the state](#x) in `fp32` [2](#source-2), _all_ of it") == (
        "ZeRO shards the state in fp32 [2], all of it"
    )


# ---- quotable units -----------------------------------------------------------------------------------------


def test_units_of_the_worked_example_and_the_strategy_table() -> None:
    (module,) = load_corpus(CORPUS)
    texts = [u.text for c in chunk_module(module) for u in split_units(c.text)]
    assert "For a 7B model, that alone is: `optimizer state = 7e9 params * 12 bytes = 84 GB`" in texts
    assert "the optimizer state, not the weights, blows the memory budget" in texts
    assert (
        "Tensor parallel (TP) — what is split: matmuls within a layer; when it wins: a single layer is too big; "
        "keep on NVLink."
    ) in texts
    assert not any(t.startswith("Strategy —") for t in texts)  # the header row names columns, it is no unit
    assert "Optimizer state, not weights, is the memory hog." in " ".join(texts)


def test_units_merge_short_sentences_and_start_a_new_table_after_a_blank_line() -> None:
    text = (
        "Sharding splits the optimizer state across GPUs. FSDP is the same idea.\n\n| A | B |\n|---|---|\n\n"
        "```\n```\n\n| Stage | Shards |\n| ZeRO stage 3 | the parameters as well |"
    )
    units = split_units(text)
    assert [u.text for u in units] == [
        "Sharding splits the optimizer state across GPUs. FSDP is the same idea.",
        "ZeRO stage 3 — shards: the parameters as well.",
    ]
    assert [u.index for u in units] == [0, 1]


def test_clauses_of_a_list_sentence_and_of_a_table_row() -> None:
    listed = "GPTQ minimises output error via Hessian info; AWQ protects salient channels; both are post-training."
    assert clauses(listed) == [
        "GPTQ minimises output error via Hessian info",
        "AWQ protects salient channels",
        "both are post-training.",
    ]
    # A row's cells keep its first cell; "; scale throughput" has no column name, so it stays in its cell.
    assert clauses(
        "Data parallel (DP) — what is split: the batch (full replica per GPU); when it wins: model fits on one GPU; "
        "scale throughput."
    ) == [
        "Data parallel (DP) — what is split: the batch (full replica per GPU)",
        "Data parallel (DP) — when it wins: model fits on one GPU; scale throughput.",
    ]
    # Breaks inside brackets are not breaks, a short piece joins the one before, one claim is no list.
    assert clauses("fp16 has a narrow range — it needs loss scaling (multiply by S; unscale before the step).") == [
        "fp16 has a narrow range",
        "it needs loss scaling (multiply by S; unscale before the step).",
    ]
    assert clauses("Chinchilla ≈ 20 tokens/param; over-train.") == []
    assert clauses("Reference — resource: Frantar et al. (2022), GPTQ; Lin et al. (2023), AWQ.") == []


def test_a_chained_range_marker_reads_as_its_ends() -> None:
    # It crashed the grounding check with ValueError: an LLM answer with "[1-2-3]" cost the learner a 500.
    from mentor.text import cited

    assert cited("ZeRO shards optimizer state [1-2-3].") == {1, 2, 3}
    assert cited("[3-1]") == set()


def test_hyphenated_words_are_found_in_time_linear_in_a_long_word() -> None:
    """A 4,000-letter word (the message limit) took 0.2 s per tokenize call before the look-behind: measured
    against text of the same length with ordinary words, in one run, so a busy machine slows both alike."""
    import time

    from mentor.text.tokens import HYPHENATED

    assert HYPHENATED.findall("over-train x1pipe-line zero-3 a-b-c") == ["over-train", "pipe-line", "a-b-c"]

    def seconds(text: str) -> float:
        began = time.perf_counter()
        for _ in range(5):
            HYPHENATED.findall(text)
        return time.perf_counter() - began

    ordinary = ("pipeline parallel " * 300)[:8000]
    assert seconds("a" * 8000) < 10 * seconds(ordinary) + 0.01


def test_a_cased_word_is_a_name_even_opening_a_sentence() -> None:
    """ "BRIN stores ..." names BRIN though it only opens sentences: a capital after the first letter is no sentence
    case; "Tables ..." opening a sentence is not a name."""
    from mentor.text.profile import _names

    names = _names(["BRIN stores only a summary of each block range.", "Tables grow.", "ZeRO shards it."])
    assert {"brin", "zero"} <= names and "tabl" not in names
