"""Activation memory of transformer layers under tensor/sequence parallelism and recomputation.

Formulas are Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
Table 2: bytes per layer with 16-bit activations and 1-byte dropout masks (s = seq_len, b = micro_batch,
h = hidden, a = heads, t = tensor_parallel). The 5·a·s/h term is the attention softmax, its dropout and the
attention over values, which selective recomputation recomputes instead of storing.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from pydantic import Field, model_validator

from mentor.tools import units
from mentor.tools.calculator import Calculator
from mentor.tools.parsing import Count, ToolArgs, choice_type
from mentor.tools.result import ToolResult, normalised_arguments, to_number
from mentor.tools.wording import (
    BATCH,
    HEADS,
    LAYERS,
    MICRO_BATCH,
    TP,
    PlanContext,
    PlannedCall,
    Recognised,
    first,
    seq_len,
)


class ActivationMemoryArgs(ToolArgs):
    seq_len: Count = Field(description="Sequence length s in tokens.")
    micro_batch: Count = Field(description="Microbatch size b in sequences.")
    hidden: Count = Field(description="Hidden size h.")
    heads: Count = Field(description="Attention heads a (must divide hidden).")
    layers: Count = Field(1, description="Transformer layers held by this GPU.")
    tensor_parallel: Count = Field(1, description="Tensor-parallel degree t (must divide heads).")
    sequence_parallel: bool = Field(
        False,
        strict=True,
        description="Megatron sequence parallelism (shards LayerNorm/dropout; needs t > 1).",
    )
    recompute: choice_type("none", "selective", "full") = Field(  # type: ignore[valid-type]
        "none",
        description="Activation recomputation: none, selective (attention core) or full (whole layer).",
    )

    @model_validator(mode="after")
    def _shapes_split(self) -> ActivationMemoryArgs:
        if self.hidden % self.heads:
            raise ValueError(f"heads: must divide hidden = {self.hidden} (got {self.heads})")
        if self.heads % self.tensor_parallel:
            raise ValueError(
                f"tensor_parallel: must divide heads = {self.heads}, since each GPU holds whole heads "
                f"(got {self.tensor_parallel})"
            )
        if self.sequence_parallel and self.tensor_parallel == 1:
            raise ValueError("sequence_parallel: needs tensor_parallel > 1 (it shards along the tensor-parallel group)")
        if self.sequence_parallel and self.seq_len % self.tensor_parallel:
            raise ValueError(
                f"seq_len: must be a multiple of tensor_parallel = {self.tensor_parallel} with sequence "
                f"parallelism (got {self.seq_len})"
            )
        return self


def _per_layer(args: ActivationMemoryArgs) -> tuple[Fraction, str]:
    """Return the bracket multiplying s·b·h, and that bracket written with its numbers substituted."""
    s, h, a, t = args.seq_len, args.hidden, args.heads, args.tensor_parallel
    attention = Fraction(5 * a * s, h * t)
    attention_text = f"5×{a}×{s}/({h}×{t})"
    if args.recompute == "full":
        # Only the layer input is stored; sequence parallelism shards it across the t GPUs.
        return (Fraction(2, t), f"2/{t}") if args.sequence_parallel else (Fraction(2), "2")
    if args.sequence_parallel:
        stored, stored_text = Fraction(34, t), f"34/{t}"
    else:
        stored, stored_text = 10 + Fraction(24, t), f"10 + 24/{t}"
    if args.recompute == "selective":
        return stored, stored_text
    return stored + attention, f"{stored_text} + {attention_text}"


FORMULAS = {
    ("none", False): "s·b·h·(10 + 24/t + 5·a·s/(h·t))",
    ("none", True): "s·b·h·(34/t + 5·a·s/(h·t))",
    ("selective", False): "s·b·h·(10 + 24/t)",
    ("selective", True): "s·b·h·34/t",
    ("full", False): "2·s·b·h",
    ("full", True): "2·s·b·h/t",
}


def activation_memory(args: ActivationMemoryArgs) -> ToolResult:
    """Compute activation memory per layer and in total with 16-bit activations (Korthikanti et al. 2022).

    Per layer: s·b·h·(10 + 24/t + 5·a·s/(h·t)) bytes (t = 1: s·b·h·(34 + 5·a·s/h)); with sequence parallel
    s·b·h·(34/t + 5·a·s/(h·t)); selective recompute drops the 5·a·s/(h·t) term; full recompute keeps only the
    2·s·b·h-byte layer input (/t with sequence parallel). Total = per layer × layers.
    """
    bracket, bracket_text = _per_layer(args)
    sbh = args.seq_len * args.micro_batch * args.hidden
    per_layer = sbh * bracket
    total = per_layer * args.layers
    formula = FORMULAS[(args.recompute, args.sequence_parallel)]
    explanation = (
        f"per layer = {formula} = {args.seq_len}×{args.micro_batch}×{args.hidden} × ({bracket_text}) "
        f"= {sbh:,} × {units.number(bracket)} = {units.nbytes(per_layer)}; "
        f"total = per layer × {args.layers} layers = {units.nbytes(total)} "
        f"(Korthikanti et al. 2022, Table 2; 16-bit activations)."
    )
    return ToolResult(
        name="activation_memory",
        arguments=normalised_arguments(args),
        result={
            "per_layer_bytes": to_number(per_layer, name="per_layer_bytes"),
            "total_bytes": to_number(total, name="total_bytes"),
        },
        explanation=units.tidy(explanation),
    )


# ---- how learners ask --------------------------------------------------------------------------------------

ACTIVATION_WORDS = re.compile(r"\bactivations?\b", re.I)
HIDDEN = re.compile(r"\bhidden(?:[\s-]*(?:size|dim))?\s*(?:of|=|:)?\s*(\d+)|\bh\s*=\s*(\d+)", re.I)
SEQUENCE_PARALLEL = re.compile(r"sequence[\s-]*parallel", re.I)
RECOMPUTE = re.compile(r"\b(selective|full)\s+(?:activation\s+)?recomput", re.I)


def recognise_activation_memory(text: str, context: PlanContext) -> Recognised:
    """Activations with sequence length, hidden size and heads: "activations for 8k context, hidden 8192, 64 heads".

    A question naming what the calculator computes (its title, "activation memory") without that shape is claimed and
    nothing is planned: the next calculator's figure (training memory's model state, for "how much activation memory
    does a 13B model need?") would answer a question that was not asked."""
    if not ACTIVATION_WORDS.search(text):
        return None
    seq, hidden, heads = seq_len(text), first(HIDDEN, text), first(HEADS, text)
    if not (seq and hidden and heads):
        return [] if ACTIVATION_MEMORY.named_in(text) else None
    arguments: dict[str, Any] = {
        "seq_len": seq,
        "micro_batch": int(first(MICRO_BATCH, text) or first(BATCH, text) or 1),
        "hidden": int(hidden),
        "heads": int(heads),
    }
    if layers := first(LAYERS, text):
        arguments["layers"] = int(layers)
    if tp := first(TP, text):
        arguments["tensor_parallel"] = int(tp)
    if SEQUENCE_PARALLEL.search(text):
        arguments["sequence_parallel"] = True
    if recompute := RECOMPUTE.search(text):
        arguments["recompute"] = recompute.group(1).lower()
    return PlannedCall("activation_memory", arguments)


ACTIVATION_MEMORY = Calculator.from_function(
    activation_memory, title="Activation memory", recognise=recognise_activation_memory
)
