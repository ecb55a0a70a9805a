"""`mentor demo-data`: synthetic learners fill a scratch database so every dashboard panel shows; a real one is refused
unless forced, and a second run replaces the first."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlmodel import Session
from typer.testing import CliRunner

from mentor.api import create_app
from mentor.cli import app
from mentor.demo_data import DEMO_CHANNEL, fill_demo_data, other_signals, plan_demo
from mentor.errors import InvalidInput
from mentor.evaluate.golden import load_golden
from mentor.signals.tables import QuestionRow

from .conftest import ROOT
from .test_signals import TOKEN, signals_runtime

AUTH = {"Authorization": f"Bearer {TOKEN}"}
GOLDEN = ROOT / "eval" / "golden.jsonl"


def channels(engine) -> dict[str | None, int]:
    with Session(engine) as session:
        query = select(QuestionRow.channel, func.count()).group_by(QuestionRow.channel)
        return dict(session.execute(query).all())


@pytest.mark.slow  # the command loads its own embedder, as a newcomer's first run does
def test_demo_data_on_a_scratch_database_fills_every_panel(tmp_path, monkeypatch, runtime) -> None:
    monkeypatch.setenv("MENTOR_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(ROOT)  # the default golden set and corpus, as from a checkout
    result = CliRunner().invoke(app, ["demo-data"])
    assert result.exit_code == 0, result.output
    assert "demo learners" in result.output and "/dashboard" in result.output
    rt = signals_runtime(runtime, tmp_path, f"sqlite:///{tmp_path / 'data' / 'mentor.db'}")  # the default cohort: 5
    with TestClient(create_app(rt.settings, runtime=rt)) as client:
        s = client.get("/v1/signals/summary", headers=AUTH).json()
        assert s["min_cohort"] == 5 and s["learners"] >= 7 and s["questions"] >= 60
        # Every panel has a group above the cohort ...
        for panel in ("questions_per_section", "content_gaps", "most_asked", "feedback_by_section", "tool_usage"):
            assert s[panel], panel
            assert all(group["learners"] >= 5 for group in s[panel]), panel
        assert s["feedback_by_prompt_version"] and s["engine_mix"] and 0 < s["out_of_scope_share"] < 1
        assert len(s["heatmap"]["buckets"]) >= 7  # spread over days
        # ... and some groups are hidden, so the dashboard's explanation of them shows too.
        assert s["suppressed_groups"] > 0
        items = client.get("/v1/signals/questions", params={"limit": 500}, headers=AUTH).json()["items"]
    assert {item["channel"] for item in items} == {DEMO_CHANNEL}  # clearly marked
    assert any(item["read_as"] and item["read_as"] != item["text"] for item in items)  # misreadings to look at
    golden = {turn for case in load_golden(GOLDEN, "all") for turn in case.turns}
    assert {item["text"] for item in items} <= golden  # every question is the golden set's
    rt.writer.stop()


def test_demo_data_refuses_real_signals_unless_forced_and_replaces_itself(tmp_path, monkeypatch, runtime) -> None:
    (tmp_path / "data").mkdir()
    url = f"sqlite:///{tmp_path / 'data' / 'mentor.db'}"
    rt = signals_runtime(runtime, tmp_path, url, min_cohort=2)  # small groups: fewer questions to ask
    cases = load_golden(GOLDEN, "all")
    with TestClient(create_app(rt.settings, runtime=rt)) as client:
        client.post("/v1/chat", json={"message": "what is FSDP?", "learner_id": "a-real-learner"})
        assert rt.writer.flush()
    assert other_signals(rt.database) == 1
    with pytest.raises(InvalidInput, match="not demo data.*--force"):
        fill_demo_data(rt, cases, rt.writer)
    # The command refuses before it loads anything: a wrong database costs a second, not a model load.
    monkeypatch.setenv("MENTOR_DATA_DIR", str(tmp_path / "data"))
    started = time.perf_counter()
    refused = CliRunner().invoke(app, ["demo-data", "--golden", str(GOLDEN)])
    assert refused.exit_code == 2 and "not demo data" in refused.output and "--force" in refused.output
    assert time.perf_counter() - started < 10 and not (tmp_path / "data" / "chroma").exists()
    assert channels(rt.database) == {"chat": 1}

    first = fill_demo_data(rt, cases, rt.writer, learners=4, force=True)
    assert rt.writer.flush()
    assert first.learners == 4 and first.replaced == 0  # min_cohort 2 + 2
    assert channels(rt.database) == {"chat": 1, DEMO_CHANNEL: first.questions}
    again = fill_demo_data(rt, cases, rt.writer, learners=4, force=True)
    assert rt.writer.flush()
    assert again.replaced == first.questions  # the earlier demo rows went; the real learner's stayed
    assert channels(rt.database) == {"chat": 1, DEMO_CHANNEL: again.questions}
    rt.writer.stop()


def test_the_plan_gives_each_shared_question_a_cohort_and_leaves_some_alone() -> None:
    cases = load_golden(GOLDEN, "all")
    plan = plan_demo(cases, learners=3, min_cohort=5, days=14)
    learners = {ask.learner for ask in plan}
    assert learners == {f"demo-learner-{i:02d}" for i in range(1, 8)}  # at least the cohort + 2
    askers: dict[str, set[str]] = {}
    for ask in plan:
        askers.setdefault(ask.case.id, set()).add(ask.learner)
    assert sum(len(who) >= 5 for who in askers.values()) >= 10 and any(len(who) == 1 for who in askers.values())
    assert all(1 <= ask.days_ago <= 14 for ask in plan)
    assert {ask.rating for ask in plan} == {"up", "down", None}
