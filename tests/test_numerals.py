"""Numbers a learner writes in words are read as digits where numbers are needed: the calculators' plan and the
grounding check's evidence (`mentor.understanding.numerals`)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from num2words import num2words

from mentor.engines.planner import plan_tools
from mentor.grounding import check_grounding
from mentor.understanding.numerals import digits


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a seventy billion param model", "a 70 billion param model"),
        ("one point four trillion tokens", "1.4 trillion tokens"),
        ("ZeRO-three on sixty-four GPUs", "ZeRO-3 on 64 GPUs"),
        ("seq two thousand and forty-eight, hidden four thousand and ninety-six", "seq 2048, hidden 4096"),
        ("two eighty GB A100s", "2 80 GB A100s"),  # two numbers side by side are two numbers
        ("one point four, twenty-one, one hundred", "1.4, 21, 100"),
        ("Seventy-Three", "73"),
    ],
)
def test_numbers_in_words_are_written_in_digits(text: str, expected: str) -> None:
    assert digits(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "1.3 billion params on 2 trillion tokens",  # the scale counts the digits ("1.3 1000000000" was wrong)
        "a million tokens",  # a scale with nothing counted stays as written
        "zero or tensor parallel?",  # zero is the module's ZeRO far more often than a count
        "which one is better? the one to use on one GPU",  # and one alone a pronoun as often
        "fp16 vs bf16 with 1F1B",
    ],
)
def test_text_that_writes_no_number_in_words_is_left_as_it_is(text: str) -> None:
    assert digits(text) == text


@given(st.integers(min_value=2, max_value=999_999) | st.integers(min_value=1, max_value=99).map(lambda n: n * 10**9))
def test_property_a_number_num2words_spells_reads_back_as_itself(number: int) -> None:
    read = digits(num2words(number).replace(",", ""))  # num2words writes "twelve thousand, three hundred"
    count, _, scale = read.partition(" ")
    assert int(count) * {"": 1, "thousand": 10**3, "billion": 10**9}[scale] == number


def test_the_planner_reads_a_number_in_words_as_its_digits() -> None:
    (call,) = plan_tools("size of a seventy billion param model in 4 bit?", kind="calculation")
    assert call.name == "quantized_size"
    assert (
        call.arguments["params"]
        == plan_tools("size of a 70B param model in 4 bit?", kind="calculation")[0].arguments["params"]
    )


def test_a_number_the_learner_wrote_in_words_traces_in_the_answer() -> None:
    answer = "A 70B model needs 140 GB of weights in bf16."
    evidence = {"question": "how big is a seventy billion model?", "passages": ["bf16 weights take 2 bytes per param."]}
    assert check_grounding(answer, **evidence).untraced_numbers == ["140 GB"]
    assert check_grounding("A 70B model is large.", **evidence).grounded


def test_a_follow_up_number_is_an_argument_only_when_it_changes_the_calculation() -> None:
    history = ("how much memory to train a 13B model with adam?",)
    (call,) = plan_tools("and for a seventy billion one?", history)
    assert (call.name, call.arguments["params"]) == ("training_memory", "70B")
    # "two" reads as 2, which changes nothing here: the learner asks about the module, not for the figure again.
    assert plan_tools("what are the two walls you mean?", history) == []
    assert plan_tools("which one is bigger, the weights or the optimizer state?", history) == []
