"""A question about one subject, asked with common words ("how does ZeRO work?", "what is mixed-precision
training?"), is answered about that subject: its words of asking weigh by how common they are in English
(`mentor.retrieve.rarity`), a unit whose subject it names answers it (`Part.about`), and a section's opening sentence
says what the subject its title names is (`ModuleProfile.leads`, `mentor.engines.extractive.defined`).

The second module (`tests/data/corpus_storage`) is written so that a section's opening sentence shares no word with
its title ("Write-ahead logging": "Every change is appended to a durable journal ..."), while a later one shares
"log": read by its words alone, "what is write-ahead logging?" quoted the later one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mentor.engines.selection import ASKING, Part
from mentor.retrieve import rarity

from .chat_helpers import ask_module
from .conftest import INDEXES_ID, MODULE_ID, UNLIMITED, make_settings

STORAGE = Path(__file__).parent / "data" / "corpus_storage"
STORAGE_ID = "T02.storage.01"


@pytest.fixture(scope="module")
def storage(tmp_path_factory, embedder):
    from mentor.runtime import build_runtime

    settings = make_settings(tmp_path_factory.mktemp("storage"), corpus_dir=STORAGE, **UNLIMITED)
    return build_runtime(settings, embedder=embedder)


def ask(runtime, message: str, module_id: str):
    import asyncio

    from mentor.answer import ChatInput

    return asyncio.run(runtime.chat.ask(ChatInput(message=message, module_id=module_id))).answer


def test_words_common_in_english_weigh_less_than_a_name() -> None:
    weights = rarity("how does ZeRO work?")
    assert weights["doe"] <= ASKING and weights["work"] <= ASKING
    assert weights["zero"] == 1.0  # capped: a rarer word weighs no more than "zero", the module's weights decide


def test_a_part_naming_one_subject_with_common_words_is_about_it(runtime) -> None:
    profile = runtime.chat.catalog.retriever.modules[MODULE_ID].profile
    assert Part.of("how does ZeRO work?", profile).about == {"zero"}
    # "stage" and "add" are rarer than words of asking: the part asks about more than ZeRO.
    assert Part.of("what does ZeRO stage 2 add over stage 1?", profile).about == frozenset()


def test_a_section_opening_with_a_sentence_leads_it_a_table_does_not(runtime, indexes) -> None:
    leads = runtime.chat.catalog.retriever.modules[MODULE_ID].profile.leads
    assert leads["Keep most math in 16-bit, protect sensitive parts in fp32."] == {
        "mix",
        "precis",
        "train",
        "mixedprecis",
    }
    index_leads = indexes.chat.catalog.retriever.modules[INDEXES_ID].profile.leads
    assert list(index_leads.values()) == [{"queri", "plan"}]  # "Index types" opens with its table


def test_how_zero_works_is_answered_about_zero(runtime) -> None:
    answer = ask_module(runtime, "how does ZeRO work?").answer
    assert answer.coverage == "full"
    assert answer.citations and all("ZeRO" in c.quote for c in answer.citations)
    assert "two walls" not in answer.text


def test_what_a_section_subject_is_quotes_its_opening(runtime) -> None:
    answer = ask_module(runtime, "what is mixed-precision training?").answer
    assert answer.coverage == "full"
    assert answer.text.startswith("Keep most math in 16-bit, protect sensitive parts in fp32.")


def test_a_question_naming_more_than_the_subject_keeps_its_own_answer(runtime) -> None:
    answer = ask_module(runtime, "what makes W8A8 quantization hard?").answer
    assert "Store/run in low precision" not in answer.text
    assert "W8A8" in answer.text


@pytest.mark.parametrize(
    ("message", "opening"),
    [
        ("what is write-ahead logging?", "Every change is appended to a durable journal"),
        ("how does write-ahead logging work?", "Every change is appended to a durable journal"),
        ("how does compaction work", "Merging sorted runs into larger ones"),
    ],
)
def test_another_module_is_answered_by_its_sections_openings(storage, message: str, opening: str) -> None:
    answer = ask(storage, message, STORAGE_ID)
    assert answer.coverage == "full"
    assert answer.text.startswith(opening), answer.text


def test_another_modules_other_questions_keep_their_answers(storage) -> None:
    answer = ask(storage, "what does group commit do?", STORAGE_ID)
    assert answer.text.startswith("Group commit batches several transactions"), answer.text
