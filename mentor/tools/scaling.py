"""Scaling laws: the Chinchilla-optimal model size, the fitted loss curves, and training time from FLOPs."""

from __future__ import annotations

import math
import re
from decimal import MAX_EMAX, MIN_EMIN, ROUND_HALF_EVEN, Context, Decimal
from fractions import Fraction
from typing import Any

from pydantic import Field, model_validator

from mentor.errors import InvalidInput
from mentor.tools import units
from mentor.tools.calculator import Calculator
from mentor.tools.hardware import GPU_LABELS, PEAK_FLOPS_PER_GPU
from mentor.tools.parsing import Count, PositiveNumber, ToolArgs, choice_type, number_type, to_fraction
from mentor.tools.result import ToolResult, normalised_arguments, to_number
from mentor.tools.wording import (
    GPUS,
    MEMORY_WORDS,
    PlanContext,
    PlannedCall,
    Recognised,
    eval_power,
    find_params,
    find_tokens,
    first,
)

# C ≈ 6·N·D: 2 FLOPs per parameter per token forward, 4 backward (Kaplan et al. 2020, §2.1).
FLOPS_PER_PARAM_TOKEN = 6


class ChinchillaOptimalArgs(ToolArgs):
    params: Count | None = Field(None, description='Model parameters N, e.g. "70B" (give exactly one of three).')
    tokens: Count | None = Field(None, description='Training tokens D, e.g. "1.4T" (give exactly one of three).')
    compute_flops: PositiveNumber | None = Field(
        None, description='Training compute C in FLOPs, e.g. "5.88e23" (give exactly one of three).'
    )
    tokens_per_param: PositiveNumber = Field(20, description="Compute-optimal tokens per parameter (≈20).")

    @model_validator(mode="after")
    def _exactly_one(self) -> ChinchillaOptimalArgs:
        given = [name for name in ("params", "tokens", "compute_flops") if getattr(self, name) is not None]
        if len(given) != 1:
            got = " and ".join(given) if given else "none"
            raise ValueError(f"give exactly one of params, tokens or compute_flops (got {got})")
        return self


