"""A message asking two things keeps both answers when one of them is answered a special way: a comparison answered
with its table's rows kept the other part's sentence out ("tp vs dp? why did models like gpt-3 end up under-trained?"
lost the Kaplan sentence to the row limit), and a calculation answered only itself ("what does each GPU keep under
plain data parallelism, also chinchila optimal data for a 400M model?" computed the tokens and said nothing of data
parallelism). Found by `tests/test_joined_questions.py`."""

from __future__ import annotations

import pytest

from mentor.consult import consult
from mentor.understanding.reader import MAX_PARTS

from .chat_helpers import ask_module as ask
from .chat_helpers import cited_sections
from .conftest import MODULE_ID


def says(runtime, message: str, *phrases: str):
    """Ask `message`, check its answer holds each of `phrases`, and return it."""
    answered = ask(runtime, message)
    for phrase in phrases:
        assert phrase in answered.answer.text, answered.answer.text
    return answered


def computed(answered) -> list[str]:
    """The calculators that ran for an answer without an error, in order."""
    return [call.name for call in answered.answer.tool_calls if call.error is None]


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
    assert computed(answered), answered.answer.text
    assert "8B tokens" in answered.answer.text
    assert {"parallelism-strategies", "ref-parallelism-zero"} & cited_sections(answered), answered.answer.text


def test_the_quantities_a_calculation_lists_are_its_own(runtime) -> None:
    # "how many GB do weights" is a part of its own and writes no number, but it asks for a figure: the calculation's.
    answered = ask(runtime, "how many GB do weights, grads and adam states take for a 30B model?")
    assert len(answered.answer.citations) == 1, answered.answer.text


def test_a_part_naming_a_number_format_beside_a_calculation_is_answered(runtime) -> None:
    # "bfloat16" has digits in it, yet writes no figure: the part was left out as if a calculator had read it.
    answered = ask(
        runtime,
        "what loss does the chinchilla fit predict for 70B on 2T tokens? bfloat16 or float16, which one is more stable",
    )
    assert [call.name for call in answered.answer.tool_calls] == ["scaling_law_loss"], answered.answer.text
    assert "bf16 > fp16 for stability" in answered.answer.text, answered.answer.text


def test_two_calculations_in_one_message_are_both_computed(runtime) -> None:
    # The planner takes the first calculator that recognises a text: the second part is planned on its own words.
    answered = ask(runtime, "loss scale 2^12, fp16, gradient = 1e-9: underflow? ZeRO-3 with 128 GPUs for a 70B model")
    assert computed(answered) == ["loss_scaling", "zero_memory"], answered.answer.text
    assert "8.75 GB" in answered.answer.text and "4.096e-6" in answered.answer.text
    # Each figure beside the module's rule it applies: one quote per calculator.
    assert {"ref-mixed-precision", "worked-memory-example"} <= cited_sections(answered), answered.answer.text


def test_every_part_is_answered_beside_a_calculation_no_part_asks_for_alone(runtime) -> None:
    # The number format was planned from the message as read as a whole (its glossary spells "nan" out as "fp16
    # range loss scaling underflow"); no part plans it alone, and both parts were left unanswered beside it.
    answered = ask(
        runtime,
        "pipeline parallelism: what gets split? fp16 training goes nan after a few hundred steps, what should i try?",
    )
    assert "Pipeline parallel (PP) — what is split" in answered.answer.text, answered.answer.text


def test_a_calculation_asked_beside_another_question_is_no_part_set_aside(runtime) -> None:
    # Its number in scientific notation was a concept the module lacks ("1e24 flops"), which took the part's own
    # search out of scope: the part was set aside and its calculation never ran.
    answered = ask(
        runtime,
        "what does each GPU keep under plain data parallelism? "
        "if I have 1e24 flops what's the chinchilla optimal model size",
    )
    assert computed(answered), answered.answer.text
    assert answered.answer.coverage == "full" and "1e24 flops" not in answered.answer.text, answered.answer.text
    assert "parallelism-strategies" in cited_sections(answered) or "ref-parallelism-zero" in cited_sections(answered)


