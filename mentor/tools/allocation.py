"""Which of two (model size, tokens) allocations is the better use of a training budget, by the Chinchilla fit.

A decision, not a new formula: compute is C = 6·N·D as in `chinchilla_optimal`, and the loss is the Chinchilla
fit `scaling_law_loss` evaluates (Hoffmann et al. 2022), compared exactly to 50 digits.
"""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction
from typing import Any

from pydantic import Field

from mentor.tools import units
from mentor.tools.calculator import Calculator
from mentor.tools.parsing import Count, PositiveNumber, ToolArgs
from mentor.tools.result import ToolResult, normalised_arguments, to_number
from mentor.tools.scaling import CHINCHILLA_CONSTANTS, FLOPS_PER_PARAM_TOKEN, chinchilla_loss
from mentor.tools.wording import SCALE, PlanContext, PlannedCall, Recognised, count_text

EQUAL = "equal"


class CompareAllocationsArgs(ToolArgs):
    params_a: Count = Field(description='Model parameters N of allocation A, e.g. "13B".')
    tokens_a: Count = Field(description='Training tokens D of allocation A, e.g. "500B".')
    params_b: Count = Field(description='Model parameters N of allocation B, e.g. "40B".')
    tokens_b: Count = Field(description='Training tokens D of allocation B, e.g. "150B".')
    tokens_per_param: PositiveNumber = Field(
        20, description="Compute-optimal tokens per parameter each allocation is set against (Chinchilla: ≈20)."
    )


def _label(params: int, tokens: int) -> str:
    """An allocation as a learner writes it: "13B on 500B tokens"."""
    return f"{units.count(params)} on {units.tokens(tokens)}"


def _loss_text(loss: Decimal) -> str:
    return units.number(Fraction(loss))


def compare_allocations(args: CompareAllocationsArgs) -> ToolResult:
    """Compare two (params, tokens) allocations: compute C = 6·N·D of each and its Chinchilla-fit loss.

    The verdict names the allocation with the lower predicted pretraining loss, L = E + A/N^alpha + B/D^beta
    (Hoffmann et al. 2022, approach 3: E=1.69 A=406.4 B=410.7 alpha=0.34 beta=0.28), and the result says whether the
    two compute budgets are equal and by how much they differ. Tokens per parameter are set against Chinchilla's
    ≈20. The fit predicts pretraining loss only; serving cost favours the smaller model.
    """
    k = FLOPS_PER_PARAM_TOKEN
    sides: dict[str, dict[str, Any]] = {}
    for side, params, tokens in (("a", args.params_a, args.tokens_a), ("b", args.params_b, args.tokens_b)):
        loss, substituted = chinchilla_loss(params, tokens)
        sides[side] = {
            "label": _label(params, tokens),
            "params": params,
            "tokens": tokens,
            "compute": k * params * tokens,
            "loss": loss,
            "ratio": Fraction(tokens, params),
            "substituted": substituted,
        }
    a, b = sides["a"], sides["b"]
    better = EQUAL if a["loss"] == b["loss"] else ("a" if a["loss"] < b["loss"] else "b")
    bigger_compute, smaller_compute = (a, b) if a["compute"] >= b["compute"] else (b, a)
    difference = Fraction(bigger_compute["compute"], smaller_compute["compute"]) - 1
    difference_percent = difference * 100

    if better == EQUAL:
        verdict = EQUAL
        opening = (
            f"Equal: {a['label']} and {b['label']} have the same predicted loss, {_loss_text(a['loss'])} "
            f"nats/token under the Chinchilla fit"
        )
    else:
        winner, loser = (a, b) if better == "a" else (b, a)
        verdict = winner["label"]
        opening = (
            f"{winner['label']}: its predicted loss, {_loss_text(winner['loss'])} nats/token, is "
            f"{_loss_text(loser['loss'] - winner['loss'])} lower than the {_loss_text(loser['loss'])} of "
            f"{loser['label']} under the Chinchilla fit"
        )
    if difference == 0:
        budgets = f"and both use the same compute, {units.flops(a['compute'])}."
    else:
        budgets = (
            f"and the budgets are not equal: {bigger_compute['label']} uses {units.flops(bigger_compute['compute'])}, "
            f"{units.plain(difference_percent)}% more than the {units.flops(smaller_compute['compute'])} of "
            f"{smaller_compute['label']}."
        )
    ratio = units.number(args.tokens_per_param)
    figures = " ".join(
        f"{side['label']}: C = {k} × {units.count(side['params'])} × {units.count(side['tokens'])} "
        f"= {units.flops(side['compute'])}; L = {side['substituted']} = {_loss_text(side['loss'])}; "
        f"{units.number(side['ratio'])} tokens per parameter (Chinchilla-optimal ≈{ratio})."
        for side in (a, b)
    )
    c = CHINCHILLA_CONSTANTS
    constants = ", ".join(f"{name} {units.number(value)}" for name, value in c.items())
    smaller = a if a["params"] < b["params"] else b if b["params"] < a["params"] else None
    serving = (
        f"; and serving cost favours the smaller model, {smaller['label']}: the module's twist is to over-train "
        f"smaller models past Chinchilla for cheap inference (the LLaMA strategy)"
        if smaller is not None
        else ""
    )
    caveats = (
        f"Caveats: the constants are one fit (Hoffmann et al. 2022, approach 3: {constants}) with its own "
        f"uncertainty, so a small difference in loss is not decisive; the fit predicts pretraining loss only, "
        f"not downstream quality{serving}."
    )
    explanation = f"{opening}, {budgets} {figures} {caveats}"
    return ToolResult(
        name="compare_allocations",
        arguments=normalised_arguments(args),
        result={
            "verdict": verdict,
            "better": better,
            "loss_a": float(a["loss"]),
            "loss_b": float(b["loss"]),
            "loss_difference": float(abs(a["loss"] - b["loss"])),
            "compute_flops_a": to_number(a["compute"], name="compute_flops_a"),
            "compute_flops_b": to_number(b["compute"], name="compute_flops_b"),
            "equal_compute": difference == 0,
            "compute_difference_percent": to_number(difference_percent, name="compute_difference_percent"),
            "tokens_per_param_a": to_number(a["ratio"], name="tokens_per_param_a"),
            "tokens_per_param_b": to_number(b["ratio"], name="tokens_per_param_b"),
        },
        explanation=units.tidy(explanation),
    )