def _sqrt_nearest(value: Fraction) -> tuple[int, bool]:
    """Return the whole number nearest √value (ties to even) and whether √value is that number exactly."""
    root = math.isqrt(value.numerator // value.denominator)  # ⌊√x⌋ = isqrt(⌊x⌋) for x ≥ 0
    midpoint = (root + Fraction(1, 2)) ** 2
    if value > midpoint or (value == midpoint and root % 2 == 1):
        root += 1
    return root, Fraction(root) ** 2 == value


def chinchilla_optimal(args: ChinchillaOptimalArgs) -> ToolResult:
    """Compute the Chinchilla compute-optimal size from one of params, tokens or compute: D = 20·N, C = 6·N·D.

    Hoffmann et al. 2022: about 20 tokens per parameter. Params and tokens are whole numbers, rounded to the
    nearest (exact integer square root) when they do not come out whole; a given compute_flops is kept as is.
    """
    ratio = args.tokens_per_param
    ratio_text = units.number(ratio)
    k = FLOPS_PER_PARAM_TOKEN
    if args.compute_flops is not None:
        compute = args.compute_flops
        params, params_exact = _sqrt_nearest(compute / (k * ratio))
        tokens, tokens_exact = _sqrt_nearest(compute * ratio / k)
        eq_params = "=" if params_exact else "≈"
        eq_tokens = "=" if tokens_exact else "≈"
        explanation = (
            f"N = √(C / ({k} × {ratio_text})) = √({units.flops(compute)} / {units.number(k * ratio)}) "
            f"{eq_params} {units.count(params)} params; "
            f"D = √(C × {ratio_text} / {k}) {eq_tokens} {units.tokens(tokens)}"
        )
    elif args.params is not None:
        params = args.params
        tokens = round(ratio * params)
        compute = Fraction(k * params * tokens)
        explanation = (
            f"D = {ratio_text} tokens/param × {units.count(params)} params "
            f"{'=' if tokens == ratio * params else '≈'} {units.tokens(tokens)}; "
            f"C = {k} × N × D = {k} × {units.count(params)} × {units.count(tokens)} = {units.flops(compute)}"
        )
    else:
        assert args.tokens is not None  # guaranteed by _exactly_one
        tokens = args.tokens
        params = round(tokens / ratio)
        compute = Fraction(k * params * tokens)
        explanation = (
            f"N = {units.tokens(tokens)} / {ratio_text} tokens/param "
            f"{'=' if params == tokens / ratio else '≈'} {units.count(params)} params; "
            f"C = {k} × N × D = {k} × {units.count(params)} × {units.count(tokens)} = {units.flops(compute)}"
        )
    if params < 1 or tokens < 1:
        given = next(name for name in ("compute_flops", "params", "tokens") if getattr(args, name) is not None)
        raise InvalidInput(f"{given}: too small, the optimal model would have under 1 parameter or 1 token")
    explanation += f" (Chinchilla rule, Hoffmann et al. 2022: ≈{ratio_text} tokens per parameter)."
    return ToolResult(
        name="chinchilla_optimal",
        arguments=normalised_arguments(args),
        result={
            "params": params,
            "tokens": tokens,
            "compute_flops": to_number(compute, name="compute_flops"),
        },
        explanation=units.tidy(explanation),
    )


# Hoffmann et al. 2022, eq. 10 / approach 3 fit: L(N, D) = E + A/N^alpha + B/D^beta.
CHINCHILLA_CONSTANTS = {
    "E": Fraction("1.69"),
    "A": Fraction("406.4"),
    "B": Fraction("410.7"),
    "alpha": Fraction("0.34"),
    "beta": Fraction("0.28"),
}
# Kaplan et al. 2020, eq. 1.5: L(N, D) = [(N_c/N)^(alpha_N/alpha_D) + D_c/D]^alpha_D, with the paper's joint fit
# of that equation (§4.2, Table 2 "Fits to L(N, D)"). The §1.2 constants (N_c 8.8e13, alpha_D 0.095, D_c 5.4e13)
# fit eq. 1.1 and eq. 1.2 one variable at a time; the paper notes they differ slightly from the joint fit. Only the
# joint fit gives eq. 4.4's D ≳ 5e3·N^0.74 (0.74 ≈ 0.076/0.103), the overfitting rule the paper draws from eq. 1.5.
KAPLAN_CONSTANTS = {
    "N_c": Fraction("6.4e13"),
    "D_c": Fraction("1.8e13"),
    "alpha_N": Fraction("0.076"),
    "alpha_D": Fraction("0.103"),
}
LAW_CONSTANTS = {"chinchilla": CHINCHILLA_CONSTANTS, "kaplan": KAPLAN_CONSTANTS}
# 50 significant digits: the powers are irrational, so the loss is exact to far below float precision.
DECIMAL = Context(prec=50, rounding=ROUND_HALF_EVEN, Emax=MAX_EMAX, Emin=MIN_EMIN)


class ScalingLawLossArgs(ToolArgs):
    params: Count = Field(description='Model parameters N, e.g. "70B".')
    tokens: Count = Field(description='Training tokens D, e.g. "1.4T".')
    law: choice_type("chinchilla", "kaplan") = Field(  # type: ignore[valid-type]
        "chinchilla",
        description="Which fitted law: chinchilla (Hoffmann 2022) or kaplan (Kaplan 2020, eq. 1.5 with Table 2's fit).",
    )
    constants: dict[str, number_type(at_least=0)] | None = Field(  # type: ignore[valid-type]
        None,
        description=("Override fitted constants: chinchilla E, A, B, alpha, beta; kaplan N_c, D_c, alpha_N, alpha_D."),
    )

    @model_validator(mode="after")
    def _known_constants(self) -> ScalingLawLossArgs:
        allowed = LAW_CONSTANTS[self.law]
        for key, value in (self.constants or {}).items():
            if key not in allowed:
                raise ValueError(f"constants.{key}: not a constant of the {self.law} law; use {', '.join(allowed)}")
            if key != "E" and value == 0:
                raise ValueError(f"constants.{key}: must be greater than 0")
        return self


def _dec(value: Fraction | int) -> Decimal:
    exact = Fraction(value)
    return DECIMAL.divide(Decimal(exact.numerator), Decimal(exact.denominator))


def _power(base: Fraction | int, exponent: Fraction) -> Decimal:
    """Return base**exponent to 50 digits (base > 0)."""
    return DECIMAL.exp(DECIMAL.multiply(_dec(exponent), DECIMAL.ln(_dec(base))))


def chinchilla_loss(n: int, d: int, c: dict[str, Fraction] = CHINCHILLA_CONSTANTS) -> tuple[Decimal, str]:
    """Evaluate the Chinchilla fit to 50 digits; return the loss and the substituted sum, without its result."""
    model_term = DECIMAL.divide(_dec(c["A"]), _power(n, c["alpha"]))
    data_term = DECIMAL.divide(_dec(c["B"]), _power(d, c["beta"]))
    loss = DECIMAL.add(DECIMAL.add(_dec(c["E"]), model_term), data_term)
    return loss, (
        f"{units.number(c['E'])} + {units.number(c['A'])}/{units.count(n)}^{units.number(c['alpha'])} "
        f"+ {units.number(c['B'])}/{units.count(d)}^{units.number(c['beta'])} "
        f"= {units.number(c['E'])} + {units.number(Fraction(model_term))} "
        f"+ {units.number(Fraction(data_term))}"
    )


def _loss(law: str, c: dict[str, Fraction], n: int, d: int) -> tuple[Decimal, str]:
    """Evaluate one law to 50 digits; return the loss and the substituted formula."""
    if law == "chinchilla":
        loss, substituted = chinchilla_loss(n, d, c)
        return loss, f"Chinchilla fit (Hoffmann et al. 2022): L = E + A/N^alpha + B/D^beta = {substituted}"
    model_term = _power(Fraction(c["N_c"]) / n, c["alpha_N"] / c["alpha_D"])
    data_term = _dec(Fraction(c["D_c"]) / d)
    loss = _power(Fraction(DECIMAL.add(model_term, data_term)), c["alpha_D"])
    return loss, (
        f"Kaplan fit (Kaplan et al. 2020, eq. 1.5 with the Table 2 joint fit): "
        f"L = [(N_c/N)^(alpha_N/alpha_D) + D_c/D]^alpha_D "
        f"= [({units.number(c['N_c'])}/{units.count(n)})^({units.number(c['alpha_N'])}/"
        f"{units.number(c['alpha_D'])}) + {units.number(c['D_c'])}/{units.count(d)}]"
        f"^{units.number(c['alpha_D'])} "
        f"= [{units.number(Fraction(model_term))} + {units.number(Fraction(data_term))}]"
        f"^{units.number(c['alpha_D'])}"
    )


def scaling_law_loss(args: ScalingLawLossArgs) -> ToolResult:
    """Predict pretraining loss from params and tokens with the Chinchilla (default) or Kaplan fitted law.

    Chinchilla: L = E + A/N^alpha + B/D^beta (Hoffmann et al. 2022, eq. 10, E=1.69 A=406.4 B=410.7
    alpha=0.34 beta=0.28). Kaplan: L = [(N_c/N)^(alpha_N/alpha_D) + D_c/D]^alpha_D (Kaplan et al. 2020,
    eq. 1.5, with its Table 2 joint fit N_c=6.4e13 D_c=1.8e13 alpha_N=0.076 alpha_D=0.103; N counts
    non-embedding parameters). Fractional powers are irrational, so they are computed in 50-digit decimal,
    then rounded to a float.
    """
    c = {**LAW_CONSTANTS[args.law], **(args.constants or {})}
    try:
        loss, explanation = _loss(args.law, c, args.params, args.tokens)
    except ArithmeticError:  # decimal Overflow / DivisionByZero from extreme overridden constants
        raise InvalidInput("constants: these constants put the loss out of range") from None
    loss_value = float(loss)
    if not math.isfinite(loss_value):
        raise InvalidInput("constants: these constants put the loss out of range")
    return ToolResult(
        name="scaling_law_loss",
        arguments=normalised_arguments(args),
        result={
            "loss": loss_value,
            "constants": {key: to_number(value, name=f"constants.{key}") for key, value in c.items()},
        },
        explanation=units.tidy(f"{explanation} = {units.number(Fraction(loss))} nats/token."),
    )


class TrainingTimeArgs(ToolArgs):
    params: Count = Field(description='Model parameters N, e.g. "70B".')
    tokens: Count = Field(description='Training tokens D, e.g. "1.4T".')
    num_gpus: Count = Field(description="Number of GPUs (or TPU chips) training together.")
    peak_flops_per_gpu: PositiveNumber | None = Field(
        None, description='Peak FLOP/s of one GPU, e.g. "312e12"; give this or gpu, not both.'
    )
    gpu: choice_type(*PEAK_FLOPS_PER_GPU) | None = Field(  # type: ignore[valid-type]
        None,
        description="A named accelerator whose dense bf16 peak is used; give this or peak_flops_per_gpu.",
    )
    mfu: number_type(above=0, at_most=1) = Field(  # type: ignore[valid-type]
        0.4, description="Model FLOPs utilisation: achieved / peak FLOP/s, in (0, 1]; 0.4 is typical."
    )
    flops_per_param_token: PositiveNumber = Field(
        FLOPS_PER_PARAM_TOKEN,
        description="Training FLOPs per parameter per token (6; 8 with full recompute).",
    )

    @model_validator(mode="after")
    def _one_peak(self) -> TrainingTimeArgs:
        if self.peak_flops_per_gpu is None and self.gpu is None:
            raise ValueError("peak_flops_per_gpu: give peak_flops_per_gpu (FLOP/s) or gpu (a named accelerator)")
        if self.peak_flops_per_gpu is not None and self.gpu is not None:
            raise ValueError("peak_flops_per_gpu: give either peak_flops_per_gpu or gpu, not both")
        return self


def training_time(args: TrainingTimeArgs) -> ToolResult:
    """Estimate wall-clock training time: C = 6·N·D FLOPs divided by num_gpus × peak FLOP/s × MFU.

    Named gpu peaks are dense bf16 (fp16 on V100) FLOP/s: a100 312e12, h100 = H100 SXM 989.4e12, v100 125e12,
    a10 125e12, l4 121e12, tpu_v4 275e12, tpu_v5e 197e12.
    """
    peak = args.peak_flops_per_gpu if args.gpu is None else PEAK_FLOPS_PER_GPU[args.gpu]
    assert peak is not None  # guaranteed by _one_peak
    compute = args.flops_per_param_token * args.params * args.tokens
    throughput = args.num_gpus * peak * args.mfu
    seconds = compute / throughput
    days = seconds / units.SECONDS_PER_DAY
    peak_label = f" ({GPU_LABELS[args.gpu]})" if args.gpu else ""
    explanation = (
        f"compute = {units.number(args.flops_per_param_token)} × {units.count(args.params)} params × "
        f"{units.tokens(args.tokens)} = {units.flops(compute)}; "
        f"throughput = {args.num_gpus} GPUs × {units.scientific(peak)} FLOP/s{peak_label} × MFU "
        f"{units.number(args.mfu)} = {units.scientific(throughput)} FLOP/s; "
        f"time = {units.scientific(compute)} / {units.scientific(throughput)} = {units.duration(seconds)}."
    )
    return ToolResult(
        name="training_time",
        arguments=normalised_arguments(args, peak_flops_per_gpu=peak),
        result={
            "compute_flops": to_number(compute, name="compute_flops"),
            "seconds": to_number(seconds, name="seconds"),
            "days": to_number(days, name="days"),
        },
        explanation=units.tidy(explanation),
    )


# ---- how learners ask --------------------------------------------------------------------------------------

TIME_WORDS = re.compile(r"\b(how long|days?|hours?|weeks?|time to train|training time|wall[\s-]*clock)\b", re.I)
GPU_KIND = re.compile(r"\b(a100|h100|v100|a10g?|l4|tpu[\s_-]*v4|tpu[\s_-]*v5e)s?\b", re.I)
MFU = re.compile(r"(?<!\d)(\d+(?:\.\d+)?)\s*%\s*mfu|mfu\s*(?:of|=)?\s*(\d*\.\d+|\d+\s*%)", re.I)
LOSS_WORDS = re.compile(r"\b(loss|perplexity)\b", re.I)
LAW_WORDS = re.compile(r"\bkaplan\b", re.I)
LAW_OR_FIT = re.compile(r"\b(kaplan|chinchilla|scaling[\s-]*law|predict\w*|expected)\b", re.I)
CHINCHILLA_WORDS = re.compile(
    r"\b(chinchilla|compute[\s-]*optimal|optimal|how many tokens|tokens? (?:for|should|do)|tokens? per|budget|"
    r"how (?:big|large) (?:a|should)|flops?)\b",
    re.I,
)
# "how big should my dataset be for a 10B model?", "how much training data for 1B?": the data a model should see,
# a Chinchilla question, though "how big" and "how much" usually ask for memory.
DATA_WORDS = re.compile(
    r"\b(data\s*sets?|training data|how much data|data size|(?:amount|size) of (?:training )?data|tokens of data)\b",
    re.I,
)
MEMORY_UNITS = re.compile(r"\b(memory|bytes?|gb|gib|vram|hbm|footprint|ram|optimi[sz]er state)\b", re.I)
FLOPS = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?e\d+|\d+(?:\.\d+)?\s*[x×*]\s*10\^\d+)\s*flops?\b", re.I)


