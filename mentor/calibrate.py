"""Calibrate the scope decision on labelled questions instead of guessing a constant.

relevance = w · (best cosine similarity in the module) + (1 − w) · (share of topic terms the module uses).
The grid search picks the weight and threshold with the best balanced accuracy; among equals, the widest
gap between the classes, and the threshold sits in the middle of that gap.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from mentor.errors import InvalidInput
from mentor.retrieve import Retriever


@dataclass(frozen=True, slots=True)
class ScopeCalibration:
    weight: float
    threshold: float
    balanced_accuracy: float
    margin: float
    in_scope: int
    out_of_scope: int
    misclassified: list[str]


def load_labelled(path: Path) -> list[tuple[str, bool]]:
    """Read `{"q": ..., "in_scope": bool}` lines."""
    try:
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        labelled = [(row["q"], bool(row["in_scope"])) for row in rows]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InvalidInput(f"{path}: expected JSON lines with 'q' and 'in_scope' ({exc})") from exc
    if not any(y for _, y in labelled) or all(y for _, y in labelled):
        raise InvalidInput(f"{path}: needs both in-scope and out-of-scope questions")
    return labelled


def calibrate_scope(retriever: Retriever, module_id: str, labelled: list[tuple[str, bool]]) -> ScopeCalibration:
    """Grid-search the scope weight and threshold on `labelled` questions about `module_id`."""
    features = []
    for question, in_scope in labelled:
        result = retriever.search(question, module_id, 1)
        features.append((result.dense_max, result.coverage, in_scope, question))
    positives = sum(1 for f in features if f[2])
    negatives = len(features) - positives
    best: tuple[float, float, float, float] | None = None  # (accuracy, margin, weight, threshold)
    for step in range(21):
        weight = step / 20
        scored = sorted((weight * d + (1 - weight) * c, y) for d, c, y, _ in features)
        for i in range(1, len(scored)):
            low, high = scored[i - 1][0], scored[i][0]
            if high <= low:
                continue  # no threshold separates equal scores
            threshold = (low + high) / 2
            tp = sum(1 for s, y in scored[i:] if y)
            tn = sum(1 for s, y in scored[:i] if not y)
            accuracy = (tp / positives + tn / negatives) / 2
            candidate = (accuracy, high - low, weight, threshold)
            if best is None or candidate[:2] > best[:2]:
                best = candidate
    assert best is not None
    accuracy, margin, weight, threshold = best
    wrong = [q for d, c, y, q in features if (weight * d + (1 - weight) * c >= threshold) != y]
    return ScopeCalibration(round(weight, 2), round(threshold, 4), accuracy, margin, positives, negatives, wrong)
