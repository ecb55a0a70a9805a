"""Exact calculators for the "Training at scale" module: pure typed functions behind one registry.

from mentor.tools import REGISTRY, run_tool, tool_schemas, ToolResult
run_tool("training_memory", {"params": "7B"}).result["total_bytes"]  # 112000000000
"""

from mentor.tools.activations import ActivationMemoryArgs, activation_memory
from mentor.tools.allocation import CompareAllocationsArgs, compare_allocations
from mentor.tools.fit import MemoryFitArgs, memory_fit
from mentor.tools.memory import (
    KvCacheArgs,
    TrainingMemoryArgs,
    ZeroMemoryArgs,
    kv_cache,
    training_memory,
    zero_memory,
)
from mentor.tools.parallel import ParallelLayoutArgs, PipelineBubbleArgs, parallel_layout, pipeline_bubble
from mentor.tools.parsing import parse_count, parse_number
from mentor.tools.precision import LossScalingArgs, NumberFormatArgs, loss_scaling, number_format
from mentor.tools.quantization import QuantizedSizeArgs, quantized_size
from mentor.tools.registry import REGISTRY, Calculator, get_calculator, run_tool, tool_schemas
from mentor.tools.result import ToolResult
from mentor.tools.scaling import (
    ChinchillaOptimalArgs,
    ScalingLawLossArgs,
    TrainingTimeArgs,
    chinchilla_optimal,
    scaling_law_loss,
    training_time,
)

__all__ = [
    "REGISTRY",
    "ActivationMemoryArgs",
    "Calculator",
    "ChinchillaOptimalArgs",
    "CompareAllocationsArgs",
    "KvCacheArgs",
    "LossScalingArgs",
    "MemoryFitArgs",
    "NumberFormatArgs",
    "ParallelLayoutArgs",
    "PipelineBubbleArgs",
    "QuantizedSizeArgs",
    "ScalingLawLossArgs",
    "ToolResult",
    "TrainingMemoryArgs",
    "TrainingTimeArgs",
    "ZeroMemoryArgs",
    "activation_memory",
    "chinchilla_optimal",
    "compare_allocations",
    "get_calculator",
    "kv_cache",
    "loss_scaling",
    "memory_fit",
    "number_format",
    "parallel_layout",
    "parse_count",
    "parse_number",
    "pipeline_bubble",
    "quantized_size",
    "run_tool",
    "scaling_law_loss",
    "tool_schemas",
    "training_memory",
    "training_time",
    "zero_memory",
]