def test_two_calculations_of_one_part_are_computed_each_from_its_own_numbers(runtime) -> None:
    # The second question leans on the first (one part): ZeRO's memory was computed for the first question's 7B,
    # a false figure, and the loss the first asked for was never computed.
    answered = ask(
        runtime,
        "expected loss for 7B params trained on 1T tokens? and also zero-1 on 16 devices, 20B model, "
        "memory per device?",
    )
    calls = [(call.name, call.arguments.get("params")) for call in answered.answer.tool_calls if call.error is None]
    assert calls == [("scaling_law_loss", 7 * 10**9), ("zero_memory", 20 * 10**9)], answered.answer.text
    # ZeRO-1 for 20B on 16 GPUs: 40 + 40 + 240/16 = 95 GB a GPU; the Chinchilla fit for 7B on 1T tokens: 2.052 nats
    assert "95 GB" in answered.answer.text and "2.052" in answered.answer.text, answered.answer.text


def test_a_calculation_whose_numbers_stand_before_its_question_is_not_set_aside(runtime) -> None:
    # "p=4, m=16, interleaved with v=2," is context to "what's the bubble.": the part was planned on its question
    # alone, planned nothing, searched out of scope and was set aside ("the rest of your message").
    answered = ask(
        runtime,
        "p=4, m=16, interleaved with v=2, what's the bubble. and gradient 3e-9 in fp16 with a loss scale of 1024 - "
        "does it survive?",
    )
    assert computed(answered) == ["pipeline_bubble", "loss_scaling"], answered.answer.text
    assert answered.answer.coverage == "full" and "rest of your message" not in answered.answer.text


def test_a_question_whose_situation_asks_the_calculation_is_answered_beside_it(runtime) -> None:
    # The numbers before it read as the question's situation: one part, and a part that calculates was answered with
    # the calculation's rule alone; what it asks ("how does shrinking the weights speed up token generation") is
    # no figure, and was left unanswered.
    answered = ask(
        runtime,
        "p=4, m=16, interleaved with v=2, what's the bubble and how does shrinking the weights speed up token "
        "generation",
    )
    assert computed(answered) == ["pipeline_bubble"], answered.answer.text
    assert "ref-quantization" in cited_sections(answered), answered.answer.text
    # A question asking for the figure its situation holds is the calculation: nothing is answered beside it.
    answered = ask(runtime, "I have a 13B model. How much memory for Adam?")
    assert computed(answered) == ["training_memory"], answered.answer.text
    assert len(answered.answer.citations) == 1, answered.answer.text


def test_a_terse_second_question_on_a_subject_of_its_own_is_answered(runtime) -> None:
    # Read with the first question, "also W8A8 - why so hard?" was answered from the parallelism passages alone.
    answered = ask(
        runtime,
        "which split helps most when the model has very many layers spread over nodes, also W8A8 - why so hard?",
    )
    cited = cited_sections(answered)
    assert "ref-quantization" in cited and cited & {"ref-parallelism-zero", "parallelism-strategies"}, cited


def test_each_of_two_calculations_is_quoted_for_the_words_of_the_part_asking_it(runtime) -> None:
    # Each rule was found for the calculator's title alone: "Number format" names no word of the fp16 sentence, and
    # only the scaling law's rule was quoted.
    answered = ask(
        runtime,
        "what loss does the chinchilla fit predict for 70B on 2T tokens? and also fp16 spends how many bits on its "
        "exponent?",
    )
    assert computed(answered) == ["scaling_law_loss", "number_format"], answered.answer.text
    assert {"ref-scaling-laws", "ref-mixed-precision"} <= cited_sections(answered), answered.answer.text


