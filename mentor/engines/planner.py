"""Plan calculator calls from a learner's own words: "optimizer state for a 13B model", "ZeRO-3 on 64 GPUs",
"int4 70B", "4 stages, 8 micro-batches", "tokens for 7B".

The extractive engine uses the plan to compute; the chat uses it as a scope signal (a calculation about the
module's topics is in scope even when its wording is mostly numbers). Arguments missing from the question are
taken from the conversation's earlier turns, then from the module's worked example (7B), and the answer says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

SCALE = r"(?:k|thousand|m|million|b|bn|billion|t|trillion)"
COUNT = rf"(\d+(?:[.,]\d+)*(?:e\d+)?)\s*({SCALE})?\b"
PARAMS = re.compile(
    rf"(?<![\w.])(\d+(?:\.\d+)?(?:e\d+)?)\s*({SCALE})\b(?!\s*(?:tokens?|flops?|gpus?))"
    rf"|(?<![\w.])(\d+(?:\.\d+)?(?:e\d+)?)\s*({SCALE})?\s*(?:params?|parameters?)\b",
    re.I,
)
TOKENS = re.compile(rf"(?<![\w.])(\d+(?:\.\d+)?(?:e\d+)?)\s*({SCALE})?\s*tokens?\b", re.I)
FLOPS = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?e\d+|\d+(?:\.\d+)?\s*[x×*]\s*10\^\d+)\s*flops?\b", re.I)
GPUS = re.compile(
    r"(?<![\w.])(\d+)\s*(?:x\s*)?(?:gpus?|devices?|ranks?|accelerators?|a100s?|h100s?|v100s?|workers?)\b", re.I
)
ZERO_STAGE = re.compile(r"\bzero[\s-]*(?:stage[\s-]*)?([0-3])\b|\bstage[\s-]*([0-3])\b", re.I)
PIPE_STAGES = re.compile(
    r"(?<![\w.])(\d+)[\s-]*(?:pipeline[\s-]*)?(?:stages?|pp\b)|\bpp\s*=?\s*(\d+)|\bp\s*=\s*(\d+)", re.I
)
MICROBATCHES = re.compile(r"(?<![\w.])(\d+)\s*micro[\s-]*batch(?:es)?\b|\bm\s*=\s*(\d+)", re.I)
INTERLEAVE = re.compile(r"(?:interleav\w*|virtual\s*stages?|chunks?)\s*(?:of|=|:)?\s*(\d+)|\bv\s*=\s*(\d+)", re.I)
BITS = re.compile(r"\bint\s?(\d{1,2})\b|(?<![\w.])(\d{1,2})[\s-]*bits?\b|\bw(\d)a\d+\b", re.I)
GROUP = re.compile(r"group[\s-]*size\s*(?:of|=)?\s*(\d+)|\bgroups?\s+of\s+(\d+)|\bg(\d{2,4})\b", re.I)
FORMAT = re.compile(r"\b(fp32|fp16|bf16|fp8[\s_-]*e4m3|fp8[\s_-]*e5m2|e4m3|e5m2)\b", re.I)
GRADIENT = re.compile(r"gradients?\s*(?:of|=|value|is|at|around|~)?\s*(\d+(?:\.\d+)?e-\d+|0\.0\d+)", re.I)
LOSS_SCALE = re.compile(r"(?:loss\s*)?scal(?:e|ing)(?:\s*factor)?\s*(?:of|=|s\s*=)?\s*(2\s*\^\s*\d+|\d{2,})", re.I)
TP = re.compile(
    r"\b(?:tp|tensor[\s-]*parallel(?:ism)?)\s*(?:=|of|degree|size)?\s*(\d+)|(?<!\d)(\d+)[\s-]*way\s*tensor", re.I
)
PP = re.compile(
    r"\b(?:pp|pipeline[\s-]*parallel(?:ism)?)\s*(?:=|of|degree|size)?\s*(\d+)|(?<!\d)(\d+)[\s-]*way\s*pipeline", re.I
)
GPU_KIND = re.compile(r"\b(a100|h100|v100|a10g?|l4|tpu[\s_-]*v4|tpu[\s_-]*v5e)s?\b", re.I)
MICRO_BATCH = re.compile(r"micro[\s-]*batch(?:[\s-]*size)?\s*(?:of|=|:)?\s*(\d+)|\bmbs\s*=?\s*(\d+)", re.I)
GRAD_ACCUM = re.compile(
    r"grad(?:ient)?[\s-]*accum\w*(?:[\s-]*steps?)?\s*(?:of|=|:)?\s*(\d+)|(?<!\d)(\d+)\s*accumulation", re.I
)
SEQ_LEN = re.compile(
    r"\b(?:seq(?:uence)?(?:[\s-]*len(?:gth)?)?|context(?:[\s-]*length)?)\s*(?:of|=|:)?\s*(\d+)(k?)\b|"
    r"(?<!\d)(\d+)(k?)\s*(?:context|tokens? (?:of )?context|seq(?:uence)?)\b",
    re.I,
)
HIDDEN = re.compile(r"\bhidden(?:[\s-]*(?:size|dim))?\s*(?:of|=|:)?\s*(\d+)|\bh\s*=\s*(\d+)", re.I)
HEADS = re.compile(r"(?<![\w.])(\d+)\s*(?:attention\s*)?heads\b|\bheads\s*(?:=|:)?\s*(\d+)", re.I)
KV_HEADS = re.compile(r"(?<![\w.])(\d+)\s*kv[\s-]*heads\b|\bkv[\s-]*heads\s*(?:=|:)?\s*(\d+)", re.I)
HEAD_DIM = re.compile(r"head[\s_-]*(?:dim(?:ension)?|size)\s*(?:of|=|:)?\s*(\d+)", re.I)
LAYERS = re.compile(r"(?<![\w.])(\d+)\s*layers\b|\blayers\s*(?:=|:)?\s*(\d+)", re.I)
BATCH = re.compile(r"\bbatch(?:[\s-]*size)?\s*(?:of|=|:)?\s*(\d+)", re.I)
MFU = re.compile(r"(?<!\d)(\d+(?:\.\d+)?)\s*%\s*mfu|mfu\s*(?:of|=)?\s*(\d*\.\d+|\d+\s*%)", re.I)

MEMORY_WORDS = re.compile(
    r"\b(memory|bytes?|gb|gib|fit|vram|hbm|footprint|how (?:much|big)|optimi[sz]er state|ram)\b", re.I
)
TIME_WORDS = re.compile(r"\b(how long|days?|hours?|weeks?|time to train|training time|wall[\s-]*clock)\b", re.I)
CHINCHILLA_WORDS = re.compile(
    r"\b(chinchilla|compute[\s-]*optimal|optimal|how many tokens|tokens? (?:for|should|do)|tokens? per|budget|"
    r"how (?:big|large) (?:a|should)|flops?)\b",
    re.I,
)
LOSS_WORDS = re.compile(r"\b(loss|perplexity)\b", re.I)
LAW_WORDS = re.compile(r"\bkaplan\b", re.I)
LAW_OR_FIT = re.compile(r"\b(kaplan|chinchilla|scaling[\s-]*law|predict\w*|expected)\b", re.I)
FORMAT_WORDS = re.compile(
    r"\b(max(?:imum)?|largest|smallest|min(?:imum)?|range|epsilon|exponent|mantissa|"
    r"limits?|representable|subnormal)\b",
    re.I,
)
QUANT_WORDS = re.compile(r"\b(int\d|quanti[sz]\w*|\d+[\s-]*bits?|gptq|awq|w\da\d+)\b", re.I)
OPTIMIZER = re.compile(r"\b(adamw|adam|sgd(?:\s*(?:with|\+)\s*momentum)?|momentum)\b", re.I)
KV_WORDS = re.compile(r"\bkv[\s-]*cache\b", re.I)
LAYOUT_WORDS = re.compile(
    r"\b(data[\s-]*parallel(?:ism)? (?:degree|size|ranks?)|dp (?:degree|size)|global batch|"
    r"how many (?:data[\s-]*parallel )?replicas)\b",
    re.I,
)
MULTIPLIERS = {
    "k": 10**3,
    "thousand": 10**3,
    "m": 10**6,
    "million": 10**6,
    "b": 10**9,
    "bn": 10**9,
    "billion": 10**9,
    "t": 10**12,
    "trillion": 10**12,
}
EXAMPLE_PARAMS = "7B"  # the module's worked example
# The work per message is bounded twice. No pattern above may start a number inside a digit run (a leading
# (?<![\w.]) or (?<!\d)): without that, a pattern like r"(\d+)\s*accumulation" retried every suffix of a long
# run, and a 3,990-digit message took 0.7 s of CPU (measured), all of it on the event loop. With it every
# pattern is linear in the text, and the text is bounded: the question to the chat's own message limit, the
# history to its most recent turns, where the numbers a follow-up leans on are.
MAX_QUESTION_CHARS = 4_000
MAX_HISTORY_CHARS = 8_000


@dataclass(frozen=True, slots=True)
class PlannedCall:
    """A calculator to run, with the arguments read from the question and what had to be assumed."""

    name: str
    arguments: dict[str, Any]
    assumed: tuple[str, ...] = field(default=())


def _count(number: str, scale: str | None) -> str:
    """Keep counts as the calculators' own strings ("13B", "1.4T"), so parsing stays in one place."""
    number = number.replace(",", "")
    return f"{number}{scale.upper()[0] if scale and scale.lower() not in ('bn',) else ('B' if scale else '')}"


