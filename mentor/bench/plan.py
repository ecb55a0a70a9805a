"""What `mentor bench` measures: the presets, the configurations run at each concurrency, and how they pair up."""

from __future__ import annotations

# Sized so --quick stays under five minutes on a 2-core machine and the full run under ~20.
PRESETS = {
    True: {
        "requests_per_level": 64,
        "repetitions": 3,
        "ingest_modules": (1, 20),
        "first_answer_runs": 2,
        "ask_runs": 2,
        "stage_questions": 30,
    },
    False: {
        "requests_per_level": 192,
        "repetitions": 5,
        "ingest_modules": (1, 20, 200),
        "first_answer_runs": 3,
        "ask_runs": 3,
        "stage_questions": 50,
    },
}
# (result name, load-generator kind, server, workload): the order each level is measured in. "repeat": the 40
# curated questions, which mentor's query cache answers after warm-up; "new": every question new to both;
# "mix": popular questions repeat, most are new (mentor.bench.questions states the share).
PLAN = (
    ("stub", "stub", "stub", "repeat"),
    ("mentor_llm", "mentor", "mentor_llm", "repeat"),
    ("mentor_llm_stream", "mentor_stream", "mentor_llm", "repeat"),
    ("mentor_llm_uncached", "mentor", "mentor_llm", "new"),
    ("mentor_llm_mixed", "mentor", "mentor_llm", "mix"),
    ("mentor_extractive", "mentor", "mentor_extractive", "repeat"),
    ("baseline", "baseline", "baseline", "repeat"),
    ("baseline_uncached", "baseline", "baseline", "new"),
    ("baseline_mixed", "baseline", "baseline", "mix"),
)
SERVER_OF = {name: server for name, _kind, server, _workload in PLAN}
LLM_CONFIGS = tuple(name for name, server in SERVER_OF.items() if server == "mentor_llm")
# mentor's LLM-engine run and the baseline's run of the same workload: the ratios compare these pairs.
PAIRS = {
    "repeat": ("mentor_llm", "baseline"),
    "new": ("mentor_llm_uncached", "baseline_uncached"),
    "mix": ("mentor_llm_mixed", "baseline_mixed"),
}
# Every backend by default, each in its own process: the report then shows the stages under each, side by side.
STAGE_BACKENDS = ("torch", "onnx", "onnx-int8")