def test_a_part_asking_for_a_rule_no_calculator_computes_is_answered_beside_a_calculation(runtime) -> None:
    # "compute optimal tokns per param rule" reads as a calculation and plans nothing alone: a calculation's part,
    # it was left unanswered beside the number formats the second part computes.
    answered = ask(runtime, "compute optimal tokns per param rule; what does bf16 give away to get fp32's range?")
    assert "20 tokens" in answered.answer.text and "ref-mixed-precision" in cited_sections(answered), (
        answered.answer.text
    )
    # A part asking for the figure computed beside it is that calculation: no sentence of its own.
    answered = ask(runtime, "how many GB do weights, grads and adam states take for a 30B model?")
    assert computed(answered) == ["training_memory"], answered.answer.text
    assert len(answered.answer.citations) == 1, answered.answer.text


def test_two_questions_joined_by_no_mark_are_cut_when_the_second_is_on_a_subject_of_its_own(runtime) -> None:
    # "whats the catch with fp16's range" leans by its form: the cut was refused, and the first half answered alone.
    answered = ask(
        runtime, "does the mxfp4 format change how int4 weight quantization works and whats the catch with fp16's range"
    )
    cited = cited_sections(answered)
    assert "ref-mixed-precision" in cited and cited & {"ref-quantization", "one-liners"}, answered.answer.text
    assert "int4" in answered.answer.text and "fp16" in answered.answer.text, answered.answer.text


def test_two_calculations_joined_by_no_mark_are_cut(runtime) -> None:
    # Each half asks for a calculation: mostly numbers, neither half's search read as in scope, and the cut was
    # refused; the first calculator to recognise the whole message ran alone.
    answered = ask(
        runtime,
        "p=4, m=16, interleaved with v=2, what's the bubble also same compute either way: 7B on 1.4T tokens or 14B "
        "on 700B tokens, which gives the lower loss?",
    )
    assert "pipeline_bubble" in computed(answered), answered.answer.text
    assert "ref-scaling-laws" in cited_sections(answered), answered.answer.text


def grounds_of(runtime, message: str):
    """How the chat reads and grounds `message`: its parts, after any cut."""
    chat = runtime.chat
    return consult(
        message, (), module_id=MODULE_ID, reader=chat.catalog.reader, retriever=runtime.retriever, top_k=chat.top_k
    )


def test_two_questions_joined_by_no_mark_are_both_answered(runtime) -> None:
    message = "which paper introduced zero and does the mxfp4 format change how int4 weight quantization works?"
    assert len(grounds_of(runtime, message).reading.parts) == 2
    answered = ask(runtime, message)
    # The paper, as the question asked alone gets it (the golden set's `concept-reading-01`).
    assert "Rajbhandari et al. (2020)" in answered.answer.text, answered.answer.text
    assert "int4 weight-only (GPTQ/AWQ)" in answered.answer.text, answered.answer.text


def test_a_message_is_not_cut_where_the_module_answers_its_halves_from_the_same_passages(runtime) -> None:
    # Each half reads as a question of its own (the reader proposes the cut), and the module finds both in the same
    # section first: read as one, as before.
    reader, words = runtime.chat.catalog.reader, runtime.retriever.modules[MODULE_ID].words
    for message in (
        "what does tensor parallel split and when does tensor parallel win over pipeline parallel",
        "what is weight-only int4 quantization and why is w8a8 quantization harder",
    ):
        assert reader.joined(reader.read(message, words=words), words), message
        assert len(grounds_of(runtime, message).reading.parts) == 1, message


def test_a_part_asking_for_the_modules_sources_is_answered_from_its_reading_list(runtime) -> None:
    # The module's reading list joined the passages only when the message's first part asked for it, and a merge of
    # the parts' passages dropped it even then: the sources part got a sentence about the idea, not its paper.
    message = (
        "where does the idea of sharding the optimizer state come from, and what keeps the gpus of a pipeline from "
        "sitting idle?"
    )
    says(runtime, message, "Rajbhandari et al. (2020)", "pipeline bubble")