def _first(pattern: re.Pattern[str], text: str) -> str | None:
    match = pattern.search(text)
    if match is None:
        return None
    return next((group for group in match.groups() if group), None)


def find_params(text: str) -> str | None:
    """A model size: "13B", "70 billion parameters", "7e9 params"."""
    for match in PARAMS.finditer(text):
        number, scale = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
        if scale or "e" in number.lower() or float(number.replace(",", "")) >= 1e6:
            return _count(number, scale)
    return None


def find_tokens(text: str) -> str | None:
    """A token count: "1.4T tokens", "300 billion tokens"."""
    match = TOKENS.search(text)
    if match is None:
        return None
    return _count(match.group(1), match.group(2))


def plan_tools(question: str, history: tuple[str, ...] = ()) -> list[PlannedCall]:
    """Recognise which calculators a question asks for and read their arguments from it (and its history).

    A follow-up that changes one number ("and on 256 GPUs instead?") is planned as the earlier question with
    the new number first, so the new value wins wherever both appear.
    """
    question = _clip(question, MAX_QUESTION_CHARS)
    history = _recent(history, MAX_HISTORY_CHARS)
    plan = _plan(question, history)
    if not plan and history and re.search(r"\d|\b(compute|flops|time|days|memory|size)\b", question, re.I):
        earlier = _plan(history[-1], history[:-1])
        if earlier:
            return _plan(f"{question} {history[-1]}", history[:-1])
    return plan


