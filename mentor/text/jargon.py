"""The shorthand of the LLM-systems track, spelled out, so a question in jargon finds the sentence in prose.

"DP: what does each GPU hold?" matches "Data parallel (DP) — ...", "zero-3" matches "stage 3", "fully sharded
data parallel" matches "FSDP". Only what the field writes one way and the modules another; each entry adds its
expansion next to the learner's words (mentor.engines.selection), never replaces them.
"""

from __future__ import annotations

import re

JARGON: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.I if flags else 0), expansion)
    for pattern, expansion, flags in (
        (r"\bDP\b", "data parallel", False),
        (r"\bTP\b", "tensor parallel", False),
        (r"\bPP\b", "pipeline parallel", False),
        (r"\bSP\b", "sequence parallel", False),
        (r"\bfully[\s-]+sharded[\s-]+data[\s-]+parallel\w*", "FSDP ZeRO", True),
        (r"\bzero[\s-]*(?:stage[\s-]*)?([123])\b", r"ZeRO stage \1", True),
        # Out of memory asks what takes the memory: the track calls that the memory hog.
        (r"\b(?:OOM(?:s|ed|ing)?|out[\s-]+of[\s-]+memory)\b", "memory hog", True),
        (r"\b(?:dtypes?|torch_dtype)\b", "precision fp16 bf16 fp32", True),
        (r"\b(?:half[\s-]+precision|float16)\b", "fp16", True),
        (r"\bbfloat16\b", "bf16", True),
        (r"\bW(?:8|4)A(?:8|16)\b", "weight and activation quantization", True),
        (r"\bPTQ\b", "post-training quantization", False),
        (r"\b(?:3|4)[\s-]*d\s+parallel\w*", "3-D parallelism combine", True),
        (r"\b(?:vram|hbm|gpu[\s-]*ram)\b", "GPU memory", True),
        (r"\bmem\b", "memory", True),
        (r"\b(?:nan|nans|inf|infs|overflow\w*)\b", "fp16 range loss scaling underflow", True),
        (r"\bgrads?\b", "gradients", True),
        (r"\bfine[\s-]*tun\w*|\bfinetun\w*", "training", True),
        (r"\bserv(?:e|es|ed|ing)\b", "inference", True),
        (r"(?<![\w-])z([123])(?![\w-])", r"ZeRO stage \1", True),
        (r"\b(?:dp|tp|pp)\s*=\s*\d", "data tensor pipeline parallel degree", True),
        (r"\bDDP\b", "data parallel", True),
        (r"\bpartition\w*", "shard", True),
        (r"\b(?:grad(?:ient)?[\s-]*)?scaler\b", "loss scaling", True),
        (r"\b16[\s-]*bit\b", "fp16 bf16", True),
        (r"\b([48])[\s-]*bits?\b(?![\s-]*(?:exponent|mantissa|float|fp))", r"int\1", True),
        # Plain words for the track's terms: devices "sitting idle" in a pipeline are its bubble, and generating
        # tokens one at a time is what the modules call decode (not "generation" alone: "retrieval augmented
        # generation" and "diffusion models generate images" are other topics).
        (r"\bidl(?:e|es|ed|ing)\b", "pipeline bubble", True),
        # ... a "card" (graphics card) is a GPU, and a model "small enough" for one fits on it.
        (r"\b(?:graphics\s+)?cards?\b", "GPU", True),
        (r"\b(?:small|light)\s+enough\b", "fits", True),
        # A context stated in thousands of tokens ("128k-token sequences", "my context is 200k tokens") is a long one.
        (
            r"\b\d+\s*[km][\s-]*(?:tokens?[\s-]+)?(?:context|sequence|seq)\w*"
            r"|\b(?:context|sequence|seq)\w*(?:[\s-]+(?:length|len|window))?\s+(?:is|of|are|=)?\s*\d+\s*[km]\b",
            "long contexts sequence",
            True,
        ),
        (
            r"\b(?:generat(?:e|es|ed|ing|ion)\s+(?:\w+\s+){0,2}?tokens?|tokens?\s+generation|autoregressive\w*"
            r"|token[\s-]+by[\s-]+token|one\s+token\s+at\s+a\s+time)\b",
            "decode",
            True,
        ),
    )
)


def spell_out(text: str) -> str:
    """`text` with what its jargon stands for added in brackets: "z1 z2 z3?" -> "z1 z2 z3? (ZeRO stage 1, ...)"."""
    found = expansions(text)
    return f"{text} ({', '.join(found)})" if found else text


def expansions(text: str) -> list[str]:
    """What the jargon in `text` stands for, in order of appearance, each once."""
    found: dict[str, int] = {}
    for pattern, expansion in JARGON:
        for match in pattern.finditer(text):
            found.setdefault(match.expand(expansion), match.start())
    return sorted(found, key=found.__getitem__)
