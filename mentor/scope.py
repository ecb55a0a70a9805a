"""Labelled example questions as a third scope signal: is a new question nearer the module's in-scope examples or
its out-of-scope ones?

Two signals decide scope without examples (mentor.retrieve): how similar the best chunk is, and what share of
the question's topic words the module uses. Both are fooled the same two ways: a neighbour topic that shares a
word with the module ("how does ring attention save memory?") looks in scope, and a covered question written in
log lines or abbreviations looks out of it. The calibration set (eval/calibration/scope.jsonl) holds questions of
both kinds, labelled; the margin between the nearest in-scope and the nearest out-of-scope examples tells the two
apart where the words cannot (balanced accuracy on its first 263 questions, leave-one-out: 0.897 without it,
0.983 with it and jargon spelled out).

Examples belong to a module (`module_id` on each line); a module without examples gets a margin of 0.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mentor.embeddings import Embedder, embed_cached
from mentor.errors import InvalidInput

log = logging.getLogger(__name__)
NEAREST = 3  # examples of each label averaged: one odd example does not decide
_BUILT: dict[tuple[str, int], tuple[Embedder, ScopeExamples]] = {}  # see ScopeExamples.load
Reading = Callable[[str, str], str]  # (module id, question) -> the question as the chat reads it
_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class Labelled:
    """One labelled question of the calibration set."""

    module_id: str
    question: str
    in_scope: bool


@dataclass(frozen=True, slots=True)
class ModuleExamples:
    """One module's example questions, embedded: the in-scope ones and the out-of-scope ones."""

    inside: np.ndarray
    outside: np.ndarray
    inside_text: tuple[str, ...] = ()
    outside_text: tuple[str, ...] = ()

    def margin(self, vector: np.ndarray, *, leave_out: str | None = None) -> float:
        """Mean similarity to the nearest in-scope examples minus that to the nearest out-of-scope ones.

        `leave_out` drops one example (the question itself, when calibrating on the same set).
        """
        return _nearest(self.inside, self.inside_text, vector, leave_out) - _nearest(
            self.outside, self.outside_text, vector, leave_out
        )


def _nearest(vectors: np.ndarray, texts: Sequence[str], vector: np.ndarray, leave_out: str | None) -> float:
    similarities = vectors @ vector
    if leave_out is not None:
        similarities = similarities[[text != leave_out for text in texts]]
    if not len(similarities):
        return 0.0
    return float(np.sort(similarities)[-NEAREST:].mean())


@dataclass(frozen=True, slots=True)
class ScopeExamples:
    """Every module's examples; built once per process (embedding a few hundred questions takes a second or two)."""

    modules: Mapping[str, ModuleExamples] = field(default_factory=dict)

    def margin(self, module_id: str, vector: np.ndarray, *, leave_out: str | None = None) -> float:
        """The module's example margin for a question vector; 0 for a module without examples."""
        examples = self.modules.get(module_id)
        return 0.0 if examples is None else examples.margin(vector, leave_out=leave_out)

    @classmethod
    def build(
        cls,
        labelled: Sequence[Labelled],
        embedder: Embedder,
        *,
        read: Reading = lambda module_id, text: text,
        cache_dir: Path | None = None,
    ) -> ScopeExamples:
        """Embed the labelled questions, grouped by module (a module needs examples of both labels).

        With `cache_dir`, the vectors are kept there, named by a digest of the texts and the embedder, and read
        back by every later process: embedding 263 questions cost each start ~1.5 s, a third of a cold
        `mentor ask`, for vectors that change only when the file or the model does.
        """
        # Read as the chat reads a question (its module's spelling and glossary), so both sides compare alike.
        texts = [read(row.module_id, row.question) for row in labelled]
        vectors = embed_cached(embedder, texts, cache_dir, kind="scope-examples") if labelled else np.zeros((0, 1))
        modules: dict[str, ModuleExamples] = {}
        for module_id in dict.fromkeys(row.module_id for row in labelled):
            rows = [(row, vector) for row, vector in zip(labelled, vectors, strict=True) if row.module_id == module_id]
            inside = [(row.question, vector) for row, vector in rows if row.in_scope]
            outside = [(row.question, vector) for row, vector in rows if not row.in_scope]
            if inside and outside:
                modules[module_id] = ModuleExamples(
                    np.asarray([v for _, v in inside]),
                    np.asarray([v for _, v in outside]),
                    tuple(q for q, _ in inside),
                    tuple(q for q, _ in outside),
                )
        return cls(modules)

    @classmethod
    def load(
        cls, path: Path | None, embedder: Embedder, *, read: Reading = lambda module_id, text: text,
        cache_dir: Path | None = None,
    ) -> ScopeExamples:  # fmt: skip
        """The examples in `path`; none when there is no path or no such file (scope then uses two signals).

        Built once per file version and embedder in a process: every catalog (a reload, a test's runtime) shares
        them instead of embedding the same few hundred questions again.
        """
        if path is None or not path.is_file():
            if path is not None:
                # A relative default read from another directory is the usual cause: the threshold was calibrated
                # with the examples' margin, and without it covered questions ("what is ZeRO?") read out of scope.
                log.warning(
                    "no scope examples at %s (resolved from %s): scope is decided by similarity and topic words "
                    "alone, below the calibrated threshold for covered questions; set MENTOR_SCOPE_EXAMPLES",
                    path,
                    path.resolve().parent,
                )
            return cls()
        labelled = load_labelled(path)
        texts = "\x1e".join(f"{row.module_id}\x1f{read(row.module_id, row.question)}" for row in labelled)
        key = (hashlib.sha256(texts.encode()).hexdigest(), id(embedder))
        with _LOCK:
            built = _BUILT.get(key)
            if built is None or built[0] is not embedder:
                built = _BUILT[key] = (embedder, cls.build(labelled, embedder, read=read, cache_dir=cache_dir))
        return built[1]


def load_labelled(path: Path, module_id: str | None = None) -> list[Labelled]:
    """Read `{"module_id": ..., "q": ..., "in_scope": bool}` lines; `module_id` fills lines without one."""
    try:
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        labelled = [Labelled(row.get("module_id") or module_id or "", row["q"], bool(row["in_scope"])) for row in rows]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InvalidInput(f"{path}: expected JSON lines with 'module_id', 'q' and 'in_scope' ({exc})") from exc
    if any(not row.module_id or not isinstance(row.question, str) for row in labelled):
        raise InvalidInput(f"{path}: every line needs a module_id and a question string")
    if not any(row.in_scope for row in labelled) or all(row.in_scope for row in labelled):
        raise InvalidInput(f"{path}: needs both in-scope and out-of-scope questions")
    return labelled
