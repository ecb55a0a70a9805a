"""Calibrate the scope decision on labelled questions instead of guessing a constant.

relevance = w · (best cosine similarity in the module) + (1 − w) · (share of topic terms the module uses)
            + a · (margin between the nearest in-scope and out-of-scope example questions, mentor.scope).
The grid search picks the weights and threshold with the best balanced accuracy, counting as equal those within
`TIE` of it (about one question of the smaller class); among equals, the widest gap between the classes, and the
threshold sits in the middle of that gap. A threshold squeezed between two nearly equal scores would flip on the
next question that lands between them. Weights already in use that are among the equals stay (`keep`), their
threshold re-centred in their own widest gap: a refit that changes the best by less than `TIE` (a retrained decision
nudging the coverage share) does not move the settings by a tie-break. Each question's example margin leaves
the question itself out, so the set is not graded on itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mentor.retrieve import Retriever
from mentor.scope import Labelled, ScopeExamples

EXAMPLE_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0)
TIE = 0.005  # balanced accuracies this close count as equal: the wider gap between the classes wins


@dataclass(frozen=True, slots=True)
class ScopeCalibration:
    weight: float
    example_weight: float
    threshold: float
    balanced_accuracy: float
    margin: float
    in_scope: int
    out_of_scope: int
    misclassified: list[str]


def calibrate_scope(
    retriever: Retriever, module_id: str, labelled: list[Labelled], keep: tuple[float, float] | None = None
) -> ScopeCalibration:
    """Grid-search the scope weights and threshold on `labelled` questions about `module_id` (`keep`: the weights
    in use, (w, a), kept if among the best)."""
    examples = ScopeExamples.build(labelled, retriever.embedder)
    features = []
    for row in labelled:
        result = retriever.search(row.question, module_id, 1)
        vector = retriever.embedder.embed_query(retriever.modules[module_id].words.read(row.question)[0])  # as read
        margin = examples.margin(module_id, vector, leave_out=row.question)
        features.append((result.dense_max, result.coverage, margin, row.in_scope, row.question))
    return fit(features, keep)


# One labelled question as the grid search reads it: best dense similarity, topic-word coverage, example margin,
# label, and the question (to name it when misclassified).
Feature = tuple[float, float, float, bool, str]


def fit(features: list[Feature], keep: tuple[float, float] | None = None) -> ScopeCalibration:
    """The weights and threshold with the best balanced accuracy (within `TIE`), then the widest gap; the weights
    `keep` (w, a) if they are among those best, with their widest gap."""
    positives = sum(1 for f in features if f[3])
    negatives = len(features) - positives
    candidates: list[tuple[float, float, float, float, float]] = []  # (accuracy, gap, weight, example w., threshold)
    for example_weight in EXAMPLE_WEIGHTS:
        for step in range(21):
            weight = step / 20
            scored = sorted((weight * d + (1 - weight) * c + example_weight * m, y) for d, c, m, y, _ in features)
            for i in range(1, len(scored)):
                low, high = scored[i - 1][0], scored[i][0]
                if high <= low:
                    continue  # no threshold separates equal scores
                tp = sum(1 for s, y in scored[i:] if y)
                tn = sum(1 for s, y in scored[:i] if not y)
                accuracy = (tp / positives + tn / negatives) / 2
                candidates.append((accuracy, high - low, weight, example_weight, (low + high) / 2))
    top = max(c[0] for c in candidates)
    equals = [c for c in candidates if c[0] >= top - TIE]
    kept = [c for c in equals if keep is not None and all(map(math.isclose, c[2:4], keep))]
    best = max(kept or equals, key=lambda c: (c[1], c[0]))
    accuracy, gap, weight, example_weight, threshold = best
    wrong = [q for d, c, m, y, q in features if (weight * d + (1 - weight) * c + example_weight * m >= threshold) != y]
    return ScopeCalibration(
        round(weight, 2), example_weight, round(threshold, 4), accuracy, gap, positives, negatives, wrong
    )