def test_a_sources_part_beside_a_calculation_is_answered_from_the_reading_list(runtime) -> None:
    answered = ask(
        runtime,
        "I've got one 80GB A100 — can I do full Adam training of a 7B model on it? which paper should I cite for the "
        "20-tokens-per-parameter rule?",
    )
    assert [call.name for call in answered.answer.tool_calls] == ["memory_fit"], answered.answer.text
    assert "Hoffmann et al. (2022)" in answered.answer.text, answered.answer.text


def test_a_part_about_a_topic_beside_a_sources_part_is_answered_from_what_the_module_teaches(runtime) -> None:
    # The message's first part asked for sources, so every part was answered from the reading list: "how does FSDP
    # relate to ZeRO" got the ZeRO paper's row, not what the module says of FSDP.
    message = "which paper should I cite for the 20-tokens-per-parameter rule, and how does FSDP relate to ZeRO?"
    says(runtime, message, "Hoffmann et al. (2022)", "FSDP is the same idea")


def test_a_calculations_rule_is_found_for_the_part_that_asks_for_it(runtime) -> None:
    # The rule was found for the whole message, so the other question's words chose it: a sentence on parallelism
    # stood for the quantized size's rule, and the calculation was quoted with no rule of its own.
    answered = ask(
        runtime, "how big is a 13B model at 8 bits also do real training runs stick to just one kind of parallelism?"
    )
    assert [call.name for call in answered.answer.tool_calls] == ["quantized_size"], answered.answer.text
    assert "ref-quantization" in cited_sections(answered), answered.answer.text
    assert "Real runs combine them" in answered.answer.text, answered.answer.text


def test_two_questions_joined_by_no_mark_are_cut_where_their_best_passages_differ(runtime) -> None:
    # Each half's best passage is its own, yet the other half's passages held it further down (the module's opening
    # shares every topic's words): the cut was refused, and the choice's table row answered the message alone.
    message = (
        "which parallelism do i want if my model already fits on a single gpu and why does everyone train in bf16 on "
        "h100s now"
    )
    assert len(grounds_of(runtime, message).reading.parts) == 2
    answered = ask(runtime, message)
    assert "Data parallel (DP)" in answered.answer.text, answered.answer.text
    assert "ref-mixed-precision" in cited_sections(answered), answered.answer.text


def test_a_first_question_joined_by_no_mark_to_the_next_is_cut_in_a_message_of_several_parts(runtime) -> None:
    # Only a message read as one question was offered a cut; here the comma before "but" makes a second part, and the
    # first ("which paper ... rule and pipeline parallel needs micro-batches") held two questions.
    message = (
        "which paper should I cite for the 20-tokens-per-parameter rule and pipeline parallel needs micro-batches, but "
        "how do I compute the bubble fraction for 8 stages?"
    )
    assert len(grounds_of(runtime, message).reading.parts) == 3
    says(runtime, message, "Hoffmann et al. (2022)")


def test_a_question_joined_by_no_mark_after_a_sources_question_is_cut_from_it(runtime) -> None:
    # "and what eats more gpu memory during training" read as leaning on the question before it (its "and"), so the
    # two stayed one question and the paper behind sharding was never named.
    message = (
        "where does the idea of sharding the optimizer state come from and what eats more gpu memory during training, "
        "the weights or adam's state?"
    )
    says(runtime, message, "Rajbhandari et al. (2020)", "memory hog")


@pytest.mark.parametrize(
    ("message", "phrases"),
    [
        # Only the first part was offered a cut: the second ("which paper ... and does the mxfp4 ...") stayed one
        # question, and the ZeRO paper was never named.
        (
            "what does tensor parallel split? which paper introduced zero and does the mxfp4 format change how int4 "
            "weight quantization works?",
            ("Rajbhandari et al. (2020)", "matmuls within a layer"),
        ),
        # The first cut leaves a half holding two questions, cut again.
        (
            "which paper introduced zero, how does gptq decide how to round the weights and what does bf16 give away "
            "to get fp32's range",
            ("Rajbhandari et al. (2020)", "GPTQ minimises output error"),
        ),
    ],
)
def test_a_part_holding_two_questions_is_cut_wherever_it_stands(
    runtime, message: str, phrases: tuple[str, ...]
) -> None:
    assert len(grounds_of(runtime, message).reading.parts) == 3
    says(runtime, message, *phrases)


