"""The ONNX Runtime embedder: sentence-transformers' vectors to rounding, cached once, no torch at run time."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

from mentor.bench.questions import QUESTIONS
from mentor.embedders_onnx import OnnxEmbedder, cached_onnx_path, ensure_onnx, verify_export
from mentor.embeddings import SentenceTransformerEmbedder, _resolve_model
from mentor.errors import ConfigError
from mentor.settings import PACKAGED_MODEL

from .test_embeddings import embed_together

ROOT = Path(__file__).resolve().parent.parent
MODEL_DIR = _resolve_model(PACKAGED_MODEL)
CORPUS = ROOT / "corpus"
# Rounding between two fp32 runtimes; a wrong mask, pooling or truncation costs far more (0.9-0.99).
MIN_COSINE = 0.9999


@pytest.fixture(scope="session")
def onnx_cache(tmp_path_factory) -> Path:
    """A cache directory holding the one export of this test session."""
    cache = tmp_path_factory.mktemp("onnx-cache")
    ensure_onnx(MODEL_DIR, cache)
    return cache


@pytest.fixture(scope="session")
def onnx_embedder(onnx_cache: Path) -> OnnxEmbedder:
    return OnnxEmbedder(cache_dir=onnx_cache)


def varied_texts() -> list[str]:
    """Questions, corpus paragraphs, texts far past 256 word pieces, and the odd inputs a learner can send."""
    questions = list(QUESTIONS)
    for line in (ROOT / "eval" / "golden.jsonl").read_text().splitlines()[1:]:
        questions.extend(json.loads(line).get("turns", []))
    corpus = "\n".join(path.read_text() for path in sorted(CORPUS.glob("*.md")))
    lines = [line.strip() for line in corpus.splitlines() if line.strip()]
    # Passages of every length up to far past the limit, cut anywhere (mid-word, mid-table).
    passages = [corpus[start : start + size] for size in (300, 1500) for start in range(0, len(corpus), 1000)]
    passages += [corpus[:4000], corpus[-4000:]]
    odd = [
        "",
        " ",
        "\n\t ",
        "?",
        "ZeRO",
        "WHAT IS BF16 AND WHY NOT FP16",
        "7e9 params * 2 bytes = 14 GB; 13B * 16 B = 208 GB",
        "🚀 how fast is tensor parallel on NVLink? 🤔",
        "模型并行是什么？",
        "Qu'est-ce que la rétropropagation, et pourquoi l'état de l'optimiseur est-il si lourd ?",
        "x" * 3000,  # one word far past the limit
        "the " * 1000,
        "| Data parallel (DP) | the batch (full replica per GPU) | model fits on one GPU |",
        "def step(model, batch):\n    loss = model(batch).mean()\n    loss.backward()",
    ]
    texts = list(dict.fromkeys(questions[:120] + lines[:60] + passages + odd))
    assert any(len(t) > 3000 for t in texts) and "" in texts
    return texts


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_vectors_match_sentence_transformers(onnx_embedder: OnnxEmbedder) -> None:
    """A few hundred varied texts, batched (padding) and alone (no padding), match torch's to rounding."""
    torch_embedder = SentenceTransformerEmbedder(PACKAGED_MODEL)
    texts = varied_texts()
    assert len(texts) >= 200
    got, expected = onnx_embedder.embed_documents(texts), torch_embedder.embed_documents(texts)
    assert got.shape == expected.shape == (len(texts), onnx_embedder.dim) == (len(texts), torch_embedder.dim)
    assert got.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cos = cosines(got, expected)
    worst = int(cos.argmin())
    assert cos[worst] >= MIN_COSINE, f"cosine {cos[worst]:.6f} for {texts[worst][:80]!r}"
    for text in texts[:5] + texts[-14:]:
        alone = onnx_embedder._encode([text], threads=1)[0]
        assert float(alone @ expected[texts.index(text)]) >= MIN_COSINE, text[:80]


def test_texts_are_truncated_at_256_word_pieces_like_sentence_transformers(onnx_embedder: OnnxEmbedder) -> None:
    """Words past the 256th word piece change nothing; a word inside it does."""
    head = "pipeline parallelism splits the layers across devices " * 40  # ~320 word pieces
    past, inside = head + "ZeRO shards optimizer state", "ZeRO shards optimizer state " + head
    same, other = onnx_embedder.embed_documents([head, past]), onnx_embedder.embed_documents([head, inside])
    assert float(same[0] @ same[1]) > 0.999999
    assert float(other[0] @ other[1]) < 0.9999