def _clip(text: str, limit: int) -> str:
    """The text up to `limit` characters, cut at a space so no number is cut short ("13B" must not read "1")."""
    if len(text) <= limit:
        return text
    cut = max(text.rfind(space, 0, limit + 1) for space in " \n\t")
    return text[: cut if cut > 0 else limit]


def _recent(history: tuple[str, ...], limit: int) -> tuple[str, ...]:
    """The most recent questions that fit in `limit` characters together (the latest one clipped if needed)."""
    kept: list[str] = []
    room = limit
    for text in reversed(history):
        if room <= 0:
            break
        kept.append(_clip(text, room))
        room -= len(text) + 1
    return tuple(reversed(kept))


def _seq_len(text: str) -> int | None:
    match = SEQ_LEN.search(text)
    if match is None:
        return None
    number, kilo = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
    return int(number) * (1024 if kilo else 1)


def _plan(question: str, history: tuple[str, ...] = ()) -> list[PlannedCall]:
    text = question
    earlier = " ".join(history)
    calls: list[PlannedCall] = []

    def params_or_assume(*, allow_example: bool = True) -> tuple[str | None, tuple[str, ...]]:
        found = find_params(text)
        if found:
            return found, ()
        found = find_params(earlier)
        if found:
            return found, (f"params {found} from earlier in this conversation",)
        if allow_example:
            return EXAMPLE_PARAMS, (f"params {EXAMPLE_PARAMS}: the module's worked example",)
        return None, ()

    gradient = _first(GRADIENT, text)
    if gradient and (FORMAT.search(text) or re.search(r"scal|underflow|fp16", text, re.I)):
        arguments: dict[str, Any] = {"gradient": gradient}
        scale = _first(LOSS_SCALE, text)
        if scale:
            arguments["scale"] = int(eval_power(scale))
        fmt = _first(FORMAT, text)
        if fmt:
            arguments["format"] = normalise_format(fmt)
        return [PlannedCall("loss_scaling", arguments)]

    fmt = _first(FORMAT, text)
    if fmt and FORMAT_WORDS.search(text) and not find_params(text):
        formats = [normalise_format(f) for f in dict.fromkeys(m.group(1).lower() for m in FORMAT.finditer(text))]
        return [PlannedCall("number_format", {"format": f}) for f in formats[:3]]

    stages = _first(PIPE_STAGES, text)
    micro = _first(MICROBATCHES, text)
    if stages and micro:
        arguments = {"stages": int(stages), "microbatches": int(micro)}
        interleave = _first(INTERLEAVE, text)
        if interleave:
            arguments["interleave"] = int(interleave)
        return [PlannedCall("pipeline_bubble", arguments)]

    gpus = _first(GPUS, text)
    zero_stage = _first(ZERO_STAGE, text)
    if re.search(r"\bzero\b|\bzero-?\d|\bfsdp\b", text, re.I) and (gpus or re.search(r"\bdp\s*=?\s*\d", text, re.I)):
        dp = gpus or _first(re.compile(r"\bdp\s*=?\s*(\d+)", re.I), text)
        params, assumed = params_or_assume()
        stages_wanted = [int(zero_stage)] if zero_stage else [0, 1, 2, 3]
        return [
            PlannedCall("zero_memory", {"params": params, "dp_degree": int(dp), "stage": s}, assumed)
            for s in stages_wanted
        ]

    if re.search(r"\bactivations?\b", text, re.I):
        seq, hidden, heads = _seq_len(text), _first(HIDDEN, text), _first(HEADS, text)
        if seq and hidden and heads:
            arguments = {
                "seq_len": seq,
                "micro_batch": int(_first(MICRO_BATCH, text) or _first(BATCH, text) or 1),
                "hidden": int(hidden),
                "heads": int(heads),
            }
            if layers := _first(LAYERS, text):
                arguments["layers"] = int(layers)
            if tp := _first(TP, text):
                arguments["tensor_parallel"] = int(tp)
            if re.search(r"sequence[\s-]*parallel", text, re.I):
                arguments["sequence_parallel"] = True
            if recompute := re.search(r"\b(selective|full)\s+(?:activation\s+)?recomput", text, re.I):
                arguments["recompute"] = recompute.group(1).lower()
            return [PlannedCall("activation_memory", arguments)]

    if KV_WORDS.search(text):
        layers, head_dim, seq = _first(LAYERS, text), _first(HEAD_DIM, text), _seq_len(text)
        kv_heads = _first(KV_HEADS, text) or _first(HEADS, text)
        if not (layers and head_dim and seq and kv_heads):
            return []  # a KV-cache question without its shapes: the LLM engine or the calc API can take it
        arguments = {"layers": int(layers), "kv_heads": int(kv_heads), "head_dim": int(head_dim), "seq_len": seq}
        if batch := _first(BATCH, text):
            arguments["batch"] = int(batch)
        if re.search(r"\b(fp8|int8|8[\s-]*bit)\b", text, re.I):
            arguments["bytes_per_element"] = 1
        elif re.search(r"\bfp32\b", text, re.I):
            arguments["bytes_per_element"] = 4
        return [PlannedCall("kv_cache", arguments)]

    tp, pp = _first(TP, text), _first(PP, text)
    layout_words = LAYOUT_WORDS.search(text) or re.search(r"data[\s-]*parallel|\bdp\b|replica|global batch", text, re.I)
    if gpus and (tp or pp or _first(MICRO_BATCH, text)) and layout_words:
        arguments = {"num_gpus": int(gpus)}
        if tp:
            arguments["tensor_parallel"] = int(tp)
        if pp:
            arguments["pipeline_parallel"] = int(pp)
        if micro_batch := _first(MICRO_BATCH, text):
            arguments["micro_batch"] = int(micro_batch)
        if accum := _first(GRAD_ACCUM, text):
            arguments["grad_accum"] = int(accum)
        return [PlannedCall("parallel_layout", arguments)]

    if QUANT_WORDS.search(text):
        bits = _first(BITS, text)
        params, assumed = params_or_assume(allow_example=False)
        if bits and params:
            arguments = {"params": params, "bits": int(bits)}
            group = _first(GROUP, text)
            if group:
                arguments["group_size"] = int(group)
            calls.append(PlannedCall("quantized_size", arguments, assumed))
            return calls

    tokens = find_tokens(text)
    if TIME_WORDS.search(text) and gpus:
        params, assumed = params_or_assume(allow_example=False)
        if params:
            arguments = {"params": params, "num_gpus": int(gpus)}
            if tokens:
                arguments["tokens"] = tokens
            else:
                arguments["tokens"] = str(int(parse_scaled(params) * 20))
                assumed = (*assumed, "tokens: 20 per parameter (Chinchilla)")
            kind = _first(GPU_KIND, text)
            arguments["gpu"] = re.sub(r"[\s_-]+", "_", kind.lower()).replace("a10g", "a10") if kind else "a100"
            if not kind:
                assumed = (*assumed, "gpu: A100 (bf16 dense peak)")
            mfu = _first(MFU, text)
            if mfu:
                arguments["mfu"] = float(mfu.rstrip("% ")) / (100 if "%" in mfu or float(mfu.rstrip("% ")) > 1 else 1)
            return [PlannedCall("training_time", arguments, assumed)]

    params = find_params(text)
    if LOSS_WORDS.search(text) and params and tokens and (LAW_OR_FIT.search(text) or not MEMORY_WORDS.search(text)):
        arguments = {"params": params, "tokens": tokens}
        if LAW_WORDS.search(text):
            arguments["law"] = "kaplan"
        return [PlannedCall("scaling_law_loss", arguments)]

    if CHINCHILLA_WORDS.search(text) and not MEMORY_WORDS.search(text):
        flops = _first(FLOPS, text)
        if params:
            return [PlannedCall("chinchilla_optimal", {"params": params})]
        if tokens:
            return [PlannedCall("chinchilla_optimal", {"tokens": tokens})]
        if flops:
            return [PlannedCall("chinchilla_optimal", {"compute_flops": eval_power(flops)})]

    if params and MEMORY_WORDS.search(text):
        arguments = {"params": params}
        optimizer = _first(OPTIMIZER, text)
        if optimizer:
            arguments["optimizer"] = normalise_optimizer(optimizer)
        if re.search(r"\b(pure|full)\s*fp32\b|\bfp32 (?:training|weights)\b|\bwithout mixed precision\b", text, re.I):
            arguments["weight_dtype"] = "fp32"
            arguments["mixed_precision"] = False
        calls.append(PlannedCall("training_memory", arguments))
    return calls


