"""Answer plans by kind (mentor/engines/plans.py), on the module and on a second module with another table: a
decision names its option first, from the options the learner names or from a table's rows, and nothing in code
names either module's topics."""

from __future__ import annotations

import asyncio

import pytest

from mentor.answer import ChatInput

from .conftest import INDEXES_ID, MODULE_ID


def ask(runtime, message: str, module_id: str) -> str:
    answered = asyncio.run(runtime.chat.ask(ChatInput(message=message, module_id=module_id)))
    return answered.answer.text


@pytest.mark.parametrize(
    ("message", "option"),
    [
        (
            "our model fits on one card no problem, we just want to train faster with more gpus. which parallelism?",
            "Data parallel (DP)",
        ),
        ("lots of layers and we need to scale across nodes — which parallelism do i pick?", "Pipeline parallel (PP)"),
        # The learner states most of one row's condition, and shares only "model" and "GPU" with another's.
        ("a single layer of my model is too big for one gpu, what should i split it with?", "Tensor parallel (TP)"),
        ("bf16 or fp16 for training on a100s?", "bf16"),
        ("to make memory-bound decode faster should i go int4 weight-only or w8a8?", "int4"),
        # A name beside a table's rows, which no row holds but the table's section is about (it was "**Pipeline
        # parallel (PP)**": only rows were options once a row was named).
        ("to shard the optimizer state across the data-parallel group, zero or pipeline parallel?", "ZeRO"),
    ],
)
def test_a_decision_names_its_option_first(runtime, message: str, option: str) -> None:
    assert ask(runtime, message, MODULE_ID).startswith(f"**{option}** [")


def test_a_sentence_about_both_options_names_neither(runtime) -> None:
    # "GPTQ minimises …; AWQ protects …; both are post-training" makes no case for either: it was read as being about
    # the first one it names, and "**GPTQ**" opened the answer as if the module recommended it.
    answer = ask(runtime, "gptq vs awq which should i use?", MODULE_ID)
    assert not answer.startswith("**") and "AWQ protects salient channels" in answer, answer


@pytest.mark.parametrize(
    ("message", "option"),
    [
        ("we only need exact-match lookups on one key, no ordering. which index?", "Hash"),
        ("we search for values inside json documents a lot, which index?", "GIN"),
        (
            "my queries sort by the key and filter on ranges of dates, so which index type should the table get?",
            "B-tree",
        ),
        pytest.param(
            "lookups are exact-match with no ordering on a key column of documents; which index?",
            "Hash",
            marks=pytest.mark.xfail(
                strict=True,
                reason="the situation, a clause of its own, is read with the question and its words make the part a "
                "yes/no question: no option is named (the kind read from the question alone lost other choices)",
            ),
        ),
    ],
)
def test_a_second_module_with_another_table_decides_the_same_way(indexes, message: str, option: str) -> None:
    answer = ask(indexes, message, INDEXES_ID)
    assert answer.startswith(f"**{option}** ["), answer


def test_a_question_for_another_module_is_told_where_to_go(runtime, indexes) -> None:
    # The module's front matter names where it sends learners (`pointers`); a question on that topic is told so.
    pointed = (
        "For why decode is memory-bound, the module points to *Inference & serving* (P10.llm-systems-frontier.01)."
    )
    assert ask(runtime, "where in the app do i learn why decode is memory bound?", MODULE_ID).endswith(pointed)
    assert pointed not in ask(runtime, "what does ZeRO stage 2 shard?", MODULE_ID)
    elsewhere = ask(indexes, "how do isolation levels and locks affect concurrent writes?", INDEXES_ID)
    assert "the module points to *Transactions and isolation* (T01.databases.04)." in elsewhere


def test_a_calculator_runs_only_for_what_it_models(runtime) -> None:
    # Full-training memory is no QLoRA figure: the rule is quoted, the method named as not covered, nothing computed.
    answered = asyncio.run(
        runtime.chat.ask(ChatInput(message="how much gpu memory do i need to qlora finetune a 7b model?"))
    )
    assert answered.answer.tool_calls == [] and answered.answer.coverage == "partial"
    assert answered.answer.text.startswith("The module does not cover “qlora”")
    computed = asyncio.run(runtime.chat.ask(ChatInput(message="sgd with momentum on a 2B model: memory footprint?")))
    assert [c.name for c in computed.answer.tool_calls] == ["training_memory"]


def test_a_decisions_lead_is_no_quoted_claim() -> None:
    # The eval reads "**Data parallel (DP)** [2]." as the decision named, not a module sentence to label.
    from mentor.evaluate.metrics import is_claim

    assert not is_claim("**Data parallel (DP)** [2].", [])
    assert is_claim("Data parallel splits the batch (full replica per GPU). [1]", [])
