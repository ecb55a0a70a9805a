"""What the load generator asks, all about the seed module ("Training at scale"), in three workloads:

- "repeat": the 40 curated `QUESTIONS` in turn; after warm-up mentor's query cache answers every one;
- "new": `new_question(n)`, a learner-like question of about 15 words, different for every n (none is ever sent
  twice in a run), made of an opening, a question about the module and a closing clause;
- "mix": `mixed_question(i, first)`, the realistic one: a share `MIX_REPEAT_SHARE` of requests ask a popular
  question (Zipf, exponent `MIX_ZIPF_S`, over the ranks of `QUESTIONS`), the rest a new one.

Each text is a pure function of its index (no state, no wall clock), so the parent process can compute what a
load-generator process sent, and a run is the same on every machine; `NewQuestions` hands out index ranges so
that no server is sent a new question twice. All 18,480 new questions were checked once against the seed
module's retrieval and scope: every one is answerable, so the LLM engine answers them, not the redirect.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from bisect import bisect_left
from functools import cache

QUESTIONS: tuple[str, ...] = (
    "How does ZeRO save memory during training?",
    "What is the difference between data parallel and tensor parallel?",
    "Why should tensor parallelism stay on NVLink?",
    "What does pipeline parallelism split across GPUs?",
    "When is sequence parallelism useful?",
    "What do ZeRO stages 1, 2 and 3 shard?",
    "Is FSDP the same idea as ZeRO?",
    "Why is the optimizer state the memory hog and not the weights?",
    "How many bytes per parameter does Adam keep for its optimizer state?",
    "How much optimizer state does a 13B model need?",
    "How much memory do the fp16 weights of a 7B model take?",
    "What is 3-D parallelism?",
    "Why do we keep an fp32 master copy of the weights?",
    "What is loss scaling and when do I need it?",
    "Why is bf16 preferred over fp16 for training?",
    "How many exponent bits does fp16 have compared to bf16?",
    "What happens to small gradients in fp16?",
    "How does dynamic loss scaling work?",
    "What did the Kaplan scaling laws recommend?",
    "What is the Chinchilla rule of thumb for tokens per parameter?",
    "How many tokens should a Chinchilla-optimal 30B model be trained on?",
    "How many training tokens does a 70B model want under Chinchilla?",
    "Why would you over-train a small model past Chinchilla?",
    "What is the LLaMA strategy for training smaller models?",
    "How does loss scale with model size, data and compute?",
    "Why was GPT-3 under-trained?",
    "What is weight-only int4 quantization good for?",
    "Why is W8A8 quantization harder than weight-only quantization?",
    "What is the difference between GPTQ and AWQ?",
    "Do GPTQ and AWQ need retraining?",
    "Why does int4 help memory-bound decode?",
    "How big is a 70B model quantized to int4?",
    "What are activation outliers and why do they matter?",
    "What are the two walls of large-model training?",
    "What is the pipeline bubble and how do micro-batches help?",
    "Which parallelism should I use when a single layer does not fit on one GPU?",
    "How much memory per GPU does ZeRO-3 need for a 7B model on 8 GPUs?",
    "Is the bf16 exponent the same as fp32's?",
    "What are the interview one-liners for mixed precision?",
    "Which parallelism strategy wins when the model fits on one GPU?",
)

# ---- "new": opening + question + closing, about 15 words ----------------------------------------------------------

# The question proper, without its question mark. {size} and {gpus} are filled in from SIZES and GPUS (by the
# opening and closing chosen, so they vary too without adding texts that differ only in a number).
TOPICS: tuple[str, ...] = (
    "how does ZeRO cut the memory each GPU needs",
    "what does ZeRO stage 2 shard that stage 1 does not",
    "what does ZeRO stage 3 shard on top of stage 2",
    "why is FSDP called the same idea as ZeRO",
    "why does optimizer state take more memory than the weights",
    "why does Adam's optimizer state dwarf the fp16 weights",
    "where do the 12 bytes per parameter of Adam go",
    "how is data parallel different from tensor parallel",
    "why should tensor parallel stay on NVLink within a node",
    "why does pipeline parallelism need micro-batches",
    "what is the pipeline bubble in pipeline parallelism",
    "when does sequence parallelism help with long contexts",
    "how do real runs combine data, tensor and pipeline parallelism",
    "which parallelism fits when one layer is too big for a GPU",
    "which strategy wins when the whole model fits on one GPU",
    "what are the two walls of large model training",
    "why keep most of the math in 16-bit",
    "why do we still keep an fp32 master copy of the weights",
    "why do small gradients underflow in fp16",
    "how does loss scaling protect small gradients",
    "how does dynamic loss scaling pick the scale",
    "why is bf16 the default on A100 and H100 now",
    "how many exponent bits do fp16 and bf16 have",
    "what does bf16 give up for its wider range",
    "what did the Kaplan scaling laws say about extra compute",
    "why were GPT-3 and its peers under-trained",
    "what is the Chinchilla rule for tokens per parameter",
    "how does loss fall with model size, data and compute",
    "why over-train a smaller model past the Chinchilla point",
    "what is the LLaMA strategy of over-training smaller models",
    "why does weight-only int4 help memory-bound decode",
    "why is W8A8 harder than weight-only quantization",
    "how do GPTQ and AWQ differ",
    "do GPTQ and AWQ need any retraining",
    "why do activation outliers make W8A8 quantization hard",
    "how does int4 cut the bytes read per decode step",
    "how much optimizer state does Adam need for a {size} model",
    "how much memory do the fp16 weights of a {size} model take",
    "how many training tokens does a {size} model want under Chinchilla",
    "how big is a {size} model quantized to int4",
    "how much memory per GPU does ZeRO-3 need for {size} on {gpus} GPUs",
    "what is the optimizer state per GPU for {size} sharded over {gpus} GPUs",
)
SIZES = ("1.3B", "3B", "7B", "13B", "30B", "34B", "65B", "70B")
GPUS = ("4", "8", "16", "32", "64", "128")
# How learners open: context, urgency, politeness; each reads well before a direct question.
_OPENINGS: tuple[str, ...] = (
    "",
    "Quick question: ",
    "Sorry if this is basic, but ",
    "I have an interview tomorrow: ",
    "I'm still confused: ",
    "For our training run, ",
    "One more thing: ",
    "Honest question: ",
    "To check my understanding, ",
    "Studying for the exam: ",
    "In plain words, ",
    "Help me out here: ",
    "Reading the worked example, ",
    "Going back to the module, ",
    "Maybe a silly question, but ",
    "Thinking about our cluster, ",
    "Practically speaking, ",
    "Before our next run, ",
    "As a beginner, ",
    "Still on this section: ",
)
# How learners close: what they want from the answer.
_CLOSINGS: tuple[str, ...] = (
    "?",
    " in simple terms?",
    ", and why does it matter?",
    " for a model too big for one GPU?",
    " with a short example?",
    " when memory is tight?",
    " compared with plain data parallel?",
    " in practice, not in theory?",
    "? I keep mixing this up.",
    ", and what does it cost?",
    ", step by step?",
    " on a node of eight GPUs?",
    " for our first big run?",
    ", and is there a rule of thumb?",
    "? One line is fine.",
    " as we add more GPUs?",
    ", and what is the catch?",
    " on A100 GPUs?",
    " in a few sentences?",
    " for an interview answer?",
    ", briefly?",
    " at our scale?",
)


def new_capacity() -> int:
    """How many distinct new questions there are."""
    return len(TOPICS) * len(_OPENINGS) * len(_CLOSINGS)


NEW_SEED = "mentor-bench-new-1"


@cache
def _order() -> tuple[int, ...]:
    # A fixed shuffle of the whole space, so neighbours differ in question, opening and closing alike (a
    # multiplicative stride left the openings cycling with a period of five).
    order = list(range(new_capacity()))
    random.Random(NEW_SEED).shuffle(order)
    return tuple(order)


def new_question(n: int) -> str:
    """The n-th new question (0 <= n < new_capacity()); different n, different text."""
    size = new_capacity()
    if not 0 <= n < size:
        raise IndexError(f"new question {n} out of range (there are {size})")
    j = _order()[n]
    topic, j = TOPICS[j % len(TOPICS)], j // len(TOPICS)
    opening, closing = _OPENINGS[j % len(_OPENINGS)], _CLOSINGS[j // len(_OPENINGS)]
    topic = topic.format(size=SIZES[j % len(SIZES)], gpus=GPUS[j % len(GPUS)])
    text = f"{opening}{topic}{closing}"
    return text[0].upper() + text[1:]


class NewQuestions:
    """Hands out disjoint ranges of new questions, so that no new question is sent twice in a run."""

    def __init__(self, first: int = 0) -> None:
        self.next = first

    def take(self, count: int) -> int:
        """Reserve `count` new questions; return the index of the first."""
        first, self.next = self.next, self.next + count
        if self.next > new_capacity():
            raise IndexError(f"a run asked for {self.next} new questions; there are {new_capacity()}")
        return first

    def texts(self, count: int) -> list[str]:
        """`count` new questions, reserved."""
        first = self.take(count)
        return [new_question(n) for n in range(first, first + count)]


# ---- "mix": a few popular questions repeat, most are new -----------------------------------------------------------

# Chosen so most questions are new, as learners' questions are, while the popular ones come back often: about
# 3 in 10 requests repeat one of the 40 curated questions, whose popularity falls off as 1/rank^1.1 (the most
# popular is asked ~10x as often as the 8th; query popularity is commonly fitted by Zipf laws with an exponent
# near 1); 7 in 10 are new.
MIX_REPEAT_SHARE = 0.30
MIX_ZIPF_S = 1.1
MIX_SEED = "mentor-bench-mix-1"


# Which requests repeat: those where the golden-ratio sequence frac(i * 0.618...) falls below the share. It looks
# irregular, yet every window of requests holds the share to within a point (a quick run measures 192 requests a
# level, where independent draws at 30% strayed to 37%).
_GOLDEN = (5**0.5 - 1) / 2


@cache
def _zipf_cdf() -> tuple[float, ...]:
    weights = [rank**-MIX_ZIPF_S for rank in range(1, len(QUESTIONS) + 1)]
    total = sum(weights)
    return tuple(acc / total for acc in itertools.accumulate(weights))


def is_repeat(index: int) -> bool:
    """Whether request `index` of a mixed stream asks a popular question."""
    return index * _GOLDEN % 1.0 < MIX_REPEAT_SHARE


def mixed_question(index: int, first_new: int) -> str:
    """Request `index` of a mixed stream: a popular question (Zipf over QUESTIONS' ranks, drawn from the seed),
    or new question `first_new + index` (so a stream never sends a new question twice; streams need disjoint
    ranges)."""
    if is_repeat(index):
        digest = hashlib.blake2b(f"{MIX_SEED}:{index}".encode(), digest_size=8).digest()
        u = int.from_bytes(digest) / 2**64
        return QUESTIONS[min(bisect_left(_zipf_cdf(), u), len(QUESTIONS) - 1)]
    return new_question(first_new + index)


def repeat_share(start: int, count: int) -> float:
    """The share of requests start..start+count-1 of a mixed stream that ask a popular question."""
    return sum(is_repeat(i) for i in range(start, start + count)) / count if count else 0.0


def question_for(workload: str, index: int, first_index: int = 0) -> str:
    """Request `index` of a load run: "repeat", "new" (new question first_index + index) or "mix"."""
    if workload == "repeat":
        return QUESTIONS[index % len(QUESTIONS)]
    if workload == "new":
        return new_question(first_index + index)
    if workload == "mix":
        return mixed_question(index, first_index)
    raise ValueError(f"unknown workload {workload!r}")