def normalise_format(name: str) -> str:
    """Map "e4m3", "FP8-E4M3" and friends onto the calculator's format names."""
    key = re.sub(r"[\s_-]+", "", name.lower())
    return {"e4m3": "fp8_e4m3", "fp8e4m3": "fp8_e4m3", "e5m2": "fp8_e5m2", "fp8e5m2": "fp8_e5m2"}.get(key, key)


def normalise_optimizer(name: str) -> str:
    """Map the learner's optimizer words onto the calculator's names."""
    key = name.lower()
    if "momentum" in key:
        return "sgd_momentum"
    return {"adamw": "adamw", "adam": "adam", "sgd": "sgd"}.get(key.split()[0], "adam")


def eval_power(text: str) -> str:
    """Turn "2^16" or "1 x 10^24" into a decimal string; leave other numbers alone."""
    compact = text.replace(" ", "")
    power = re.fullmatch(r"(\d+(?:\.\d+)?)?[x×*]?10\^(\d+)", compact)
    if power:
        return f"{power.group(1) or 1}e{power.group(2)}"
    two = re.fullmatch(r"2\^(\d+)", compact)
    if two:
        return str(2 ** int(two.group(1)))
    return compact


def parse_scaled(count: str) -> float:
    """Read "13B" as 1.3e10 (only to derive a default token count)."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?(?:e\d+)?)([KMBT])?", count, re.I)
    if match is None:
        return float(count)
    return float(match.group(1)) * MULTIPLIERS.get((match.group(2) or "").lower(), 1)
