"""Chat alone ("hi", "thanks!", "bye") gets a short kind reply naming the module, not the out-of-scope redirect
(mentor.framing.social_reply). What a message does socially is a decision from labelled examples and the embedder
(`mentor/understanding/examples/social.jsonl`, measured on `eval/understanding/heldout/social.jsonl`): no word list."""

from __future__ import annotations

import json

import pytest

from mentor.framing import REDIRECT_OPENINGS
from mentor.understanding.decisions import EXAMPLES
from mentor.understanding.examples import balanced_accuracy, cross_validated, load_labelled
from mentor.understanding.reading import OTHER

from .conftest import MODULE_ID, ROOT

TITLE = "Training at scale"
HELDOUT = ROOT / "eval/understanding/heldout/social.jsonl"


def ask(client, message: str, **extra) -> dict:
    response = client.post("/v1/chat", json={"module_id": MODULE_ID, "message": message, **extra})
    assert response.status_code == 200, response.text
    return response.json()


# "thank you!!": emphasis by repeated marks read as an order (0.89) before the reader took a run of marks as one.
@pytest.mark.parametrize("message", ["hi", "hello!", "thanks", "thank you so much", "bye!", "thank you!!", "hi!!!"])
def test_a_greeting_or_thanks_alone_gets_a_short_kind_reply_naming_the_module(client, message) -> None:
    answer = ask(client, message)
    assert not answer["out_of_scope"], answer["answer"]  # not a gap of the module for the analyst
    assert not any(opening in answer["answer"] for opening in REDIRECT_OPENINGS)
    assert f"*{TITLE}*" in answer["answer"] and len(answer["answer"]) <= 160
    assert answer["citations"] == [] and answer["tool_calls"] == []
    assert answer["grounding"]["grounded"] and answer["coverage"] == "full"


def test_a_greeting_and_a_thanks_get_different_replies(client) -> None:
    hello, thanks = ask(client, "hello there")["answer"], ask(client, "thanks a lot!")["answer"]
    assert hello != thanks
    assert "scaling laws" in hello  # someone arriving is told what the module covers


def test_other_chat_and_requests_the_module_has_nothing_for_are_still_redirected(client) -> None:
    for message in ("compose a sonnet about autumn rain", "what is the capital of France?", "i have an exam tomorrow"):
        answer = ask(client, message)
        assert answer["out_of_scope"], (message, answer["answer"])


def test_a_greeting_before_a_question_is_answered_as_the_question(client) -> None:
    answer = ask(client, "hi! what is bf16?")
    assert not answer["out_of_scope"] and answer["citations"]
    assert TITLE not in answer["answer"]


def test_the_conversation_goes_on_after_a_greeting(client) -> None:
    hello = ask(client, "hey")
    answer = ask(client, "what does ZeRO stage 3 shard?", conversation_id=hello["conversation_id"])
    assert answer["citations"] and not answer["reading"]["continues"]


def test_the_social_decision_holds_its_floor_on_its_held_out_set(runtime) -> None:
    # Measured when written: cross-validated 0.846 on its 132 examples, 0.888 on the 42 held-out messages read as the
    # chat reads them (a message read as a question or an order first is "other"; "thank you!!" reads as an order).
    reader = runtime.chat.catalog.reader
    words = runtime.retriever.modules[MODULE_ID].words
    rows = [json.loads(line) for line in HELDOUT.read_text().splitlines() if line.strip()]
    predicted = [reader.read(row["text"], words=words).social or OTHER for row in rows]
    assert balanced_accuracy([row["social"] for row in rows], predicted) >= 0.85
    # A request read as a greeting would get a welcome instead of the redirect: none of the held-out ones is.
    assert not [r["text"] for r, p in zip(rows, predicted, strict=True) if r["social"] == OTHER and p != OTHER]
    examples = load_labelled(EXAMPLES / "social.jsonl", "social")
    texts = [row.text for row in examples]
    vectors = reader.embedder.embed_documents(texts)
    assert cross_validated(texts, vectors, [row.label for row in examples]) >= 0.80
