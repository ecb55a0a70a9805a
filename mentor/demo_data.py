"""`mentor demo-data`: synthetic learners asking the golden set's questions, so a fresh install shows every panel.

A new database is empty, and the dashboard hides every group of fewer than `min_cohort` learners: a newcomer has
nothing to look at. This asks questions taken from the eval's golden set (no module text lives here) as
`demo-learner-01`, `demo-learner-02` ... through the chat, answered by the extractive engine (offline, free, ~0.1 s a
question), and logs each one through the real signal writer, marked with the channel "demo" and dated over the past
days. A group of learners the size of the cohort asks each shared question on one day, so the heatmap, the groups by
meaning, the calculators and the feedback show; a few questions asked by one learner each stay hidden, so the
dashboard's explanation of hidden groups shows too; misspelled questions and follow-ups show the question as read.

It writes only into a database that holds no other signals (a scratch one) unless forced; the demo rows of an
earlier run are replaced, so running it twice gives the same picture.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from sqlalchemy import Engine, func, or_, select
from sqlmodel import Session

from mentor.answer import ChatInput
from mentor.chat import ChatService
from mentor.errors import InvalidInput
from mentor.evaluate.golden import Case
from mentor.record import NO_SINK, AnsweredQuestion
from mentor.runtime import LearnerState, Runtime, build_chat
from mentor.signals.queries import erase_learner
from mentor.signals.records import Feedback
from mentor.signals.tables import QuestionRow
from mentor.signals.writer import SignalWriter

DEMO_CHANNEL = "demo"
DEMO_LEARNER = "demo-learner-{:02d}"
# Golden cases asked by a whole group (shown), by category and how many: what the module answers (with calculators),
# what mentor has to read twice (misspelled, follow-ups), and what it does not cover (the gaps panel).
SHARED = (
    ("concept", 3),
    ("calculation", 2),
    ("decision", 1),
    ("odd_in_scope", 2),
    ("follow_up", 2),
    ("not_covered", 2),
    ("off_topic", 1),
)
# Golden cases asked by one learner each: groups below any cohort, which the dashboard hides and explains.
SINGLE = (("partial", 4), ("verdict", 2), ("neighbour", 2))
RATED = 4  # the first shared in-scope questions every asker rates (one in four "down"): the feedback panels
DAY_S = 86_400


@dataclass(frozen=True, slots=True)
class DemoAsk:
    """One synthetic learner's conversation: the turns of a golden case, asked `days_ago` at `minute` past 9:00 UTC."""

    learner: str
    case: Case
    days_ago: int
    minute: int
    rating: str | None = None  # "up" or "down" for the last turn's answer; None: not rated


@dataclass(frozen=True, slots=True)
class DemoReport:
    learners: int
    questions: int
    ratings: int
    replaced: int  # demo questions of an earlier run, removed first


def other_signals(engine: Engine) -> int:
    """Questions in the database that `mentor demo-data` did not write (any other channel, or none recorded)."""
    with Session(engine) as session:
        query = select(func.count()).select_from(QuestionRow)
        query = query.where(or_(QuestionRow.channel.is_(None), QuestionRow.channel != DEMO_CHANNEL))
        return session.execute(query).scalar_one()


def refuse_unless_scratch(engine: Engine, *, force: bool) -> None:
    """Raise InvalidInput when the database holds real learners' signals and `force` is not given."""
    others = 0 if force else other_signals(engine)
    if others:
        raise InvalidInput(
            f"the signals database already holds {others} questions that are not demo data: demo-data writes into a "
            "scratch database only (point MENTOR_DATA_DIR or MENTOR_DATABASE_URL at a new one), or pass --force "
            "to add the demo learners beside them (their rows are marked channel 'demo')"
        )