# ---- how learners ask --------------------------------------------------------------------------------------

# A model size and its tokens: "13B on 500B tokens", "a 7B model trained on 1T tokens", "40B params with 150B".
ALLOCATION = re.compile(
    rf"(?<![\w.])(\d+(?:\.\d+)?)\s*({SCALE})\b\s*(?:-?\s*param(?:eter)?s?\b\s*)?(?:model\b\s*)?"
    rf"(?:(?:trained|train(?:ing)?)\s+)?(?:on|with|for|over|x|×|@)\s*"
    rf"(\d+(?:\.\d+)?)\s*({SCALE})?\b\s*(tokens?\b)?",
    re.I,
)
COMPARE_WORDS = re.compile(r"\b(vs\.?|versus|or|better|best|which|compare\w*|rather than|instead of)\b", re.I)


def recognise_compare_allocations(text: str, context: PlanContext) -> Recognised:
    """Two allocations set against each other: "13B on 500B tokens vs 40B on 150B tokens: which is better?"."""
    if not COMPARE_WORDS.search(text):
        return None
    found: list[tuple[str, str]] = []
    said_tokens = False
    for match in ALLOCATION.finditer(text):
        params_number, params_scale, tokens_number, tokens_scale, tokens_word = match.groups()
        if not (tokens_scale or tokens_word):
            continue  # "13B with 8 GPUs": a bare number after the size is not a token count
        said_tokens = said_tokens or bool(tokens_word)
        pair = (count_text(params_number, params_scale), count_text(tokens_number, tokens_scale))
        if pair not in found:
            found.append(pair)
    if len(found) < 2 or not said_tokens:
        return None
    (params_a, tokens_a), (params_b, tokens_b) = found[:2]
    arguments = {"params_a": params_a, "tokens_a": tokens_a, "params_b": params_b, "tokens_b": tokens_b}
    return PlannedCall("compare_allocations", arguments)


COMPARE_ALLOCATIONS = Calculator.from_function(
    compare_allocations, title="Allocation comparison", recognise=recognise_compare_allocations
)