def test_passes_of_any_size_give_the_same_vectors(onnx_embedder: OnnxEmbedder) -> None:
    """Cutting a batch into passes by token budget (down to one text a pass, on two threads) changes nothing."""
    texts = varied_texts()[::4]
    whole = onnx_embedder._encode(texts, threads=1)
    one_by_one = OnnxEmbedder(cache_dir=onnx_embedder.cache_dir, max_tokens_per_pass=1)
    one_by_one._loaded, one_by_one._tokenizer = onnx_embedder._model, onnx_embedder._tokenizer  # same session
    split = one_by_one._encode(texts, threads=2)
    assert cosines(whole, split).min() > 0.99999


def test_the_service_runs_a_query_pass_on_the_threads_its_settings_name(onnx_cache: Path, tmp_path: Path) -> None:
    """`embed_threads` reaches the session (capped at the machine's cores), and the vectors do not change."""
    from mentor.embeddings import make_embedder

    from .conftest import make_settings

    threads = min(2, os.cpu_count() or 1)
    served = make_embedder(make_settings(tmp_path, model_cache_dir=onnx_cache))
    single = make_embedder(make_settings(tmp_path, model_cache_dir=onnx_cache, embed_threads=1))
    assert served._model.get_session_options().intra_op_num_threads == threads
    assert single._model.get_session_options().intra_op_num_threads == 1
    texts = varied_texts()[::8]
    assert cosines(served.embed_documents(texts), single.embed_documents(texts)).min() > 0.99999


def test_concurrent_queries_share_passes_yet_get_their_own_vectors(onnx_embedder: OnnxEmbedder) -> None:
    """Threads asking at once are embedded together, yet each gets the vector of its own text, as if alone."""
    sizes: list[int] = []
    embedder = OnnxEmbedder(cache_dir=onnx_embedder.cache_dir, on_batch=sizes.append)
    embedder._loaded, embedder._tokenizer = onnx_embedder._model, onnx_embedder._tokenizer  # same session
    texts = [f"what does ZeRO stage {i % 3 + 1} shard, question {i} {uuid.uuid4().hex}" for i in range(24)]
    alone = np.stack([onnx_embedder._encode([t], threads=1)[0] for t in texts])
    got = embed_together(embedder, texts)
    assert sorted(got) == list(range(len(texts)))
    assert min(float(got[i] @ alone[i]) for i in range(len(texts))) > 0.99999
    assert sum(sizes) == len(texts) and max(sizes) > 1, sizes  # every text once, some of them together
    # A repeat is answered from the cache: the very same array, no forward pass.
    assert embedder.embed_query(texts[3].upper() + "  ") is got[3]
    assert sum(sizes) == len(texts)


