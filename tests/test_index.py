"""Incremental ingest against embedded Chroma and a real `chroma run` server."""

from __future__ import annotations

from pathlib import Path

import pytest

from mentor.corpus import chunk_corpus, load_corpus
from mentor.index import build_index, chroma_client, open_index
from mentor.runtime import build_runtime

from .conftest import MODULE_ID, make_settings


def ingest(settings, embedder):
    modules = load_corpus(settings.corpus_dir)
    chunks = chunk_corpus(modules)
    index = open_index(chroma_client(settings), settings.collection, embedder)
    before = embedder.documents_embedded
    report = build_index(index, modules, chunks, embedder)
    assert report.embedded == embedder.documents_embedded - before  # the report counts real forward passes
    return report, index.chunks


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
    # One process that owns a Chroma server's index syncs it at start, as the embedded default does.
    settings = make_settings(tmp_path, chroma_url=chroma_server, collection="server_test", sync_on_start=True)
    runtime = build_runtime(settings, embedder=embedder)
    assert runtime.index.chunks.count() == runtime.catalog.chunk_count
    result = runtime.retriever.search("why do we need loss scaling with fp16", MODULE_ID, 4)
    assert result.passages[0].section_id == "ref-mixed-precision"
    again = build_runtime(settings, embedder=embedder)
    assert again.ingest_report.embedded == 0


def test_bad_chroma_url_is_a_plain_error(tmp_path: Path) -> None:
    from mentor.errors import InvalidInput

    with pytest.raises(InvalidInput, match="MENTOR_CHROMA_URL"):
        chroma_client(make_settings(tmp_path, chroma_url="ftp://nowhere"))


def test_a_replica_serves_what_the_ingest_job_published_and_picks_up_a_change(
    tmp_path: Path, corpus_copy: Path, chroma_server: str, embedder
) -> None:
    from mentor.runtime import ingest_corpus

    owner = make_settings(tmp_path / "job", chroma_url=chroma_server, collection="published", corpus_dir=corpus_copy)
    catalog, report = ingest_corpus(owner, embedder=embedder)
    assert report.added == catalog.chunk_count > 10
    # A replica: no corpus directory of its own, no sync; everything comes from the index.
    replica = build_runtime(
        make_settings(tmp_path / "replica", chroma_url=chroma_server, collection="published", corpus_dir=tmp_path),
        embedder=embedder,
    )
    assert replica.ingest_report is None and replica.catalog.digests == catalog.digests
    question = "why do we need loss scaling with fp16"
    assert replica.retriever.search(question, MODULE_ID, 4) == catalog.retriever.search(question, MODULE_ID, 4)
    assert replica.modules[MODULE_ID].sections == catalog.modules[MODULE_ID].sections
    assert replica.refresh() is False  # nothing changed

    path = corpus_copy / "p10-llm-systems-frontier-02.md"
    marked = path.read_text().replace("Loss falls as a power law", "The zebraquartz rule: loss falls as a power law")
    path.write_text(marked)
    ingest_corpus(owner, embedder=embedder)
    assert replica.refresh() is True
    assert "zebraquartz" in replica.retriever.search("zebraquartz rule", MODULE_ID, 1).passages[0].text
    assert "zebraquartz" in replica.modules[MODULE_ID].body


def test_a_replica_keeps_an_unchanged_module_and_drops_a_removed_one(
    tmp_path: Path, corpus_copy: Path, chroma_server: str, embedder
) -> None:
    from mentor.runtime import ingest_corpus

    source = (corpus_copy / "p10-llm-systems-frontier-02.md").read_text()
    second = source.replace(MODULE_ID, "P10.second", 1).replace("Training at scale", "Second", 1)
    (corpus_copy / "second.md").write_text(second)
    owner = make_settings(tmp_path / "job", chroma_url=chroma_server, collection="two", corpus_dir=corpus_copy)
    ingest_corpus(owner, embedder=embedder)
    replica = build_runtime(
        make_settings(tmp_path / "replica", chroma_url=chroma_server, collection="two", corpus_dir=tmp_path),
        embedder=embedder,
    )
    assert set(replica.modules) == {MODULE_ID, "P10.second"}
    kept = replica.retriever.modules[MODULE_ID]
    (corpus_copy / "second.md").unlink()
    ingest_corpus(owner, embedder=embedder)
    assert replica.refresh() is True
    assert set(replica.modules) == {MODULE_ID} and replica.retriever.modules[MODULE_ID] is kept


def test_a_replica_refuses_an_index_built_with_another_model_rather_than_rebuild_it(
    tmp_path: Path, chroma_server: str, embedder
) -> None:
    from mentor.errors import NotReady
    from mentor.index import open_index

    client = chroma_client(make_settings(tmp_path, chroma_url=chroma_server))
    client.get_or_create_collection("othermodel", embedding_function=None, metadata={"embedding_model": "other"})
    with pytest.raises(NotReady, match="mentor ingest"):
        open_index(client, "othermodel", embedder, owner=False)
    assert client.get_collection("othermodel").metadata["embedding_model"] == "other"  # left alone


def test_an_index_of_fp32_vectors_is_rebuilt_for_the_int8_embedder_not_mixed(tmp_path, corpus_copy, embedder) -> None:
    """The int8 model's vectors are its own: an index built with fp32 ones is embedded again, whole, on open."""
    from mentor.embedders_onnx import OnnxEmbedder

    settings = make_settings(tmp_path, corpus_dir=corpus_copy)
    fp32 = OnnxEmbedder(cache_dir=settings.model_cache_dir, precision="fp32")
    first, collection = ingest(settings, fp32)
    assert collection.metadata["embedding_model"] == fp32.name and embedder.name == f"{fp32.name}+int8"
    again, rebuilt = ingest(settings, embedder)
    assert again.embedded == again.added == first.added and rebuilt.metadata["embedding_model"] == embedder.name
