"""Run the suite against an app in this process: one app per corpus group, its lifespan run like a server's."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from mentor.api.app import create_app
from mentor.evaluate.golden import CORPORA, Case
from mentor.evaluate.runner import CaseResult, run_cases
from mentor.settings import Settings

FIXTURES_DIR = Path("eval/fixtures")
CLIENT_TIMEOUT_S = 120.0  # an LLM answer with tool rounds can take a while


@asynccontextmanager
async def in_process_client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """Yield an httpx client for `create_app(settings)`, with the app's lifespan running around it.

    httpx's ASGITransport does not send lifespan events, so the runtime would never be built: run the
    lifespan here, exactly as uvicorn does at start and shutdown.
    """
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mentor", timeout=CLIENT_TIMEOUT_S) as client:
            yield client


def corpus_settings(settings: Settings, corpus: str, *, fixtures_dir: Path = FIXTURES_DIR) -> Settings:
    """Settings for one corpus group: always the canary prompts; the poisoned corpus in its own store."""
    if corpus not in CORPORA:
        raise ValueError(f"unknown corpus {corpus!r}")
    update: dict[str, object] = {"prompts_dir": fixtures_dir / "prompts"}
    if corpus == "poisoned":
        # Its own data dir and collection: the poisoned chunks must never reach the real index.
        update |= {
            "corpus_dir": fixtures_dir / "poisoned",
            "data_dir": settings.data_dir / "eval-poisoned",
            "collection": f"{settings.collection}_poisoned",
        }
    return settings.model_copy(update=update)


async def run_in_process(
    cases: Sequence[Case],
    settings: Settings,
    *,
    fixtures_dir: Path = FIXTURES_DIR,
    analyst_token: str | None = None,
    concurrency: int = 1,
    on_result: Callable[[CaseResult], None] | None = None,
) -> list[CaseResult]:
    """Run every case in-process, one app per corpus group; results come back in the order of `cases`.

    `on_result` sees each case as it is answered (`run_cases`).
    """
    by_id: dict[str, CaseResult] = {}
    for corpus in CORPORA:
        group = [case for case in cases if case.corpus == corpus]
        if not group:
            continue
        group_settings = corpus_settings(settings, corpus, fixtures_dir=fixtures_dir)
        async with in_process_client(group_settings) as client:
            token = analyst_token or _analyst_token(group_settings)
            results = await run_cases(
                group, client=client, analyst_token=token, corpus=corpus, concurrency=concurrency, on_result=on_result
            )
        by_id.update((result.case.id, result) for result in results)
    return [by_id[case.id] for case in cases]


def _analyst_token(settings: Settings) -> str | None:
    """The in-process app's analyst token: configured, or the one its start-up generated into data_dir."""
    try:
        from mentor.runtime import analyst_token
    except ImportError:  # an older runtime without the analyst API: the PII metric reports "not measured"
        return None
    return analyst_token(settings)
