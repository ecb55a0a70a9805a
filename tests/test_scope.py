"""The scope examples' vectors: embedded once per machine, read back by every later process."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mentor.scope import ScopeExamples, load_labelled

EXAMPLES = Path(__file__).resolve().parents[1] / "eval" / "calibration" / "scope.jsonl"


def test_example_vectors_are_cached_and_a_damaged_cache_is_rebuilt(embedder, tmp_path) -> None:
    rows = load_labelled(EXAMPLES)
    labelled = [r for r in rows if r.in_scope][:20] + [r for r in rows if not r.in_scope][:20]
    before = embedder.documents_embedded
    first = ScopeExamples.build(labelled, embedder, cache_dir=tmp_path)
    assert first.modules  # examples of both labels: a margin to compare
    assert embedder.documents_embedded - before == len(labelled)
    (cached,) = tmp_path.glob("scope-examples-*.npy")
    assert not list(tmp_path.glob(".*tmp"))  # written whole, then renamed

    again = ScopeExamples.build(labelled, embedder, cache_dir=tmp_path)
    assert embedder.documents_embedded - before == len(labelled)  # read back, not embedded
    question = embedder.embed_query("what does ZeRO stage 3 shard?")
    for module_id in first.modules:
        assert again.margin(module_id, question) == first.margin(module_id, question)

    cached.write_bytes(cached.read_bytes()[:100])  # cut short
    rebuilt = ScopeExamples.build(labelled, embedder, cache_dir=tmp_path)
    assert embedder.documents_embedded - before == 2 * len(labelled)
    assert np.load(cached).shape[0] == len(labelled)
    for module_id in first.modules:
        assert rebuilt.margin(module_id, question) == first.margin(module_id, question)

    ScopeExamples.build(labelled[:30], embedder, cache_dir=tmp_path)  # other texts: another file
    assert len(list(tmp_path.glob("scope-examples-*.npy"))) == 2


def test_missing_scope_examples_are_reported_as_a_warning_naming_where_they_were_looked_for(
    embedder, tmp_path, caplog
) -> None:
    """A relative default read from another directory leaves the scope decision without its example margin, which
    the threshold was calibrated with: covered questions then read out of scope. It is said loudly, not at INFO."""
    missing = tmp_path / "nowhere" / "scope.jsonl"
    with caplog.at_level("WARNING", logger="mentor.scope"):
        examples = ScopeExamples.load(missing, embedder)
    assert not examples.modules
    (record,) = [r for r in caplog.records if r.name == "mentor.scope"]
    assert record.levelname == "WARNING" and str(missing) in record.getMessage()
    assert "MENTOR_SCOPE_EXAMPLES" in record.getMessage()
