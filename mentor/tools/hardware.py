"""Dense 16-bit peak throughput of common accelerators, for turning FLOPs into training time.

Every figure is the vendor's dense (no 2:4 sparsity) tensor-core peak for bf16 (fp16 on V100, which has no
bf16), in FLOP/s per chip. Sparsity figures in datasheets are twice these and are not reachable in training.
"""

from __future__ import annotations

from fractions import Fraction

PEAK_FLOPS_PER_GPU: dict[str, Fraction] = {
    # NVIDIA A100 Tensor Core GPU datasheet: BF16 Tensor Core 312 TFLOPS (624 with sparsity), SXM and PCIe.
    "a100": Fraction(312 * 10**12),
    # NVIDIA H100 Tensor Core GPU Architecture whitepaper: H100 SXM5 peak BF16 989.4 TFLOPS dense
    # (1,978.9 with sparsity). The PCIe card is slower; pass peak_flops_per_gpu for it.
    "h100": Fraction(9894 * 10**11),
    "h100_sxm": Fraction(9894 * 10**11),
    # NVIDIA Tesla V100 datasheet (SXM2): 125 TFLOPS "deep learning" = fp16 tensor cores; no bf16.
    "v100": Fraction(125 * 10**12),
    # NVIDIA A10 datasheet: BF16 Tensor Core 125 TFLOPS (250 with sparsity).
    "a10": Fraction(125 * 10**12),
    # NVIDIA L4 datasheet: FP16/BF16 Tensor Core 242 TFLOPS with sparsity, so 121 dense.
    "l4": Fraction(121 * 10**12),
    # Google Cloud TPU v4 documentation: 275 TFLOPS peak bf16 per chip.
    "tpu_v4": Fraction(275 * 10**12),
    # Google Cloud TPU v5e documentation: 197 TFLOPS peak bf16 per chip.
    "tpu_v5e": Fraction(197 * 10**12),
}

GPU_LABELS: dict[str, str] = {
    "a100": "A100, bf16 dense",
    "h100": "H100 SXM, bf16 dense",
    "h100_sxm": "H100 SXM, bf16 dense",
    "v100": "V100, fp16 tensor core",
    "a10": "A10, bf16 dense",
    "l4": "L4, bf16 dense",
    "tpu_v4": "TPU v4, bf16",
    "tpu_v5e": "TPU v5e, bf16",
}
