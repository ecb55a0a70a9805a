"""Incremental ingest against embedded Chroma and a real `chroma run` server."""

from __future__ import annotations

from pathlib import Path

import pytest

from mentor.corpus import chunk_corpus, load_corpus
from mentor.index import build_index, chroma_client, open_collection
from mentor.runtime import build_runtime

from .conftest import MODULE_ID, make_settings


def ingest(settings, embedder):
    chunks = chunk_corpus(load_corpus(settings.corpus_dir))
    collection = open_collection(chroma_client(settings), settings.collection, embedder)
    before = embedder.documents_embedded
    report = build_index(collection, chunks, embedder)
    assert report.embedded == embedder.documents_embedded - before  # the report counts real forward passes
    return report, collection


def test_reingest_of_unchanged_corpus_embeds_nothing(tmp_path: Path, corpus_copy: Path, embedder) -> None:
    settings = make_settings(tmp_path, corpus_dir=corpus_copy)
    first, collection = ingest(settings, embedder)
    assert first.added == collection.count() > 10 and first.embedded == first.added
    again, _ = ingest(settings, embedder)
    assert (again.added, again.updated, again.removed, again.embedded) == (0, 0, 0, 0)
    assert again.unchanged == first.added


def test_removed_section_disappears_and_edit_embeds_only_the_change(tmp_path, corpus_copy, embedder) -> None:
    settings = make_settings(tmp_path, corpus_dir=corpus_copy)
    first, collection = ingest(settings, embedder)
    path = corpus_copy / "p10-llm-systems-frontier-02.md"
    text = path.read_text()
    start = text.index("### 4 — Quantization")
    end = text.index("## Interview one-liners")
    path.write_text(text[:start] + text[end:].replace("cheap inference.", "cheap inference at scale."))
    report, collection = ingest(settings, embedder)
    assert report.removed == 2 and report.added == 1 and report.embedded == 1
    sections = {m["section_id"] for m in collection.get(include=["metadatas"])["metadatas"]}
    assert "ref-quantization" not in sections and "one-liners" in sections
    # the module version (a content hash) changed, so every other chunk had its metadata updated in place
    assert report.updated == first.added - 2


def test_index_serves_search_through_a_chroma_server(tmp_path: Path, chroma_server: str, embedder) -> None:
    settings = make_settings(tmp_path, chroma_url=chroma_server, collection="server_test")
    runtime = build_runtime(settings, embedder=embedder)
    assert runtime.collection.count() == len(runtime.chunks)
    result = runtime.retriever.search("why do we need loss scaling with fp16", MODULE_ID, 4)
    assert result.passages[0].section_id == "ref-mixed-precision"
    again = build_runtime(settings, embedder=embedder)
    assert again.ingest_report.embedded == 0


def test_bad_chroma_url_is_a_plain_error(tmp_path: Path) -> None:
    from mentor.errors import InvalidInput

    with pytest.raises(InvalidInput, match="MENTOR_CHROMA_URL"):
        chroma_client(make_settings(tmp_path, chroma_url="ftp://nowhere"))
