"""A question about activation memory is the activation calculator's, or no calculator's: never another's figure.

The activation calculator needs the model's shape (sequence length, hidden size, heads). Asked about activation memory
without it ("how much activation memory does a 13B model need at 4k context?"), the planner used to fall through to
the training-memory calculator, whose figure (16 bytes/param of model state) answers a question nobody asked. The
questions are generated from templates, written before the change; with the shape given, the activation calculator
runs.
"""

from __future__ import annotations

import itertools

import pytest

from mentor.engines.planner import plan_tools

WITHOUT_SHAPE = (
    "how much activation memory does a {n}B model need at {k}k context?",
    "activation memory of a {n}B model with micro batch {b}?",
    "what's the activation memory when training a {n}B model?",
    "{n}B model, {k}k sequence: how much memory do the activations take?",
)
WITH_SHAPE = (
    "activation memory for a {n}B model: seq {k}k, hidden 4096, 32 heads, micro batch {b}",
    "activations of a {n}B model at {k}k context with hidden size 8192 and 64 heads",
)
SIZES, CONTEXTS, BATCHES = (7, 13, 70), (2, 8), (1, 4)


def questions(templates: tuple[str, ...]) -> list[str]:
    return sorted(
        {t.format(n=n, k=k, b=b) for t in templates for n, k, b in itertools.product(SIZES, CONTEXTS, BATCHES)}
    )


@pytest.mark.parametrize("question", questions(WITHOUT_SHAPE))
def test_no_other_calculator_answers_an_activation_question(question: str) -> None:
    assert [call.name for call in plan_tools(question)] in ([], ["activation_memory"])


@pytest.mark.parametrize("question", questions(WITH_SHAPE))
def test_the_activation_calculator_runs_with_the_shape(question: str) -> None:
    assert [call.name for call in plan_tools(question)] == ["activation_memory"]
