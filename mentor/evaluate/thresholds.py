"""The CI gate: compare metrics with the bounds in eval/thresholds.toml, each bound with its reason.

```toml
[overall]
retrieval_recall_at_k = { min = 0.9, reason = "..." }
[category.concept]
cited_section_hit = { min = 0.85, reason = "..." }
[engine.extractive]
latency_p95_ms = { max = 1500, reason = "..." }
```

`min` and `max` are inclusive. A metric with no data (n = 0) fails unless its bound says `allow_missing = true`.
An `[engine.X]` table applies only when engine X answered in the run (an LLM run has no extractive latency).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from mentor.errors import InvalidInput
from mentor.evaluate.golden import CATEGORIES
from mentor.evaluate.metrics import METRICS

BOUND_KEYS = frozenset({"min", "max", "reason", "allow_missing"})


def load_thresholds(path: Path) -> dict[str, Any]:
    """Read the thresholds file; raise InvalidInput with the path when it is not valid TOML."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput(f"{path}: not valid TOML ({exc})") from None


def _scopes(config: dict[str, Any], metrics: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any] | None]]:
    """(label, bounds, measured metrics or None when the scope did not run) for every table in the file."""
    scopes: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = []
    if "overall" in config:
        scopes.append(("overall", config["overall"], metrics.get("overall", {})))
    for category, bounds in config.get("category", {}).items():
        scopes.append((f"category {category}", bounds, metrics.get("by_category", {}).get(category, {})))
    for engine, bounds in config.get("engine", {}).items():
        scopes.append((f"engine {engine}", bounds, metrics.get("by_engine", {}).get(engine)))
    return scopes


def check_thresholds(metrics: dict[str, Any], thresholds_path: Path) -> list[str]:
    """Return every failed bound as a plain sentence with its reason; an empty list means the gate passes."""
    config = load_thresholds(thresholds_path)
    failures: list[str] = []
    for key in sorted(set(config) - {"overall", "category", "engine", "golden_version"}):
        failures.append(f"{thresholds_path.name}: unknown table [{key}] (use overall, category.<name>, engine.<name>)")
    for category in sorted(set(config.get("category", {})) - set(CATEGORIES)):
        failures.append(f"{thresholds_path.name}: [category.{category}] is not a golden-set category")
    for label, bounds, measured in _scopes(config, metrics):
        for name, bound in bounds.items():
            where = f"{label} {name}"
            if name not in METRICS:
                failures.append(f"{thresholds_path.name}: {where} is not a metric ({', '.join(METRICS)})")
                continue
            if not isinstance(bound, dict) or set(bound) - BOUND_KEYS or not ({"min", "max"} & set(bound)):
                failures.append(f"{thresholds_path.name}: {where} needs {{ min = ..., reason = ... }} or max")
                continue
            reason = bound.get("reason")
            if not isinstance(reason, str) or not reason.strip():
                failures.append(f"{thresholds_path.name}: {where} has no reason; every bound says why it is set")
                continue
            if measured is None:
                continue  # an engine that did not answer in this run
            metric = measured.get(name, {"value": None, "n": 0})
            value, n = metric.get("value"), metric.get("n", 0)
            if value is None:
                if not bound.get("allow_missing", False):
                    failures.append(f"{where} has no data (n = {n}), so its bound cannot be checked: {reason}")
                continue
            if "min" in bound and value < bound["min"]:
                failures.append(f"{where} is {value:g} (n = {n}), below the minimum {bound['min']:g}: {reason}")
            if "max" in bound and value > bound["max"]:
                failures.append(f"{where} is {value:g} (n = {n}), above the maximum {bound['max']:g}: {reason}")
    return failures
