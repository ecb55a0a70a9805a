"""A question about the topic a module leaves to another module ("In-app … Inference & serving, for why decode is
memory-bound") is answered by where the module sends the learner, with coverage "partial" and no module sentence
passed off as the answer: a sentence that only mentions the topic ("Weight-only int4 … ideal for memory-bound
decode") does not say why.

The questions are generated from each module's pointers (its front matter), on this module and on the test module,
five ways of asking about the pointer's topic.
"""

from __future__ import annotations

import asyncio

import pytest

from mentor.answer import ChatInput
from mentor.corpus import load_corpus

from .conftest import CORPUS, ROOT, UNLIMITED, make_settings

INDEXES = ROOT / "tests/data/corpus_indexes"
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
def runtimes(runtime, tmp_path_factory, embedder):
    from mentor.runtime import build_runtime

    settings = make_settings(tmp_path_factory.mktemp("indexes"), corpus_dir=INDEXES, **UNLIMITED)
    return {str(CORPUS): runtime, str(INDEXES): build_runtime(settings, embedder=embedder)}


@pytest.mark.parametrize(("corpus", "module_id", "question"), cases())
def test_a_question_for_another_module_is_sent_there(runtimes, corpus: str, module_id: str, question: str) -> None:
    answer = asyncio.run(runtimes[corpus].chat.ask(ChatInput(message=question, module_id=module_id))).answer
    assert "the module points to" in answer.text, answer.text
    assert answer.coverage == "partial" and not answer.citations, (answer.coverage, answer.text)