def recognise_training_time(text: str, context: PlanContext) -> Recognised:
    """Time words, GPUs and a model size: "how long to train a 70B model on 1024 H100s at 45% MFU?"."""
    gpus = first(GPUS, text)
    if not (TIME_WORDS.search(text) and gpus):
        return None
    params, assumed = context.params_or_assume(text, allow_example=False)
    if not params:
        return None
    arguments: dict[str, Any] = {"params": params, "num_gpus": int(gpus)}
    if tokens := find_tokens(text):
        arguments["tokens"] = tokens
    else:
        # Exact: 4.1B x 20 is 82,000,000,000 tokens (float arithmetic gave 81,999,999,999).
        arguments["tokens"] = str(int(to_fraction(params) * 20))
        assumed = (*assumed, "tokens: 20 per parameter (Chinchilla)")
    kind = first(GPU_KIND, text)
    arguments["gpu"] = re.sub(r"[\s_-]+", "_", kind.lower()).replace("a10g", "a10") if kind else "a100"
    if not kind:
        assumed = (*assumed, "gpu: A100 (bf16 dense peak)")
    if mfu := first(MFU, text):
        # "45% MFU", "mfu 45%" and "mfu 0.45" all mean 0.45.
        arguments["mfu"] = float(mfu.rstrip("% ")) / (100 if "%" in mfu or float(mfu.rstrip("% ")) > 1 else 1)
    return PlannedCall("training_time", arguments, assumed)


