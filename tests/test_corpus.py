"""Module files: validation errors name file and line; chunks are section-aware with stable ids."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from mentor.corpus import chunk_module, load_corpus, load_module
from mentor.errors import CorpusError

from .conftest import CORPUS, MODULE_ID

HEAD = "---\nmodule_id: x.1\ntitle: T\nprerequisites: []\n---\n"
GOOD = """---
module_id: demo.01
title: Demo
prerequisites: []
version: "3"
---

# Demo {#intro}

Intro text.

## Tables {#tables}

| a | b |
|---|---|
| 1 | 2 |
"""


def write(tmp_path: Path, text: str, name: str = "m.md") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("# Demo {#a}\n\ntext\n", 1, "missing YAML front matter"),
        ("---\nmodule_id: x.1\ntitle: T\n", 1, "not closed"),
        ("---\nmodule_id: x.1\ntitle: [oops\nprerequisites: []\n---\n# A {#a}\nx\n", 4, "not valid YAML"),
        ("---\ntitle: T\nprerequisites: []\n---\n# A {#a}\nx\n", 2, "module_id"),
        ("---\nmodule_id: bad id!\ntitle: T\nprerequisites: []\n---\n# A {#a}\nx\n", 2, "module_id"),
        ("---\nmodule_id: x.1\nprerequisites: []\n---\n# A {#a}\nx\n", 2, "title"),
        ("---\nmodule_id: x.1\ntitle: T\nprerequisites: nope\n---\n# A {#a}\nx\n", 4, "prerequisites"),
        (HEAD + "# A {#a}\nx\n## B {#a}\ny\n", 8, "already used on line 6"),
        (HEAD + "# A {#a}\nx\n## No id here\ny\n", 8, "section id"),
        (HEAD + "# A {#a}\nx\n## Empty {#e}\n\n## C {#c}\nz\n", 8, "is empty"),
        (HEAD + "stray text\n# A {#a}\nx\n", 6, "before the first heading"),
    ],
)
def test_invalid_module_names_file_and_line(tmp_path: Path, text: str, line: int, fragment: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(CorpusError) as caught:
        load_module(path)
    assert f"{path}:{line}:" in caught.value.message or (line == 1 and str(path) in caught.value.message)
    assert fragment in caught.value.message


def test_unclosed_fence_is_reported(tmp_path: Path) -> None:
    path = write(tmp_path, HEAD + "# A {#a}\n```\ncode\n")
    with pytest.raises(CorpusError, match="never closed"):
        load_module(path)


def test_heading_inside_code_fence_is_not_a_section(tmp_path: Path) -> None:
    path = write(tmp_path, HEAD + "# A {#a}\n```\n# not a heading\n```\n")
    assert [s.id for s in load_module(path).sections] == ["a"]


def test_two_files_with_one_module_id(tmp_path: Path) -> None:
    write(tmp_path, GOOD, "a.md")
    second = write(tmp_path, GOOD, "b.md")
    with pytest.raises(CorpusError, match="already used by") as caught:
        load_corpus(tmp_path)
    assert str(second) in caught.value.message


def test_empty_or_missing_corpus_dir(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="no module files"):
        load_corpus(tmp_path)
    with pytest.raises(CorpusError, match="does not exist"):
        load_corpus(tmp_path / "nope")


def test_version_defaults_to_content_hash(tmp_path: Path) -> None:
    explicit = load_module(write(tmp_path, GOOD, "a.md"))
    assert explicit.version == "3"
    hashed = load_module(write(tmp_path, GOOD.replace('version: "3"\n', ""), "b.md"))
    assert len(hashed.version) == 12
    changed = load_module(write(tmp_path, GOOD.replace('version: "3"\n', "").replace("Intro", "Other"), "c.md"))
    assert changed.version != hashed.version


def test_real_module_is_complete() -> None:
    (module,) = load_corpus(CORPUS)
    assert module.id == MODULE_ID and module.title == "Training at scale"
    assert module.prerequisites == ("P10.llm-systems-frontier.01",)
    ids = [s.id for s in module.sections]
    for required in (
        "concept",
        "why-it-matters",
        "parallelism-strategies",
        "worked-memory-example",
        "ref-parallelism-zero",
        "ref-mixed-precision",
        "ref-scaling-laws",
        "ref-quantization",
        "one-liners",
        "further-reading",
    ):
        assert required in ids
    text = module.body
    for fact in ("84 GB", "14 GB", "~1.4T tokens", "W8A8", "| Pipeline parallel (PP) |", "Kaplan et al. (2020)"):
        assert fact in text
    assert "Ask the mentor" not in text and "Where next?" not in text


def test_chunks_carry_metadata_and_keep_tables_and_code_whole() -> None:
    (module,) = load_corpus(CORPUS)
    chunks = chunk_module(module, chunk_size=200, chunk_overlap=20)  # small, to force splitting
    assert [c.position for c in chunks] == list(range(len(chunks)))
    assert all(c.module_id == MODULE_ID and c.module_version == module.version for c in chunks)
    table = [c for c in chunks if "| Strategy |" in c.text]
    assert len(table) == 1 and "| Sequence / context |" in table[0].text
    code = [c for c in chunks if "```text" in c.text]
    assert len(code) == 1 and "ZeRO/FSDP shard those 84 GB" in code[0].text and code[0].text.rstrip().endswith("```")
    assert {c.section_id for c in chunks} >= {"ref-mixed-precision", "further-reading"}
    prose = [c for c in chunks if "```" not in c.text and "|" not in c.text]
    assert all(len(c.text) <= 200 for c in prose)


def test_chunks_follow_the_sections_the_loader_parsed(tmp_path: Path) -> None:
    # Module headings start at the line's start, so "  ## Indented" is text of section a. Chunking used to read
    # the headings again (LangChain strips lines first) and failed on the unknown id "b".
    text = HEAD + "# A {#a}\nIntro.\n  ## Indented {#b}\nMore.\n\n```text\n# a comment\n```\n## C {#c}\n\nz\n"
    module = load_module(write(tmp_path, text))
    assert [s.id for s in module.sections] == ["a", "c"]
    assert [(c.section_id, c.text) for c in chunk_module(module)] == [
        ("a", "Intro.\n## Indented {#b}\nMore.\n\n```text\n# a comment\n```"),
        ("c", "z"),
    ]


def test_chunk_ids_are_stable_content_hashes(tmp_path: Path) -> None:
    module = load_module(write(tmp_path, GOOD))
    first = chunk_module(module)
    again = chunk_module(load_module(write(tmp_path, GOOD, "copy.md")))
    assert [c.id for c in first] == [c.id for c in again]
    # sha256 of module id, section id, title and text: the same on every machine and Python version.
    expected = hashlib.sha256(b"demo.01\x1fintro\x1fDemo\x1fIntro text.").hexdigest()[:32]
    assert first[0].id == expected == "2c4e92a0cb843f3f221a14cbee451c0a"
    edited = chunk_module(load_module(write(tmp_path, GOOD.replace("Intro text.", "Intro text!"), "e.md")))
    assert edited[0].id != first[0].id and edited[1].id == first[1].id
