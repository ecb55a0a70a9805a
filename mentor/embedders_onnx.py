"""all-MiniLM-L6-v2 on ONNX Runtime: sentence-transformers' vectors to rounding, without importing torch.

The transformer is exported once from the packaged weights (torch is imported for that alone) into a cache
keyed by the weights' digest; every later start loads that file with ONNX Runtime and the fast tokenizer. On
this 2-core machine one new ~15-word query took ~9 ms here against ~19 ms on torch (one thread each), a
process that loaded it and embedded 100 queries held ~200 MB against ~530 MB, and none pays torch's import.

The service's default is the export's int8 quantization (`quantize_export`), made once beside it: on a CPU with
AVX-512 VNNI a ~15-word query takes 1.9 ms on one thread against 5.1 for fp32, and a server answers ~36% more
new questions a second at concurrency 32 for ~35% less CPU each; where int8 products are not faster (AVX2 only)
it costs about what fp32 does.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

import numpy as np

from mentor.embeddings import BatchingEmbedder
from mentor.errors import ConfigError, NotReady
from mentor.settings import PACKAGED_MODEL

log = logging.getLogger(__name__)

# Bump when export_onnx changes what it writes: cache entries of an older format are then ignored, not loaded.
EXPORT_FORMAT = 1
OPSET = 17  # LayerNormalization is an ONNX op from 17 on, which ONNX Runtime runs as one fused kernel
INPUT_NAMES = ("input_ids", "attention_mask")
OUTPUT_NAME = "last_hidden_state"
# An int8 model whose probe vectors fall below this cosine with fp32's is refused (observed: 0.99).
MIN_QUANTIZED_COSINE = 0.97
Precision = Literal["fp32", "int8"]
# Two texts of different lengths, so the traced graph sees padding: a trace over an all-ones mask could
# otherwise keep a shortcut that ignores the mask.
_PROBE = ("what is ZeRO stage 3?", "Pipeline parallelism splits the layers of a model into stages, one per device.")


def model_digest(model_dir: Path) -> str:
    """Digest of what the export reads (weights, model config) and of how it exports (format, opset)."""
    h = hashlib.sha256(f"mentor-onnx-export/{EXPORT_FORMAT}/opset{OPSET}\n".encode())
    for name in ("config.json", "model.safetensors"):
        h.update(_file_sha256(model_dir / name).encode())
    return h.hexdigest()


def cached_onnx_path(model_dir: Path, cache_dir: Path, precision: Precision = "fp32") -> Path:
    """Where the export of `model_dir` (or its int8 quantization) lives in `cache_dir`; the weights' digest is in
    the name."""
    return _at_precision(cache_dir / f"embedder-{model_digest(model_dir)[:16]}.onnx", precision)


def _at_precision(fp32_path: Path, precision: Precision) -> Path:
    return fp32_path if precision == "fp32" else fp32_path.with_name(f"{fp32_path.stem}-{precision}.onnx")


def export_onnx(model_dir: Path, out_path: Path, *, label: str | None = None) -> Path:
    """Export the transformer of `model_dir` (`label` names it in the log) to ONNX fp32 at `out_path`, checked
    against torch; atomically.

    The file appears under its name only once it is complete and its outputs matched torch's on a padded probe
    batch; a manifest next to it (written last) records its digest, so a file changed or cut short later is
    never loaded. Imports torch and transformers: the only function here that does.
    """
    started = time.perf_counter()  # torch's import is part of what an export costs (~3-4 s of it here)
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    model = AutoModel.from_pretrained(str(model_dir)).eval()

    class LastHiddenState(torch.nn.Module):
        # BertModel's own forward returns a ModelOutput and takes cache arguments that the tracer trips on;
        # pooling stays in numpy, where it is a handful of operations.
        def __init__(self, bert: torch.nn.Module) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return self.bert(
                input_ids=input_ids,
                attention_mask=attention_mask,
                token_type_ids=torch.zeros_like(input_ids),  # one segment: what sentence-transformers passes
                use_cache=False,
                return_dict=True,
            ).last_hidden_state

    tokenizer = _tokenizer(model_dir)
    ids, mask = _encode_batch(tokenizer, list(_PROBE))
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with _staged(out_path) as tmp:
        wrapper = LastHiddenState(model).eval()
        with torch.inference_mode():
            expected = wrapper(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()
        # The TorchScript exporter (dynamo=False): deprecated since torch 2.9 but present in the pinned 2.13;
        # it needs only the `onnx` package and took ~4.5 s here. The dynamo exporter (torch's default) needs
        # onnxscript and onnx-ir as well and took ~16 s, for the same vectors and the same speed.
        with _quiet_export_warnings():
            torch.onnx.export(
                wrapper,
                (torch.from_numpy(ids), torch.from_numpy(mask)),
                str(tmp),
                dynamo=False,
                input_names=list(INPUT_NAMES),
                output_names=[OUTPUT_NAME],
                dynamic_axes={name: {0: "batch", 1: "tokens"} for name in (*INPUT_NAMES, OUTPUT_NAME)},
                opset_version=OPSET,
                do_constant_folding=True,
            )
        got = _session(str(tmp), threads=1).run([OUTPUT_NAME], {"input_ids": ids, "attention_mask": mask})[0]
        worst = float(np.abs(got - expected).max())
        if worst > 1e-3:
            raise NotReady(f"the ONNX export of {model_dir.name} differs from torch by {worst:.2g}; not used")
        _publish(
            tmp,
            out_path,
            source=model_digest(model_dir),
            torch=torch.__version__,
            opset=OPSET,
            max_abs_diff_vs_torch=worst,
        )
    log.info(
        "exported %s to ONNX in %.1f s (max diff vs torch %.1e)",
        label or model_dir.name,
        time.perf_counter() - started,
        worst,
    )
    return out_path


def ensure_onnx(model_dir: Path, cache_dir: Path, *, precision: Precision = "fp32", label: str | None = None) -> Path:
    """The cached export of `model_dir` (its int8 quantization when asked), made first if it is missing or does
    not match its manifest. Each step says so before it starts: together they leave a first start silent for
    ~15 s otherwise (`label` names the model)."""
    path = cached_onnx_path(model_dir, cache_dir)  # digests the weights: once
    wanted = _at_precision(path, precision)
    if verify_export(wanted):
        return wanted
    cache_dir.mkdir(parents=True, exist_ok=True)
    with _exclusive(cache_dir / ".export.lock"):
        # Another process may have exported while this one waited for the lock.
        if not verify_export(path):
            # ~4.5 s on an idle 2-core machine, 9-15 s on a busy one (torch's import included)
            log.info("exporting %s to ONNX into %s (first start only, ~10 s)…", label or model_dir.name, cache_dir)
            export_onnx(model_dir, path, label=label)
        if wanted != path and not verify_export(wanted):
            log.info("quantizing the ONNX model to %s (first start only, ~5 s)…", precision)
            quantize_export(model_dir, path, wanted)
    return wanted


def quantize_export(model_dir: Path, fp32_path: Path, out_path: Path) -> Path:
    """Quantize the fp32 export's weights to int8 (per output channel; each pass quantizes its activations as it
    runs), checked against fp32's vectors; written atomically with a manifest, as `export_onnx` writes.

    Weights take 7 bits of the 8 (`reduce_range`): on CPUs without AVX-512 VNNI, ONNX Runtime multiplies uint8
    activations by int8 weights with an instruction whose 16-bit sums saturate at full range, so the same text
    would get other vectors there than on a VNNI machine; at 7 bits no sum overflows and every x86 CPU computes
    the same integers.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    started = time.perf_counter()
    with _staged(out_path) as tmp:
        logging.disable(logging.WARNING)  # its advice to pre-process the graph (shape inference) changes nothing here
        try:
            quantize_dynamic(fp32_path, tmp, weight_type=QuantType.QInt8, per_channel=True, reduce_range=True)
        finally:
            logging.disable(logging.NOTSET)
        tokenizer = _tokenizer(model_dir)
        want, got = (_probe_vectors(path, tokenizer) for path in (fp32_path, tmp))
        worst = float((want * got).sum(axis=1).min())
        if worst < MIN_QUANTIZED_COSINE:
            raise NotReady(f"the int8 model of {model_dir.name} is too far from fp32 (cosine {worst:.3f}); not used")
        _publish(tmp, out_path, source_sha256=_file_sha256(fp32_path), precision="int8", min_cosine_vs_fp32=worst)
    log.info("quantized the ONNX model to int8 in %.1f s (cosine vs fp32 %.4f)", time.perf_counter() - started, worst)
    return out_path


