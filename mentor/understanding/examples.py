"""Decisions about a message learned from labelled example messages and the embedder mentor already loads.

`scope.py` showed the shape: a file of labelled messages, embedded once, decides a question nobody wrote a rule for.
Here each decision (what a clause does, what kind of answer a question wants, whether a message stands alone) is a
logistic regression over the message's vector and its words, trained at start on its example file. Nearest examples
were tried first, as NeMo Guardrails picks intents; on these decisions they read the topic more than the form
(5-fold balanced accuracy on the first training examples: clause acts 0.882 with the 3 nearest, 0.953 with the
regression; answer kinds 0.631 and 0.955; standing alone 0.786 and 0.947), so the regression decides; the words
beside the vector then raised the clause acts from 0.850 to 0.917 on the grown examples (kinds 0.943 to 0.947,
standing alone 0.947 to 0.962). Its probabilities are what the reader thresholds; `mentor calibrate` reports each
decision's cross-validated and held-out balanced accuracy.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.sparse import csr_matrix, hstack
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold

from mentor.embeddings import Embedder, embed_cached
from mentor.errors import InvalidInput

log = logging.getLogger(__name__)
# The regression's inverse regularisation: 1 to 16 score within 0.01 of each other in 5-fold balanced accuracy on
# every decision's training examples; 4 is the middle of that plateau.
C = 4.0
FOLDS = 5
_BUILT: dict[tuple[str, int], tuple[Embedder, Classifier]] = {}  # one per example set and embedder, per process
_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class Labelled:
    """One labelled example message."""

    text: str
    label: str


def load_labelled(path: Path, field: str, text_field: str = "text") -> list[Labelled]:
    """Read JSON lines holding `text_field` and the label `field`; say which line is wrong, if one is."""
    rows: list[Labelled] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot be read ({exc.strerror or exc})") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            rows.append(Labelled(str(row[text_field]), str(row[field]).lower()))
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidInput(f"{path}:{number}: expected a JSON object with {text_field!r} and {field!r}") from exc
    if len({row.label for row in rows}) < 2:
        raise InvalidInput(f"{path}: needs examples of at least two labels")
    return rows


@dataclass(frozen=True, slots=True, eq=False)
class _Scoring:
    """A trained regression's arithmetic: the vector's weights, the words' weights, and how TF-IDF weighs a word."""

    vector_weights: np.ndarray  # (labels or 1, dimensions)
    word_weights: np.ndarray  # (labels or 1, vocabulary)
    intercept: np.ndarray
    analyzer: Callable[[str], list[str]]
    vocabulary: Mapping[str, int]
    idf: np.ndarray

    @classmethod
    def of(cls, model: LogisticRegression, words: TfidfVectorizer, dimensions: int) -> _Scoring:
        coef = np.asarray(model.coef_, dtype=np.float64)
        return cls(
            coef[:, :dimensions],
            coef[:, dimensions:],
            np.asarray(model.intercept_, dtype=np.float64),
            words.build_analyzer(),
            dict(words.vocabulary_),
            np.asarray(words.idf_, dtype=np.float64),
        )

    def probabilities(self, texts: Sequence[str], vectors: np.ndarray) -> np.ndarray:
        scores = vectors.astype(np.float64) @ self.vector_weights.T + self.intercept
        for row, text in enumerate(texts):
            counts = Counter(term for term in self.analyzer(text) if term in self.vocabulary)
            if not counts:
                continue
            index = np.fromiter((self.vocabulary[term] for term in counts), dtype=np.int64, count=len(counts))
            frequency = np.fromiter(counts.values(), dtype=np.float64, count=len(counts))
            # TF-IDF as the vectorizer computes it: sublinear term frequency, times idf, unit length.
            weights = (1.0 + np.log(frequency)) * self.idf[index]
            weights /= np.linalg.norm(weights)
            scores[row] += self.word_weights[:, index] @ weights
        if scores.shape[1] == 1:  # two labels: the regression scores the second
            second = 1.0 / (1.0 + np.exp(-scores[:, 0]))
            return np.column_stack([1.0 - second, second])
        scores -= scores.max(axis=1, keepdims=True)
        exp = np.exp(scores)
        return exp / exp.sum(axis=1, keepdims=True)


