"""How GPUs divide into tensor-, pipeline- and data-parallel groups, and what the pipeline bubble costs."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from pydantic import Field, model_validator

from mentor.tools import units
from mentor.tools.calculator import Calculator
from mentor.tools.parsing import Count, ToolArgs
from mentor.tools.result import ToolResult, normalised_arguments, to_number
from mentor.tools.wording import GPUS, MICRO_BATCH, TP, PlanContext, PlannedCall, Recognised, first


class PipelineBubbleArgs(ToolArgs):
    stages: Count = Field(description="Pipeline stages p (GPUs in one pipeline).")
    microbatches: Count = Field(description="Microbatches m per batch (per pipeline flush).")
    interleave: Count = Field(1, description="Model chunks v per stage (interleaved 1F1B schedule); 1 = none.")


def pipeline_bubble(args: PipelineBubbleArgs) -> ToolResult:
    """Compute the pipeline bubble for p stages, m microbatches and v interleaved chunks per stage.

    Two definitions, both returned: bubble_over_ideal = (p−1)/(v·m) is idle time over ideal compute time
    (Narayanan et al. 2021, Megatron-LM; GPipe); bubble_fraction = (p−1)/(v·m + p−1) is the idle share of the
    whole step (GPipe's (K−1)/(M+K−1) when v = 1).
    """
    p, m, v = args.stages, args.microbatches, args.interleave
    over_ideal = Fraction(p - 1, v * m)
    fraction = Fraction(p - 1, v * m + p - 1)
    explanation = (
        f"bubble / ideal compute = (p−1)/(v·m) = ({p}−1)/({v}×{m}) = {units.ratio(over_ideal)}; "
        f"bubble / whole step = (p−1)/(v·m+p−1) = {p - 1}/{v * m + p - 1} = {units.ratio(fraction)}."
    )
    return ToolResult(
        name="pipeline_bubble",
        arguments=normalised_arguments(args),
        result={
            "bubble_fraction": to_number(fraction, name="bubble_fraction"),
            "bubble_over_ideal": to_number(over_ideal, name="bubble_over_ideal"),
        },
        explanation=units.tidy(explanation),
    )


class ParallelLayoutArgs(ToolArgs):
    num_gpus: Count = Field(description="Total GPUs in the job.")
    tensor_parallel: Count = Field(1, description="Tensor-parallel degree t (GPUs splitting each layer).")
    pipeline_parallel: Count = Field(1, description="Pipeline-parallel degree p (stages).")
    micro_batch: Count = Field(1, description="Sequences per microbatch on one data-parallel replica.")
    grad_accum: Count = Field(1, description="Microbatches accumulated per optimizer step (per replica).")

    @model_validator(mode="after")
    def _divides(self) -> ParallelLayoutArgs:
        replica = self.tensor_parallel * self.pipeline_parallel
        if self.num_gpus % replica:
            raise ValueError(
                f"num_gpus: {self.num_gpus} GPUs do not split into replicas of tensor_parallel × "
                f"pipeline_parallel = {self.tensor_parallel} × {self.pipeline_parallel} = {replica} GPUs; "
                f"num_gpus must be a multiple of {replica}"
            )
        return self


def parallel_layout(args: ParallelLayoutArgs) -> ToolResult:
    """Split GPUs into tensor × pipeline × data parallel groups and give the global batch in sequences."""
    replica = args.tensor_parallel * args.pipeline_parallel
    data_parallel = args.num_gpus // replica
    global_batch = data_parallel * args.micro_batch * args.grad_accum
    explanation = (
        f"data_parallel = num_gpus / (tensor_parallel × pipeline_parallel) = {args.num_gpus} / "
        f"({args.tensor_parallel} × {args.pipeline_parallel}) = {data_parallel}; "
        f"global batch = data_parallel × micro_batch × grad_accum = {data_parallel} × {args.micro_batch} × "
        f"{args.grad_accum} = {global_batch} sequences."
    )
    return ToolResult(
        name="parallel_layout",
        arguments=normalised_arguments(args),
        result={"data_parallel": data_parallel, "global_batch": to_number(global_batch, name="global_batch")},
        explanation=units.tidy(explanation),
    )


# ---- how learners ask --------------------------------------------------------------------------------------

PIPE_STAGES = re.compile(
    r"(?<![\w.])(\d+)[\s-]*(?:pipeline[\s-]*)?(?:stages?|pp\b)|\bpp\s*=?\s*(\d+)|\bp\s*=\s*(\d+)", re.I
)
MICROBATCHES = re.compile(r"(?<![\w.])(\d+)\s*micro[\s-]*batch(?:es)?\b|\bm\s*=\s*(\d+)", re.I)
INTERLEAVE = re.compile(r"(?:interleav\w*|virtual\s*stages?|chunks?)\s*(?:of|=|:)?\s*(\d+)|\bv\s*=\s*(\d+)", re.I)
PP = re.compile(
    r"\b(?:pp|pipeline[\s-]*parallel(?:ism)?)\s*(?:=|of|degree|size)?\s*(\d+)|(?<!\d)(\d+)[\s-]*way\s*pipeline", re.I
)
GRAD_ACCUM = re.compile(
    r"grad(?:ient)?[\s-]*accum\w*(?:[\s-]*steps?)?\s*(?:of|=|:)?\s*(\d+)|(?<!\d)(\d+)\s*accumulation", re.I
)
# "data parallel degree", "dp size", "global batch", "how many replicas": what a layout question asks for.
LAYOUT_WORDS = re.compile(r"data[\s-]*parallel|\bdp\b|replica|global batch", re.I)


def recognise_pipeline_bubble(text: str, context: PlanContext) -> Recognised:
    """Stages and microbatches: "4 stages, 8 micro-batches", "pp=4 m=16 v=2"."""
    stages, micro = first(PIPE_STAGES, text), first(MICROBATCHES, text)
    if not (stages and micro):
        return None
    arguments = {"stages": int(stages), "microbatches": int(micro)}
    if interleave := first(INTERLEAVE, text):
        arguments["interleave"] = int(interleave)
    return PlannedCall("pipeline_bubble", arguments)


def recognise_parallel_layout(text: str, context: PlanContext) -> Recognised:
    """GPUs, a tensor/pipeline degree or micro-batch, and the data-parallel side asked for."""
    gpus, tp, pp, micro_batch = first(GPUS, text), first(TP, text), first(PP, text), first(MICRO_BATCH, text)
    if not (gpus and (tp or pp or micro_batch) and LAYOUT_WORDS.search(text)):
        return None
    arguments: dict[str, Any] = {"num_gpus": int(gpus)}
    if tp:
        arguments["tensor_parallel"] = int(tp)
    if pp:
        arguments["pipeline_parallel"] = int(pp)
    if micro_batch:
        arguments["micro_batch"] = int(micro_batch)
    if accum := first(GRAD_ACCUM, text):
        arguments["grad_accum"] = int(accum)
    return PlannedCall("parallel_layout", arguments)


PIPELINE_BUBBLE = Calculator.from_function(
    pipeline_bubble, title="Pipeline bubble", recognise=recognise_pipeline_bubble
)
PARALLEL_LAYOUT = Calculator.from_function(
    parallel_layout, title="Parallel layout", recognise=recognise_parallel_layout
)