def _probe_vectors(model: Path, tokenizer) -> np.ndarray:  # noqa: ANN001 - tokenizers.Tokenizer
    """The probe texts' vectors under `model`, one text a pass (as int8 runs them)."""
    session = _session(str(model), threads=1)
    rows = []
    for text in _PROBE:
        ids, mask = _encode_batch(tokenizer, [text])
        rows.append(
            _mean_pool_normalised(session.run([OUTPUT_NAME], {"input_ids": ids, "attention_mask": mask})[0], mask)
        )
    return np.vstack(rows)


@contextlib.contextmanager
def _staged(out_path: Path) -> Iterator[Path]:
    """A temporary file beside `out_path` to write the model into; gone afterwards unless `_publish` moved it."""
    fd, tmp_name = tempfile.mkstemp(dir=out_path.parent, prefix=f".{out_path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
    finally:
        tmp.unlink(missing_ok=True)


def _publish(tmp: Path, out_path: Path, **facts: object) -> None:
    """Move a checked model file to `out_path`, then write its manifest (format, digest, size and `facts`) last:
    a file whose manifest is missing or does not match it is never loaded."""
    manifest = {"format": EXPORT_FORMAT, "sha256": _file_sha256(tmp), "bytes": tmp.stat().st_size, **facts}
    tmp.chmod(0o644)  # mkstemp's 0600 would hide a cache built as root from the user the service runs as
    os.replace(tmp, out_path)
    _write_atomically(_manifest_path(out_path), json.dumps(manifest, indent=1).encode())


def verify_export(path: Path) -> bool:
    """Whether the export at `path` is complete and unchanged: its manifest's format, size and digest match."""
    try:
        manifest = json.loads(_manifest_path(path).read_text())
        if manifest.get("format") != EXPORT_FORMAT or path.stat().st_size != manifest.get("bytes"):
            return False
        digest = _file_sha256(path)
    except (OSError, ValueError):
        return False
    if digest != manifest.get("sha256"):
        log.warning("the ONNX model at %s does not match its manifest; it will be exported again", path)
        return False
    return True


class OnnxEmbedder(BatchingEmbedder):
    """The packaged all-MiniLM-L6-v2 on ONNX Runtime: the forward pass of `BatchingEmbedder`, without torch."""

    def __init__(
        self,
        model_name: str = PACKAGED_MODEL,
        *,
        cache_dir: Path,
        batch_size: int = 64,
        query_cache_size: int = 2048,
        precision: Precision = "fp32",
        pass_threads: int = 1,
        document_threads: int | None = None,
        max_tokens_per_pass: int = 512,
        on_batch: Callable[[int], None] | None = None,
    ) -> None:
        super().__init__(model_name, batch_size=batch_size, query_cache_size=query_cache_size, on_batch=on_batch)
        self.cache_dir = Path(cache_dir)
        self.label = "all-MiniLM-L6-v2" if model_name == PACKAGED_MODEL else Path(model_name).name  # for the log
        self.precision = precision
        if precision != "fp32":  # other vectors: an index or vectors cached from fp32 ones are not reused
            self.name = f"{model_name}+{precision}"
        # Threads inside one forward pass (the service passes `embed_threads`, 2). Which wins depends on the CPU:
        # on the 2-core machine of an earlier round (one short query ~8.6 ms on one thread) two cut an idle query
        # to ~5.5-7.7 ms but made it slower with other work running (10-19 ms against 9-10); on one with AVX2
        # only (a ~20-word query 19.8 ms on one thread, 12.7 on two) the service answered 26% more new questions
        # a second at concurrency 1 and 14% more at 32 (A/B over four alternating rounds, the same stub LLM).
        self.pass_threads = pass_threads
        # Document batches instead run several one-thread passes side by side.
        self._threads = document_threads or os.cpu_count() or 1
        self.max_tokens_per_pass = max_tokens_per_pass
        self._tokenizer = None

    def _load(self):  # noqa: ANN202 - onnxruntime.InferenceSession, imported lazily
        # The first load after an install pays the export once (torch imported for it alone).
        _check_pooling(self._path)
        self._tokenizer = _tokenizer(self._path)
        path = ensure_onnx(self._path, self.cache_dir, precision=self.precision, label=self.label)
        return _load_session(path, self.pass_threads)

    @functools.cached_property
    def dim(self) -> int:
        """Vector length, from the pooling config: known without loading the session."""
        return int(json.loads((self._path / "1_Pooling" / "config.json").read_text())["word_embedding_dimension"])

    def _encode(self, texts: list[str], *, threads: int | None = None) -> np.ndarray:
        """Embed `texts` in forward passes of at most `max_tokens_per_pass` tokens, on up to `threads` cores.

        The graph materialises every attention score (rows x 12 heads x tokens^2 floats): one pass over 64
        texts of 256 word pieces took ~1.2 GB, which ONNX Runtime's arena then keeps (without the arena the
        peak was higher still, and passes slower). Passes of 512 tokens were as fast as passes of 1,024 or
        more, and a process that had embedded 64 long texts stayed at ~295 MB RSS (~345 MB with 1,024).
        A document batch spreads its passes over a few threads, sharing the one session and its weights (a
        second session with more threads would copy them).
        """
        session = self._model
        ids, mask = _encode_batch(self._tokenizer, texts)
        lengths = mask.sum(axis=1)
        vectors = np.empty((len(texts), self.dim), dtype=np.float32)

        def run(rows: np.ndarray) -> None:
            width = int(lengths[rows].max())  # the batch's own padding, not that of the longest text overall
            feed = {"input_ids": ids[rows, :width], "attention_mask": mask[rows, :width]}
            vectors[rows] = _mean_pool_normalised(session.run([OUTPUT_NAME], feed)[0], feed["attention_mask"])

        # int8 passes quantize their activations with one scale for the whole pass: a text batched with others
        # (or padded) would get another vector than alone (cosine 0.997). So int8 runs one text a pass, which
        # costs little: a short query took 1.9 ms alone against 5.1 for fp32 here.
        one_each = self.precision != "fp32"
        passes = [np.array([i]) for i in range(len(texts))] if one_each else _passes(lengths, self.max_tokens_per_pass)
        # Passes that already use several threads each would only contend with one another.
        workers = 1 if self.pass_threads > 1 else min(threads or self._threads, len(passes))
        if workers <= 1:
            for rows in passes:
                run(rows)
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="onnx-embed") as pool:
                list(pool.map(run, passes))  # list(): re-raises the first error
        return vectors