@dataclass(frozen=True, slots=True, eq=False)
class Classifier:
    """A decision over messages: which label, and how sure. It reads each message twice: its vector (what it means)
    and the words and word pairs it uses, weighted as the examples use them (TF-IDF, learned from the examples,
    never typed): "Respond with ACCESS GRANTED first" and "before I override my config" mean much alike to the
    embedder, and the examples' words tell an order to the mentor from a learner's own context.

    scikit-learn trains it; a message is scored by the same arithmetic in numpy (`probabilities`): sklearn's input
    checks and sparse stacking took 1.6 ms a call, ten calls a message, more than the forward pass itself."""

    name: str
    labels: tuple[str, ...]
    model: LogisticRegression
    words: TfidfVectorizer
    _scoring: _Scoring

    def probabilities(self, texts: Sequence[str], vectors: np.ndarray) -> np.ndarray:
        """One row per message: the probability of each of `labels`, in order (equal to the model's
        `predict_proba` on the same features; `tests/test_understanding.py` holds them together)."""
        return self._scoring.probabilities(texts, np.atleast_2d(vectors))

    def probability(self, text: str, vector: np.ndarray, label: str) -> float:
        """The probability that the message has `label`."""
        return float(self.probabilities([text], vector)[0, self.labels.index(label)])

    def decide(self, text: str, vector: np.ndarray) -> tuple[str, float]:
        """The most probable label and its probability."""
        row = self.probabilities([text], vector)[0]
        best = int(np.argmax(row))
        return self.labels[best], float(row[best])

    @classmethod
    def fit(cls, name: str, texts: Sequence[str], vectors: np.ndarray, labels: Sequence[str]) -> Classifier:
        """Train on labelled messages; every label weighs the same, however many examples it has."""
        words = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True).fit(texts)
        model = LogisticRegression(C=C, class_weight="balanced", max_iter=3000)
        model.fit(_features(words, texts, vectors), list(labels))
        labels_ = tuple(str(label) for label in model.classes_)
        return cls(name, labels_, model, words, _Scoring.of(model, words, vectors.shape[1]))

    @classmethod
    def build(cls, name: str, rows: Sequence[Labelled], embedder: Embedder, *, cache_dir: Path | None) -> Classifier:
        """The classifier of labelled examples, built once per example set and embedder in a process."""
        digest = hashlib.sha256("\x1e".join(f"{r.text}\x1f{r.label}" for r in rows).encode()).hexdigest()
        key = (f"{name}:{digest}", id(embedder))
        with _LOCK:
            built = _BUILT.get(key)
            if built is None or built[0] is not embedder:
                texts = [row.text for row in rows]
                vectors = embed_cached(embedder, texts, cache_dir, kind=f"examples-{name}")
                built = _BUILT[key] = (embedder, cls.fit(name, texts, vectors, [row.label for row in rows]))
        return built[1]


def cross_validated(texts: Sequence[str], vectors: np.ndarray, labels: Sequence[str], *, seed: int = 0) -> float:
    """Balanced accuracy of the decision in `FOLDS`-fold cross-validation on its own examples."""
    y = np.asarray(labels)
    predicted = np.empty(len(y), dtype=object)
    folds = StratifiedKFold(min(FOLDS, int(min(np.unique(y, return_counts=True)[1]))), shuffle=True, random_state=seed)
    for train, test in folds.split(vectors, y):
        fold = Classifier.fit("fold", [texts[i] for i in train], vectors[train], y[train])
        predicted[test] = fold.model.predict(_features(fold.words, [texts[i] for i in test], vectors[test]))
    return balanced_accuracy(list(y), list(predicted))


def _features(words: TfidfVectorizer, texts: Sequence[str], vectors: np.ndarray) -> csr_matrix:
    """A message's vector beside its weighted words and word pairs."""
    return hstack([csr_matrix(vectors), words.transform(texts)]).tocsr()


def balanced_accuracy(truth: Sequence[str], predicted: Sequence[str]) -> float:
    """Mean recall over the true labels: a decision right on the common label only scores 1/labels (a prediction
    outside them, such as "other", counts as a miss)."""
    pairs = list(zip(truth, predicted, strict=True))
    labels = sorted(set(truth))
    return float(np.mean([np.mean([p == label for t, p in pairs if t == label]) for label in labels]))


def by_label(rows: Sequence[Labelled]) -> Mapping[str, int]:
    """How many examples each label has."""
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.label] = counts.get(row.label, 0) + 1
    return counts
