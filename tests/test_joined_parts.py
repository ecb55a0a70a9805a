"""A message asking two things keeps both answers when one of them is answered a special way: a comparison answered
with its table's rows kept the other part's sentence out ("tp vs dp? why did models like gpt-3 end up under-trained?"
lost the Kaplan sentence to the row limit), and a calculation answered only itself ("what does each GPU keep under
plain data parallelism, also chinchila optimal data for a 400M model?" computed the tokens and said nothing of data
parallelism). Found by `tests/test_joined_questions.py`."""

from __future__ import annotations

from .chat_helpers import ask_module as ask
from .chat_helpers import cited_sections


def test_a_comparison_answered_with_rows_keeps_the_other_parts_sentence(runtime) -> None:
    answer = ask(runtime, "tensr paralell vs data paralell? why did models like gpt-3 end up under-trained?").answer
    assert "Data parallel (DP) — what is split" in answer.text and "Tensor parallel (TP) — what is split" in answer.text
    assert "Kaplan (2020)" in answer.text, answer.text


def test_a_comparison_of_two_rows_quotes_no_third_row(runtime) -> None:
    answer = ask(runtime, "pipline vs tensor paralel, whats split in each").answer
    assert "Pipeline parallel (PP) — what is split" in answer.text and "Tensor parallel (TP)" in answer.text
    assert "Data parallel (DP) — what is split" not in answer.text, answer.text


def test_a_calculation_beside_another_question_answers_both(runtime) -> None:
    answered = ask(
        runtime, "what does each GPU keep under plain data parallelism, also chinchila optimal data for a 400M model?"
    )
    assert [call.name for call in answered.answer.tool_calls if call.error is None], answered.answer.text
    assert "8B tokens" in answered.answer.text
    assert {"parallelism-strategies", "ref-parallelism-zero"} & cited_sections(answered), answered.answer.text


def test_the_quantities_a_calculation_lists_are_its_own(runtime) -> None:
    # "how many GB do weights" is a part of its own and writes no number, but it asks for a figure: the calculation's.
    answered = ask(runtime, "how many GB do weights, grads and adam states take for a 30B model?")
    assert len(answered.answer.citations) == 1, answered.answer.text