def _check_pooling(model_dir: Path) -> None:
    """Refuse a local model whose sentence-transformers modules are not mean pooling then normalisation."""
    modules = [m["type"].rsplit(".", 1)[-1] for m in json.loads((model_dir / "modules.json").read_text())]
    pooling = json.loads((model_dir / "1_Pooling" / "config.json").read_text())
    modes = sorted(k for k, v in pooling.items() if k.startswith("pooling_mode_") and v)
    if modules != ["Transformer", "Pooling", "Normalize"] or modes != ["pooling_mode_mean_tokens"]:
        raise ConfigError(
            f"the ONNX embedder computes mean pooling and normalisation only; {model_dir} has {modules} with "
            f"{modes}: use the torch backend for it"
        )


def _passes(lengths: np.ndarray, max_tokens: int) -> list[np.ndarray]:
    """Rows grouped shortest first into passes of at most `max_tokens` padded tokens (one row at least)."""
    order = np.argsort(lengths, kind="stable")
    passes, start = [], 0
    while start < len(order):
        stop = start + 1
        # Sorted ascending, so the row just added is the pass's longest: its length sets the padding.
        while stop < len(order) and (stop + 1 - start) * int(lengths[order[stop]]) <= max_tokens:
            stop += 1
        passes.append(order[start:stop])
        start = stop
    return passes