def recognise_scaling_law_loss(text: str, context: PlanContext) -> Recognised:
    """Loss words with a model size and tokens, unless it is a memory question that names no law."""
    params, tokens = find_params(text), find_tokens(text)
    if not (LOSS_WORDS.search(text) and params and tokens):
        return None
    if MEMORY_WORDS.search(text) and not LAW_OR_FIT.search(text):
        return None  # memory words and no law named: a memory question that happens to mention the loss
    arguments = {"params": params, "tokens": tokens}
    if LAW_WORDS.search(text):
        arguments["law"] = "kaplan"
    return PlannedCall("scaling_law_loss", arguments)


def recognise_chinchilla_optimal(text: str, context: PlanContext) -> Recognised:
    """Compute-optimal words with one of model size, tokens or FLOPs (in that preference), and no memory words;
    or words about the training data with no unit of memory."""
    data = DATA_WORDS.search(text) and not MEMORY_UNITS.search(text)
    if not data and (not CHINCHILLA_WORDS.search(text) or MEMORY_WORDS.search(text)):
        return None
    if params := find_params(text):
        return PlannedCall("chinchilla_optimal", {"params": params})
    if tokens := find_tokens(text):
        return PlannedCall("chinchilla_optimal", {"tokens": tokens})
    if flops := first(FLOPS, text):
        return PlannedCall("chinchilla_optimal", {"compute_flops": eval_power(flops)})
    return None


CHINCHILLA_OPTIMAL = Calculator.from_function(
    chinchilla_optimal, title="Chinchilla-optimal tokens and compute", recognise=recognise_chinchilla_optimal
)
SCALING_LAW_LOSS = Calculator.from_function(
    scaling_law_loss, title="Scaling-law loss", recognise=recognise_scaling_law_loss
)
TRAINING_TIME = Calculator.from_function(training_time, title="Training time", recognise=recognise_training_time)