def plan_demo(cases: Sequence[Case], *, learners: int, min_cohort: int, days: int) -> list[DemoAsk]:
    """Who asks which golden case on which day: shared cases by groups of at least `min_cohort`, the rest alone."""
    names = [DEMO_LEARNER.format(i + 1) for i in range(max(learners, min_cohort + 2))]
    by_category: dict[str, list[Case]] = {}
    for case in cases:
        by_category.setdefault(case.category, []).append(case)
    shared = [case for category, n in SHARED for case in by_category.get(category, [])[:n]]
    single = [case for category, n in SINGLE for case in by_category.get(category, [])[-n:] if case not in shared]
    if not shared:
        raise InvalidInput("the golden set holds no case for the modules served: nothing to ask")
    plan: list[DemoAsk] = []
    answerable = [case.id for case in shared if not case.expect.out_of_scope and len(case.turns) == 1]
    rated = set(answerable[:RATED])
    for j, case in enumerate(shared):
        size = min(len(names), min_cohort + j % 3)  # groups of a few sizes, each at least the cohort
        day = 1 + (2 * j) % days
        for t in range(size):
            rating = ("down" if t % 4 == 3 else "up") if case.id in rated else None
            plan.append(DemoAsk(names[(5 * j + t) % len(names)], case, day, 11 * t, rating))
    for k, case in enumerate(single):
        plan.append(DemoAsk(names[(3 * k) % len(names)], case, 1 + (3 * k) % days, 7 * k))
    return sorted(plan, key=lambda ask: (-ask.days_ago, ask.minute))


def fill_demo_data(
    runtime: Runtime,
    cases: Sequence[Case],
    writer: SignalWriter,
    *,
    learners: int = 12,
    days: int = 14,
    force: bool = False,
    now: float | None = None,
    progress: Callable[[int], None] | None = None,
) -> DemoReport:
    """Ask the planned questions and log them through `writer`, dated in the past; replace earlier demo rows."""
    engine = runtime.database
    refuse_unless_scratch(engine, force=force)
    replaced = erase_demo_data(engine)
    served = [c for c in cases if c.corpus == "default" and c.module_id in runtime.modules]
    plan = plan_demo(served, learners=learners, min_cohort=runtime.settings.min_cohort, days=days)
    chat = demo_chat(runtime)
    midnight = (now or time.time()) // DAY_S * DAY_S
    questions, ratings = asyncio.run(_ask(chat, plan, writer, midnight, progress or (lambda _n: None)))
    return DemoReport(len({ask.learner for ask in plan}), questions, ratings, replaced)


def demo_chat(runtime: Runtime) -> ChatService:
    """A chat that answers with the extractive engine and logs nothing itself (the demo dates and logs each answer).

    No language model even when one is configured: the demo is for a first look, offline and free. Its own
    in-memory limits, so a hundred questions in a few seconds are not refused, nor counted against real learners.
    """
    unlimited = {
        "llm_base_url": None,
        "llm_model": None,
        "llm_api_key": None,
        "rate_limit_per_minute": 10_000,
        "rate_limit_per_client_per_minute": 10_000,
    }
    settings = runtime.settings.model_copy(update=unlimited)
    return build_chat(settings, runtime.catalog, runtime.embedder, sink=NO_SINK, state=LearnerState.in_memory(settings))


async def _ask(
    chat: ChatService, plan: list[DemoAsk], writer: SignalWriter, midnight: float, progress: Callable[[int], None]
) -> tuple[int, int]:
    questions = ratings = 0
    for ask in plan:
        at = midnight - ask.days_ago * DAY_S + 9 * 3600 + ask.minute * 60
        conversation_id = None
        answered: AnsweredQuestion | None = None
        for turn, message in enumerate(ask.case.turns):
            request = ChatInput(
                message=message,
                module_id=ask.case.module_id,
                conversation_id=conversation_id,
                learner_id=ask.learner,
                style=ask.case.style,
                client="demo-data",
                channel=DEMO_CHANNEL,
            )
            answered = await chat.ask(request)
            conversation_id = answered.conversation_id
            writer.submit(replace(answered, created=at + turn * 45))
            questions += 1
        if ask.rating is not None and answered is not None:
            writer.submit(Feedback(answered.question_id, answered.learner_key, ask.rating, None, at + 120))
            ratings += 1
        progress(1)
    return questions, ratings


def erase_demo_data(engine: Engine) -> int:
    """Remove every learner with demo rows (all their rows: they are synthetic); return how many questions went."""
    with Session(engine) as session:
        query = select(QuestionRow.learner_id).where(QuestionRow.channel == DEMO_CHANNEL).distinct()
        keys = list(session.execute(query).scalars())
    return sum(erase_learner(engine, key) for key in keys)