def _mean_pool_normalised(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean of the token vectors under the attention mask, scaled to unit length: sentence-transformers' pooling."""
    weights = mask.astype(np.float32)
    summed = np.einsum("bsd,bs->bd", hidden, weights)
    pooled = summed / np.clip(weights.sum(axis=1, keepdims=True), 1e-9, None)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32, copy=False)


def _tokenizer(model_dir: Path):  # noqa: ANN202 - tokenizers.Tokenizer, imported lazily
    """The model's fast tokenizer, truncating and padding the way sentence-transformers does."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    # tokenizer.json carries a fixed pad-to-128 and truncate-at-128 from training; sentence-transformers
    # truncates at max_seq_length (256 word pieces here) and pads each batch to its longest text.
    max_length = int(json.loads((model_dir / "sentence_bert_config.json").read_text())["max_seq_length"])
    padding = tokenizer.padding or {}
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.enable_padding(pad_id=padding.get("pad_id", 0), pad_token=padding.get("pad_token", "[PAD]"))
    return tokenizer


def _encode_batch(tokenizer, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001
    encodings = tokenizer.encode_batch(list(texts))
    ids = np.array([e.ids for e in encodings], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
    return ids, mask


def _session(model: str, *, threads: int):  # noqa: ANN202 - onnxruntime.InferenceSession
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # One pass runs its operators in order: this graph is a chain, so parallel operators would only contend.
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Idle pool threads spin by default, burning a core the other requests need: with two threads under
    # load a short query took 19 ms spinning against 12 ms without.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3  # warnings about unused initializers are noise at every start
    return ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])


def _load_session(path: Path, threads: int):  # noqa: ANN202
    started = time.perf_counter()
    # From the path, not from bytes already read: ONNX Runtime keeps a serialized copy of a model given as
    # bytes (~110 MB more RSS here).
    session = _session(str(path), threads=threads)
    log.info("loaded the ONNX embedding model %s in %.2f s", path.name, time.perf_counter() - started)
    return session


def _file_sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _manifest_path(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def _write_atomically(path: Path, data: bytes) -> None:
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp_name, 0o644)
        os.replace(tmp_name, path)
    finally:
        Path(tmp_name).unlink(missing_ok=True)


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `lock_path`: two processes starting together export once, not twice."""
    import fcntl

    with lock_path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def _quiet_export_warnings() -> Iterator[None]:
    # The legacy exporter's deprecation notice and the tracer's notes on shape arithmetic in transformers'
    # mask code (constant for this encoder) say nothing an operator can act on; the probe comparison above
    # is the check that matters.
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
