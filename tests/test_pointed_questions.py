"""A question about the topic a module leaves to another module ("In-app … Inference & serving, for why decode is
memory-bound") is answered by where the module sends the learner: not refused, and no module sentence passed off
as the answer (a sentence that only mentions the topic, "Weight-only int4 … ideal for memory-bound decode", does not
say why); the module's own row naming the other module may be quoted.

The questions are generated from each module's pointers (its front matter), on this module and on the test module,
five ways of asking about the pointer's topic. (A first version, run once before any change, wanted coverage
"partial" and no quote at all, 0 of 10; it was replaced before the change was built, when the design became the
module's own row: "where can I learn it?" is answered in full by that row.)
"""

from __future__ import annotations

import asyncio

import pytest

from mentor.answer import ChatInput
from mentor.corpus import load_corpus

from .conftest import CORPUS, INDEXES

TEMPLATES = (
    "{topic}?",
    "can you explain {topic}?",
    "i don't really get {topic}",
    "where can i learn {topic}?",
    "quick question on {topic}, can you go over it?",
)


def cases() -> list[tuple[str, str, str]]:
    """(corpus, module id, question) for every pointer of every module, each way of asking."""
    made = []
    for corpus in (CORPUS, INDEXES):
        for module in load_corpus(corpus):
            for pointer in module.pointers:
                made += [(str(corpus), module.id, t.format(topic=pointer.topic)) for t in TEMPLATES]
    return made


@pytest.fixture(scope="module")
def runtimes(runtime, indexes):
    return {str(CORPUS): runtime, str(INDEXES): indexes}


@pytest.mark.parametrize(("corpus", "module_id", "question"), cases())
def test_a_question_for_another_module_is_sent_there(runtimes, corpus: str, module_id: str, question: str) -> None:
    module = runtimes[corpus].catalog.modules[module_id]
    (pointer,) = module.pointers
    answer = asyncio.run(runtimes[corpus].chat.ask(ChatInput(message=question, module_id=module_id))).answer
    assert f"the module points to *{pointer.title}* ({pointer.module_id})" in answer.text, answer.text
    assert not answer.out_of_scope, answer.text
    assert all(pointer.module_id in c.quote for c in answer.citations), answer.text