def test_a_fresh_process_embeds_from_the_cache_without_torch(onnx_cache: Path, onnx_embedder: OnnxEmbedder) -> None:
    """A new process finds the export, embeds, and never imports torch, transformers or sentence-transformers."""
    path = cached_onnx_path(MODEL_DIR, onnx_cache)
    before = path.stat()
    script = f"""
import json, sys
from pathlib import Path
from mentor.embedders_onnx import OnnxEmbedder
embedder = OnnxEmbedder(cache_dir=Path({str(onnx_cache)!r}))
query = embedder.embed_query("How does ZeRO save memory during training?")
docs = embedder.embed_documents(["Pipeline parallelism splits layers."] * 20)
heavy = sorted(m for m in ("torch", "transformers", "sentence_transformers", "onnx") if m in sys.modules)
print(json.dumps({{"heavy": heavy, "query": query.tolist(), "docs": docs.shape[0]}}))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["heavy"] == [], f"imported {out['heavy']}"
    assert out["docs"] == 20
    here = onnx_embedder.embed_query("How does ZeRO save memory during training?")
    assert float(np.asarray(out["query"], dtype=np.float32) @ here) > 0.99999
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns), "the export ran again"


def test_an_incomplete_or_changed_export_is_not_used(onnx_cache: Path, tmp_path: Path) -> None:
    """Only a file whose manifest matches it is used: not one cut short, changed on disk, or without manifest."""
    source = cached_onnx_path(MODEL_DIR, onnx_cache)
    assert verify_export(source)
    path = tmp_path / source.name
    manifest = path.with_name(path.name + ".json")
    data = source.read_bytes()

    path.write_bytes(data[: len(data) // 2])  # a copy or a write cut short
    shutil.copy(source.with_name(source.name + ".json"), manifest)
    assert not verify_export(path)

    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF  # same size, one byte of the weights changed
    path.write_bytes(bytes(flipped))
    assert not verify_export(path)

    path.write_bytes(data)
    assert verify_export(path)
    manifest.unlink()  # an export that stopped between writing the model and its manifest
    assert not verify_export(path)


@pytest.mark.slow
def test_a_changed_export_is_exported_again(onnx_cache: Path, tmp_path: Path) -> None:
    """ensure_onnx replaces a cached file that no longer matches its manifest, with the same export as before."""
    cache = tmp_path / "cache"
    cache.mkdir()
    source = cached_onnx_path(MODEL_DIR, onnx_cache)
    for name in (source.name, source.name + ".json"):
        shutil.copy(source.with_name(name), cache / name)
    target = cache / source.name
    corrupted = bytearray(target.read_bytes())
    corrupted[len(corrupted) // 3] ^= 0xFF
    target.write_bytes(bytes(corrupted))
    assert not verify_export(target)

    assert ensure_onnx(MODEL_DIR, cache) == target
    assert verify_export(target)
    assert target.read_bytes() == source.read_bytes()  # the export is deterministic for the same weights
    assert sorted(p.name for p in cache.iterdir()) == sorted([".export.lock", target.name, target.name + ".json"])


def test_a_model_with_other_pooling_is_refused_not_embedded_wrongly(tmp_path: Path) -> None:
    """A local model pooling by its CLS token would get mean-pooled vectors: refused with a plain message."""
    model = tmp_path / "cls-model"
    (model / "1_Pooling").mkdir(parents=True)
    for name in ("config.json", "model.safetensors", "tokenizer.json", "sentence_bert_config.json", "modules.json"):
        (model / name).symlink_to(MODEL_DIR / name)
    pooling = json.loads((MODEL_DIR / "1_Pooling" / "config.json").read_text())
    pooling |= {"pooling_mode_mean_tokens": False, "pooling_mode_cls_token": True}
    (model / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    embedder = OnnxEmbedder(str(model), cache_dir=tmp_path / "cache")
    with pytest.raises(ConfigError, match="mean pooling"):
        embedder.embed_query("what is ZeRO?")
    assert not (tmp_path / "cache").exists()  # refused before any export


# --- the int8 model (the default backend, onnx-int8) ----------------------------------------------------------


@pytest.fixture(scope="session")
def int8_embedder(onnx_cache: Path) -> OnnxEmbedder:
    return OnnxEmbedder(cache_dir=onnx_cache, precision="int8")


def test_the_int8_model_is_made_once_beside_the_export_and_checked(onnx_cache: Path, int8_embedder) -> None:
    """Quantized from the fp32 export into the same cache, with a manifest recording what it was made from."""
    int8_embedder.embed_query("what is ZeRO?")
    fp32 = cached_onnx_path(MODEL_DIR, onnx_cache)
    path = ensure_onnx(MODEL_DIR, onnx_cache, precision="int8")
    assert path == fp32.with_name(f"{fp32.stem}-int8.onnx") == cached_onnx_path(MODEL_DIR, onnx_cache, "int8")
    assert verify_export(path)
    manifest = json.loads(path.with_name(path.name + ".json").read_text())
    assert manifest["precision"] == "int8" and manifest["min_cosine_vs_fp32"] >= 0.97
    assert manifest["source_sha256"] == json.loads(fp32.with_name(fp32.name + ".json").read_text())["sha256"]
    assert path.stat().st_size < fp32.stat().st_size / 3  # int8 weights: about a quarter of fp32's bytes
    before = path.stat()
    assert ensure_onnx(MODEL_DIR, onnx_cache, precision="int8") == path
    assert (path.stat().st_ino, path.stat().st_mtime_ns) == (before.st_ino, before.st_mtime_ns), "made again"


def test_int8_vectors_stay_close_to_fp32_and_are_named_apart(int8_embedder, onnx_embedder: OnnxEmbedder) -> None:
    """Close enough to answer alike (scope is calibrated on them), but never mixed with fp32 ones in an index or
    a vector cache: the embedder's name, which both key on, says int8."""
    texts = varied_texts()
    got, fp32 = int8_embedder.embed_documents(texts), onnx_embedder.embed_documents(texts)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cos = cosines(got, fp32)
    assert cos.min() > 0.95 and float(np.median(cos)) > 0.99, (cos.min(), np.median(cos))
    assert cos.max() < 0.99999  # other vectors indeed: a test that cannot tell them apart would prove nothing
    assert int8_embedder.name == f"{onnx_embedder.name}+int8"


def test_an_int8_vector_does_not_depend_on_the_texts_embedded_with_it(int8_embedder) -> None:
    """int8 passes quantize activations with one scale per pass: each text runs alone, so a text gets the same
    vector in a batch, alone, and among concurrent queries."""
    texts = varied_texts()[::6]
    alone = np.stack([int8_embedder._encode([t])[0] for t in texts])
    np.testing.assert_array_equal(int8_embedder.embed_documents(texts), alone)
    queries = [f"how does ZeRO stage {i % 3 + 1} cut memory, take {i} {uuid.uuid4().hex}" for i in range(16)]
    got = embed_together(int8_embedder, queries)
    for i, text in enumerate(queries):
        np.testing.assert_array_equal(got[i], int8_embedder._encode([text])[0])