def test_each_item_of_a_list_is_answered(runtime) -> None:
    # "2. 13b int8 size" read as context of the question before it; the list marks it a question of its own.
    answered = ask(runtime, "1. how does zero-3 shard the model\n2. what do gptq and awq need\n3. 13b int8 size")
    assert "quantized_size" in computed(answered), answered.answer.text
    assert {"ref-parallelism-zero", "ref-quantization"} <= cited_sections(answered), answered.answer.text
    assert [p.written for p in answered.reading.parts][-1] == "13b int8 size"


def test_a_terse_question_after_another_is_a_question_of_its_own_by_its_question_mark(runtime) -> None:
    # "predicted loss for ...?" reads as a question less surely than a sentence does (0.64): it was the context of the
    # question before it, and "what is zero?" was answered with a one-liner about memory.
    message = "what is zero? predicted loss for a 13B model trained on 500B tokens?"
    assert [p.written for p in grounds_of(runtime, message).reading.parts] == [
        "what is zero?",
        "predicted loss for a 13B model trained on 500B tokens?",
    ]
    answered = says(runtime, message, "ZeRO shards the redundant optimizer state")
    assert computed(answered) == ["scaling_law_loss"]


def test_a_calculations_rule_is_quoted_beside_a_part_set_aside(runtime) -> None:
    # With a part set aside, only the parts the module's search finds in scope gave passages: the bubble's rule was
    # not among them ("p=4, m=16, ..." searches poorly), and the figure stood unquoted.
    message = (
        "who won the world cup in 2014? how does gptq pick its rounding? p=4, m=16, interleaved with v=2, what's the "
        "bubble?"
    )
    answered = ask(runtime, message)
    assert answered.answer.coverage == "partial" and computed(answered) == ["pipeline_bubble"]
    assert {"ref-quantization", "ref-parallelism-zero"} <= cited_sections(answered), answered.answer.text


def test_two_questions_at_a_comma_the_reader_did_not_part_are_cut_where_the_module_answers_each_apart(runtime) -> None:
    # "which paper introduced zero" reads as a question at 0.93, under the floor the reader parts a comma at (a
    # situation before a comma reads as high); the module's search tells the two apart.
    message = "which paper introduced zero, pipeline vs tensor parallel"
    assert [p.written for p in grounds_of(runtime, message).reading.parts] == [
        "which paper introduced zero",
        "pipeline vs tensor parallel",
    ]
    says(runtime, message, "Rajbhandari et al. (2020)")


def test_a_cut_never_splits_a_calculations_quantities(runtime) -> None:
    # Cut at its comma, "20B model, memory per device?" planned full Adam training's memory beside the ZeRO figure.
    message = "zero-1 on 16 devices, 20B model, memory per device?"
    assert len(grounds_of(runtime, message).reading.parts) == 1
    assert computed(ask(runtime, message)) == ["zero_memory"]


@pytest.mark.xfail(
    strict=True,
    reason="an item of a list asking nothing but its situation is asked as written: read as the next item's "
    "situation instead, terse questions written as items ('2. 40b int4 gb') were (the listed draw 54 -> 48 of 60)",
)
def test_a_situation_written_as_an_item_of_a_list_is_the_next_questions(runtime) -> None:
    message = "1. I have 8 A100s with 80GB\n2. how much memory to train a 13B model with adam?"
    assert len(grounds_of(runtime, message).reading.parts) == 1


def test_cuts_never_make_more_parts_than_the_reader_keeps(runtime) -> None:
    # Three parts, two of them two questions each: both were cut, five parts where the reader keeps four at most.
    message = (
        "what does tensor parallel split? which paper introduced zero and does the mxfp4 format change how int4 "
        "weight quantization works? which paper introduced chinchilla and how does gptq choose its rounding"
    )
    assert len(grounds_of(runtime, message).reading.parts) == MAX_PARTS
