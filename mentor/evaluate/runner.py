"""Run golden cases through the HTTP API, exactly as a learner app and an analyst would call it.

Every case is its own conversation with its own learner id. The last turn is the evaluated one; retrieval is
measured on the passages the chat reports having answered from (every search the reading made: the question after
the earlier turn it continues, each part, the module's reading list for a question about sources), so it is
measured on what the answer was built from. A deployment that reports no passages is asked `/v1/search` with the
query the chat reports (`retrieval_query`). After all cases,
the analyst API is read back to check that no personal detail reached the stored rows.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from mentor.evaluate.golden import Case
from mentor.evaluate.metrics import judge

log = logging.getLogger(__name__)
SEARCH_K = 4
SIGNALS_ROUTE = "/v1/signals/questions"
SIGNALS_PAGE = 200
SIGNALS_MAX_PAGES = 50
NOT_MEASURED = "PII in stored rows not measured"


@dataclass
class CaseResult:
    """What the mentor did with one case: the evaluated answer, its evidence, and the verdicts on it."""

    case: Case
    answer: str = ""
    out_of_scope: bool | None = None  # None: no answer (skipped or the call failed)
    coverage: str | None = None  # the response's full | partial | none; None when it carries no coverage
    citations: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    grounding: dict[str, Any] = field(default_factory=dict)
    retrieved: list[dict[str, Any]] = field(default_factory=list)  # /v1/search passages, best first
    search_query: str = ""
    engine: str | None = None
    model: str | None = None
    prompt_version: str | None = None
    module_version: str | None = None
    fallback_reason: str | None = None
    latency_ms: float | None = None  # wall time of the evaluated turn, as the client saw it
    server_latency_ms: float | None = None
    conversation_id: str | None = None
    question_ids: list[str] = field(default_factory=list)
    transcript: list[dict[str, Any]] = field(default_factory=list)  # every turn sent and what came back
    stored_rows: list[dict[str, Any]] | None = None  # analyst rows of this case's questions; None = not read
    storage_note: str | None = None
    skipped: str | None = None
    error: str | None = None
    verdicts: dict[str, Any] = field(default_factory=dict)

    @property
    def contexts(self) -> list[dict[str, Any]]:
        """The evidence: the quotes the answer cites, then the passages /v1/search retrieved."""
        quotes = [
            {
                "source": "citation",
                "n": c.get("n"),
                "chunk_id": c.get("chunk_id"),
                "section_id": c.get("section_id"),
                "text": c.get("quote", ""),
            }
            for c in self.citations
        ]
        passages = [
            {
                "source": "search",
                "rank": p.get("rank"),
                "chunk_id": p.get("chunk_id"),
                "section_id": p.get("section_id"),
                "text": p.get("text", ""),
                "score": p.get("score"),
            }
            for p in self.retrieved
        ]
        return quotes + passages

    def to_dict(self) -> dict[str, Any]:
        """The case and everything recorded about it, as report.json stores it."""
        return {
            **self.case.to_dict(),
            "answer": self.answer,
            "out_of_scope": self.out_of_scope,
            "coverage": self.coverage,
            "citations": self.citations,
            "tool_calls": self.tool_calls,
            "grounding": self.grounding,
            "contexts": self.contexts,
            "search_query": self.search_query,
            "engine": self.engine,
            "model": self.model,
            "prompt_version": self.prompt_version,
            "module_version": self.module_version,
            "fallback_reason": self.fallback_reason,
            "latency_ms": self.latency_ms,
            "server_latency_ms": self.server_latency_ms,
            "conversation_id": self.conversation_id,
            "question_ids": self.question_ids,
            "transcript": self.transcript,
            "stored_rows": self.stored_rows,
            "storage_note": self.storage_note,
            "skipped": self.skipped,
            "error": self.error,
            "verdicts": self.verdicts or (judge(self) if self.skipped is None else {}),
        }

    @classmethod
    def from_dict(cls, case: Case, data: Mapping[str, Any]) -> CaseResult:
        """The result `to_dict` wrote for `case` (report.json), to export or re-judge without asking again.

        The search passages come back from `contexts` (their section titles are not stored).
        """
        recorded = {name: data[name] for name in RECORDED if name in data}
        retrieved = [
            {k: c.get(k) for k in ("rank", "chunk_id", "section_id", "text", "score")} | {"section_title": None}
            for c in data.get("contexts", [])
            if c.get("source") == "search"
        ]
        return cls(case, retrieved=retrieved, **recorded)


# The fields `to_dict` writes as they are (the rest is the case, and `contexts` derived from citations + retrieved).
RECORDED = (
    "answer",
    "out_of_scope",
    "coverage",
    "citations",
    "tool_calls",
    "grounding",
    "search_query",
    "engine",
    "model",
    "prompt_version",
    "module_version",
    "fallback_reason",
    "latency_ms",
    "server_latency_ms",
    "conversation_id",
    "question_ids",
    "transcript",
    "stored_rows",
    "storage_note",
    "skipped",
    "error",
    "verdicts",
)


async def run_cases(
    cases: Sequence[Case],
    *,
    client: httpx.AsyncClient,
    analyst_token: str | None,
    corpus: str = "default",
    concurrency: int = 1,
    storage_wait_s: float = 5.0,
    on_result: Callable[[CaseResult], None] | None = None,
) -> list[CaseResult]:
    """Ask every case of `corpus` through `client` and judge the answers; other cases come back skipped.

    A deployment (`--url`) has its own corpus, so the poisoned cases only run in-process, where
    `run_in_process` gives them an app over the poisoned fixture corpus. `on_result` sees each case as it is
    answered or skipped (a progress bar); verdicts come after every case, with the stored rows.
    """
    run_id = uuid.uuid4().hex[:8]
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(case: Case) -> CaseResult:
        if case.corpus != corpus:
            result = CaseResult(
                case,
                skipped=f"needs the {case.corpus} corpus (eval/fixtures/{case.corpus}); only in-process runs load it",
            )
        else:
            async with gate:
                result = await _run_case(case, client=client, learner_id=f"eval-{run_id}-{case.id}")
        if on_result is not None:
            on_result(result)
        return result

    results = list(await asyncio.gather(*(one(case) for case in cases)))
    await attach_stored_rows(results, client=client, analyst_token=analyst_token, wait_s=storage_wait_s)
    for result in results:
        result.verdicts = judge(result)
    return results


async def _run_case(case: Case, *, client: httpx.AsyncClient, learner_id: str) -> CaseResult:
    result = CaseResult(case)
    data: dict[str, Any] = {}
    for index, message in enumerate(case.turns):
        last = index == len(case.turns) - 1
        body: dict[str, Any] = {
            "module_id": case.module_id,
            "message": message,
            "learner_id": learner_id,
            "style": case.style if last else "explain",
        }
        if result.conversation_id:
            body["conversation_id"] = result.conversation_id
        started = time.perf_counter()
        try:
            response = await client.post("/v1/chat", json=body)
        except httpx.HTTPError as exc:
            result.error = f"turn {index + 1}: the chat call failed ({type(exc).__name__}: {exc})"
            return result
        elapsed_ms = (time.perf_counter() - started) * 1000
        if response.status_code != 200:
            result.error = f"turn {index + 1}: /v1/chat answered HTTP {response.status_code}: {_message(response)}"
            return result
        data = response.json()
        result.conversation_id = data.get("conversation_id")
        result.question_ids.append(data.get("question_id", ""))
        result.transcript.append(
            {
                "message": message,
                "answer": data.get("answer", ""),
                "out_of_scope": data.get("out_of_scope"),
                "coverage": data.get("coverage"),
                "question_id": data.get("question_id"),
                "latency_ms": round(elapsed_ms, 2),
            }
        )
        result.latency_ms = round(elapsed_ms, 2)
    result.answer = data.get("answer", "")
    result.out_of_scope = data.get("out_of_scope")
    result.coverage = data.get("coverage")
    result.citations = list(data.get("citations", []))
    result.tool_calls = list(data.get("tool_calls", []))
    result.grounding = dict(data.get("grounding", {}))
    result.engine = data.get("engine")
    result.model = data.get("model")
    result.prompt_version = data.get("prompt_version")
    result.module_version = data.get("module_version")
    result.fallback_reason = data.get("fallback_reason")
    result.server_latency_ms = data.get("latency_ms")
    # A deployment older than the field gets the question as asked.
    result.search_query = data.get("retrieval_query") or case.turns[-1].strip()
    if "passages" in data:
        result.retrieved = _passages(data["passages"])  # what the answer stood on, as the chat retrieved it
    else:
        await _search(result, client=client)
    return result


async def _search(result: CaseResult, *, client: httpx.AsyncClient) -> None:
    params = {"module_id": result.case.module_id, "q": result.search_query, "k": SEARCH_K}
    try:
        response = await client.get("/v1/search", params=params)
    except httpx.HTTPError as exc:
        result.error = f"the search call failed ({type(exc).__name__}: {exc})"
        return
    if response.status_code != 200:
        result.error = f"/v1/search answered HTTP {response.status_code}: {_message(response)}"
        return
    result.retrieved = _passages(response.json().get("passages", []))


def _passages(passages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "rank": rank,
            "chunk_id": p.get("chunk_id"),
            "section_id": p.get("section_id"),
            "section_title": p.get("section_title"),
            "text": p.get("text", ""),
            "score": p.get("score"),
        }
        for rank, p in enumerate(passages, start=1)
    ]


def _message(response: httpx.Response) -> str:
    try:
        return str(response.json().get("message", response.text[:200]))
    except ValueError:
        return response.text[:200]


async def attach_stored_rows(
    results: Sequence[CaseResult],
    *,
    client: httpx.AsyncClient,
    analyst_token: str | None,
    wait_s: float = 5.0,
) -> None:
    """Read the stored rows of every answered pii case from the analyst API into `stored_rows`.

    Signals are written off the request path, so rows may lag the answers: poll for up to `wait_s` seconds.
    """
    wanted = [r for r in results if r.case.expect.pii and r.skipped is None and r.question_ids]
    if not wanted:
        return
    ids = {qid for r in wanted for qid in r.question_ids if qid}
    rows, note = await fetch_stored_rows(client, analyst_token=analyst_token, question_ids=ids, wait_s=wait_s)
    for result in wanted:
        found = [rows[qid] for qid in result.question_ids if qid in rows]
        if len(found) == len(result.question_ids):
            result.stored_rows = found
        else:
            result.storage_note = note or f"{len(result.question_ids) - len(found)} stored row(s) not found"


async def fetch_stored_rows(
    client: httpx.AsyncClient,
    *,
    analyst_token: str | None,
    question_ids: set[str],
    wait_s: float = 5.0,
) -> tuple[dict[str, dict[str, Any]], str | None]:
    """Page through GET /v1/signals/questions until every id is found or `wait_s` passes; return rows and a note."""
    headers = {"Authorization": f"Bearer {analyst_token}"} if analyst_token else {}
    found: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + wait_s
    while True:
        cursor: str | None = None
        for _page in range(SIGNALS_MAX_PAGES):
            params: dict[str, Any] = {"limit": SIGNALS_PAGE}
            if cursor:
                params["cursor"] = cursor
            try:
                response = await client.get(SIGNALS_ROUTE, params=params, headers=headers)
            except httpx.HTTPError as exc:
                return found, f"the analyst API could not be read ({type(exc).__name__}): {NOT_MEASURED}"
            if response.status_code == 404:
                return found, f"the analyst route GET {SIGNALS_ROUTE} is not available (404): {NOT_MEASURED}"
            if response.status_code in (401, 403):
                return found, (
                    f"the analyst API refused the request (HTTP {response.status_code}; "
                    f"{'no' if not analyst_token else 'a wrong'} analyst token): {NOT_MEASURED}"
                )
            if response.status_code != 200:
                return found, f"the analyst API answered HTTP {response.status_code}: {NOT_MEASURED}"
            body = response.json()
            for item in body.get("items", []):
                if isinstance(item, Mapping) and item.get("question_id") in question_ids:
                    found[item["question_id"]] = dict(item)
            cursor = body.get("next_cursor")
            if not cursor or question_ids <= found.keys():
                break
        if question_ids <= found.keys():
            return found, None
        if time.monotonic() >= deadline:
            missing = len(question_ids - found.keys())
            return found, f"{missing} of {len(question_ids)} stored rows did not appear within {wait_s:g} s"
        await asyncio.sleep(0.25)
