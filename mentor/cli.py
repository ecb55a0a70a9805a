"""The `mentor` command line: the same code the service runs, in-process."""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import ValidationError

from mentor.errors import MentorError

app = typer.Typer(
    help="mentor: answers learners' questions grounded in the study module they are reading.\n\n"
    "Every setting is read from MENTOR_* environment variables (see README); options override them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
F = TypeVar("F", bound=Callable[..., Any])


def handle_errors(fn: F) -> F:
    """Turn mentor's errors into one line on stderr and a non-zero exit (2 for bad input, 1 otherwise)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except MentorError as exc:
            typer.echo(f"error: {exc.message}", err=True)
            raise typer.Exit(2 if exc.status_code < 500 else 1) from None
        except ValidationError as exc:
            from mentor.api.app import describe_validation

            typer.echo(f"error: invalid setting: {describe_validation(exc.errors())}", err=True)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


def make_settings(**overrides: Any):  # noqa: ANN201 - avoids importing pydantic-settings for --help
    """Settings from the environment, with command-line overrides that were given."""
    from mentor.settings import Settings

    settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    for noisy in ("bm25s", "alembic"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return settings


ModuleOpt = Annotated[str | None, typer.Option("--module", help="Module id (optional with one module).")]
CorpusOpt = Annotated[Path | None, typer.Option("--corpus", help="Directory of module Markdown files.")]


@app.command()
@handle_errors
def ingest(corpus: CorpusOpt = None) -> None:
    """Chunk every module, embed what changed, bring the Chroma index in line with the corpus and publish it.

    The one-off job of a deployment with replicas: they serve the published modules within MENTOR_RELOAD_INTERVAL_S.
    """
    from rich.progress import Progress

    from mentor.runtime import ingest_corpus

    settings = make_settings(corpus_dir=corpus)
    with Progress(transient=False) as bar:
        task = bar.add_task("embedding chunks", total=None, visible=False)
        catalog, report = ingest_corpus(
            settings,
            on_plan=lambda n: bar.update(task, total=n, visible=n > 0),
            progress=lambda n: bar.advance(task, n),
        )
    typer.echo(f"{catalog.describe()}: {report}")


@app.command()
@handle_errors
def search(
    query: Annotated[str, typer.Argument(help="The question or keywords to search for.")],
    module: ModuleOpt = None,
    k: Annotated[int | None, typer.Option("--k", help="Passages to return (1-50); default MENTOR_TOP_K.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list of passages.")] = False,
    corpus: CorpusOpt = None,
) -> None:
    """Hybrid (dense + BM25) search of one module's passages."""
    from mentor.retrieve import validate_query
    from mentor.runtime import build_runtime

    validate_query(query)  # fail fast, before the model loads
    runtime = build_runtime(make_settings(corpus_dir=corpus))
    result = runtime.retriever.search(query, runtime.module(module).id, runtime.settings.top_k if k is None else k)
    if as_json:
        rows = [
            {
                "chunk_id": p.chunk_id,
                "section_id": p.section_id,
                "section_title": p.section_title,
                "text": p.text,
                "score": p.score,
            }
            for p in result.passages
        ]
        typer.echo(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    scope = "in scope" if result.in_scope else "OUT OF SCOPE"
    typer.echo(f"relevance {result.relevance:.3f} ({scope}, threshold {runtime.retriever.scope_threshold})")
    for p in result.passages:
        preview = " ".join(p.text.split())[:160]
        typer.echo(f"{p.rank}. [{p.section_id}] {p.section_title}  score={p.score:.4f}\n   {preview}")


@app.command()
@handle_errors
def calibrate(
    labelled: Annotated[Path, typer.Option("--set", help="JSON lines of {module_id, q, in_scope}.")] = Path(
        "eval/calibration/scope.jsonl"
    ),
    module: Annotated[str | None, typer.Option("--module", help="Module the questions are about.")] = None,
) -> None:
    """Fit the scope weights and threshold on labelled questions and print the settings to use."""
    from mentor.calibrate import calibrate_scope
    from mentor.runtime import build_runtime
    from mentor.scope import load_labelled

    runtime = build_runtime(make_settings())
    module_id = runtime.module(module).id
    questions = [row for row in load_labelled(labelled, module_id) if row.module_id == module_id]
    result = calibrate_scope(runtime.retriever, module_id, questions)
    typer.echo(
        f"{result.in_scope} in-scope and {result.out_of_scope} out-of-scope questions: balanced accuracy "
        f"{result.balanced_accuracy:.3f}, gap {result.margin:.3f}\n"
        f"MENTOR_SCOPE_WEIGHT={result.weight}\nMENTOR_SCOPE_EXAMPLE_WEIGHT={result.example_weight}\n"
        f"MENTOR_SCOPE_THRESHOLD={result.threshold}"
    )
    for question in result.misclassified:
        typer.echo(f"  misclassified: {question}")


@app.command()
@handle_errors
def ask(
    question: Annotated[str, typer.Argument(help="The learner's question.")],
    module: ModuleOpt = None,
    conversation: Annotated[str | None, typer.Option("--conversation", help="Continue this conversation.")] = None,
    style: Annotated[str, typer.Option("--style", help="explain, hint or brief.")] = "explain",
    as_json: Annotated[bool, typer.Option("--json", help="Print the full response object.")] = False,
) -> None:
    """Ask the mentor in-process, exactly as POST /v1/chat would answer."""
    import asyncio

    from mentor.answer import ChatInput
    from mentor.api.schemas import ChatResponse
    from mentor.runtime import build_runtime

    runtime = build_runtime(make_settings())
    request = ChatInput(message=question, module_id=module, conversation_id=conversation, style=style, client="cli")
    runtime.writer.start()  # the CLI's questions are learning signals too
    try:
        result = asyncio.run(runtime.chat.ask(request))
    finally:
        runtime.writer.stop()
    response = ChatResponse.of(result).public()
    if as_json:
        typer.echo(json.dumps(response, indent=2, ensure_ascii=False))
        return
    typer.echo(response["answer"])
    for citation in response["citations"]:
        typer.echo(f"  [{citation['n']}] {citation['section_title']} ({citation['section_id']})")
    verdict = "grounded" if response["grounding"]["grounded"] else "NOT grounded"
    typer.echo(
        f"-- {response['engine']}, {verdict}, {response['latency_ms']:.0f} ms, "
        f"conversation {response['conversation_id']}"
    )


@app.command()
@handle_errors
def calc(
    name: Annotated[str | None, typer.Argument(help="Calculator name (see --list).")] = None,
    args: Annotated[str, typer.Option("--args", help='Arguments as a JSON object, e.g. \'{"params": "7B"}\'.')] = "{}",
    list_all: Annotated[bool, typer.Option("--list", help="List the calculators and their descriptions.")] = False,
) -> None:
    """Run an exact calculator (the same registry the chat's LLM and the HTTP API use); prints JSON."""
    from mentor.errors import InvalidInput
    from mentor.tools import REGISTRY, run_tool

    if list_all:
        for calculator in REGISTRY.values():
            typer.echo(f"{calculator.name}\n    {calculator.description}")
        return
    if not name:
        raise InvalidInput("name a calculator, or use --list to see them")
    if name not in REGISTRY:
        raise InvalidInput(f"unknown calculator {name!r}; available: {', '.join(REGISTRY)}")
    typer.echo(json.dumps(run_tool(name, args).to_dict(), indent=2, ensure_ascii=False))


@app.command()
@handle_errors
def serve(
    host: Annotated[str | None, typer.Option(help="Address to bind (default MENTOR_HOST or 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default MENTOR_PORT or 8000).")] = None,
    workers: Annotated[
        int,
        typer.Option(min=1, max=64, help="Worker processes on this port; more than 1 needs MENTOR_REDIS_URL."),
    ] = 1,
) -> None:
    """Run the HTTP service (uvicorn). An embedded index is brought up to date with the corpus on start; a shared
    one is served as `mentor ingest` published it."""
    import uvicorn

    from mentor.api import create_app
    from mentor.logs import uvicorn_log_config
    from mentor.runtime import build_runtime, prepare_for_workers

    settings = make_settings(host=host, port=port)
    # Request limits live in mentor/api/middleware.py (header bytes, body bytes, time to receive a body; its
    # docstring lists every limit and where it lives); the server's own part is set here.
    server = {
        "host": settings.host,
        "port": settings.port,
        "log_level": settings.log_level.lower(),
        "timeout_keep_alive": 5,  # seconds an idle keep-alive connection is kept (uvicorn's default, stated)
        "server_header": False,  # no "server: uvicorn" to fingerprint
    }
    if workers > 1:
        # The one-off jobs run here, once; each worker then builds its own runtime without syncing anything.
        prepare_for_workers(settings, workers)
        os.environ["MENTOR_SYNC_ON_START"] = "false"  # what the workers' settings read
        uvicorn.run(
            "mentor.api.app:create_app_from_environment",
            factory=True,
            workers=workers,
            log_config=uvicorn_log_config(create_app(settings)),  # the app's routes; no runtime is built
            **server,
        )
        return
    # Built before the server starts: a start-up failure (Chroma still away after its wait) ends as one line and
    # a non-zero exit here, not as a traceback from uvicorn's lifespan, and the port opens only once it can answer.
    runtime = build_runtime(settings)
    app = create_app(settings, runtime=runtime)
    try:
        uvicorn.run(app, log_config=uvicorn_log_config(app), **server)  # access log: route templates, no queries
    finally:
        runtime.writer.stop()  # an app leaves a runtime it was given running: flush the signals still queued


@app.command()
@handle_errors
def token(
    learner_id: Annotated[str, typer.Argument(help="The platform's learner id: the token's sub.")],
    ttl: Annotated[str, typer.Option("--ttl", help="Lifetime: 30m, 1h, 7d or 2w.")] = "1h",
) -> None:
    """Print a learner token signed with MENTOR_LEARNER_TOKEN_SECRET, for tests and demos.

    In production the learning platform's server mints the same token (HS256; sub, aud, exp) for each learner.
    """
    from mentor.auth import mint_learner_token
    from mentor.errors import ConfigError, InvalidInput

    try:
        lifetime = parse_age(ttl)
    except InvalidInput as exc:
        raise InvalidInput(f"--ttl: {exc.message}") from None
    settings = make_settings()
    if settings.learner_token_secret is None:
        raise ConfigError("MENTOR_LEARNER_TOKEN_SECRET is not set; a learner token needs the secret the server checks")
    typer.echo(
        mint_learner_token(
            learner_id,
            secret=settings.learner_token_secret.get_secret_value(),
            audience=settings.learner_token_audience,
            ttl_s=int(lifetime.total_seconds()),
        )
    )


db_app = typer.Typer(help="The signals database: schema migrations (Alembic).", no_args_is_help=True)
app.add_typer(db_app, name="db")


@db_app.command("upgrade")
@handle_errors
def db_upgrade() -> None:
    """Bring the signals database (MENTOR_DATABASE_URL) to the latest schema: the one-off job before replicas start."""
    from mentor.db import make_engine
    from mentor.errors import NotReady
    from mentor.signals.schema import migrate, schema_behind

    settings = make_settings()
    settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    engine = make_engine(settings.database)
    try:
        migrate(engine)
        behind = schema_behind(engine)
    except Exception as exc:
        raise NotReady(f"the signals database cannot be upgraded: {type(exc).__name__}: {exc}".splitlines()[0]) from exc
    typer.echo(behind or "signals database schema is up to date")


signals_app = typer.Typer(help="The learning-signal log: summary, export and retention.", no_args_is_help=True)
app.add_typer(signals_app, name="signals")


def parse_since(value: str | None):  # noqa: ANN201
    """An ISO date/time, or an age like 7d / 12h ago."""
    from datetime import UTC, datetime

    from mentor.errors import InvalidInput

    if value is None:
        return None
    try:
        return datetime.now(UTC) - parse_age(value)
    except InvalidInput:
        pass
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidInput(f"since: use an ISO date (2026-11-30) or an age (7d, 12h); got {value!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def parse_age(value: str):  # noqa: ANN201
    """'180d', '12h', '30m' or '2w' as a timedelta."""
    import re
    from datetime import timedelta

    from mentor.errors import InvalidInput

    match = re.fullmatch(r"\s*(\d+)\s*([wdhm])\s*", value or "")
    if match is None or int(match.group(1)) == 0:
        raise InvalidInput(f"expected an age like 180d, 12h, 30m or 2w (got {value!r})")
    unit = {"w": "weeks", "d": "days", "h": "hours", "m": "minutes"}[match.group(2)]
    return timedelta(**{unit: int(match.group(1))})


def signals_engine():  # noqa: ANN201
    """The signals database of the configured settings, migrated."""
    from mentor.db import make_engine
    from mentor.signals.schema import migrate

    settings = make_settings()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    engine = make_engine(settings.database)
    migrate(engine)
    return settings, engine


@signals_app.command("summary")
@handle_errors
def signals_summary(
    module: Annotated[str | None, typer.Option("--module", help="Only this module.")] = None,
    since: Annotated[str | None, typer.Option("--since", help="ISO date or age (7d).")] = None,
    bucket: Annotated[str, typer.Option("--bucket", help="day or week.")] = "day",
) -> None:
    """Print the analyst summary as readable tables (small groups hidden, as in the API)."""
    from mentor.errors import InvalidInput
    from mentor.signals.queries import Filters
    from mentor.signals.summary import summarize

    if bucket not in ("day", "week"):
        raise InvalidInput(f"bucket: day or week (got {bucket!r})")
    settings, engine = signals_engine()
    report = summarize(
        engine, Filters(module_id=module, since=parse_since(since)), bucket=bucket, min_cohort=settings.min_cohort
    )
    typer.echo(
        f"questions: {report['questions']}   learners: {report['learners']}   "
        f"grounded: {report['grounded_share']}   out of scope: {report['out_of_scope_share']}"
    )
    typer.echo(f"({report['note']}; suppressed: {report['suppressed_groups']})")
    tables = [
        ("questions per section", report["questions_per_section"], ["bucket", "section_id", "questions", "learners"]),
        ("content gaps (out of scope)", report["content_gaps"], ["questions", "learners", "example"]),
        ("most asked", report["most_asked"], ["questions", "learners", "example"]),
        ("feedback by section", report["feedback_by_section"], ["section_id", "up", "down", "learners"]),
        ("feedback by prompt version", report["feedback_by_prompt_version"], ["prompt_version", "up", "down"]),
        ("tool usage", report["tool_usage"], ["name", "calls", "learners"]),
        ("engine mix", report["engine_mix"], ["engine", "questions", "share"]),
    ]
    for title, rows, columns in tables:
        typer.echo(f"\n{title}")
        if not rows:
            typer.echo("  (nothing to show)")
        for row in rows:
            typer.echo("  " + "  ".join(f"{row[c]}" for c in columns))


@signals_app.command("export")
@handle_errors
def signals_export(
    fmt: Annotated[str, typer.Option("--format", help="csv, jsonl or xapi.")] = "jsonl",
    out: Annotated[Path, typer.Option("--out", help="File to write.")] = Path("signals.jsonl"),
    module: Annotated[str | None, typer.Option("--module", help="Only this module.")] = None,
    since: Annotated[str | None, typer.Option("--since", help="ISO date or age (7d).")] = None,
) -> None:
    """Export the logged questions as CSV, JSON lines or xAPI 1.0.3 statements."""
    from mentor.errors import InvalidInput
    from mentor.signals.exports import FORMATS, export_lines
    from mentor.signals.queries import Filters, iter_questions

    if fmt not in FORMATS:
        raise InvalidInput(f"format: one of {', '.join(FORMATS)} (got {fmt!r})")
    settings, engine = signals_engine()
    rows = iter_questions(engine, Filters(module_id=module, since=parse_since(since)))
    written = 0
    with open(out, "w", encoding="utf-8", newline="") as handle:
        for piece in export_lines(rows, fmt, home_page=settings.public_url):
            handle.write(piece)
            written += 1
    typer.echo(f"wrote {written - (fmt == 'csv')} records to {out}")


@signals_app.command("purge")
@handle_errors
def signals_purge(
    older_than: Annotated[str, typer.Option("--older-than", help="Age like 180d, 12h or 2w.")] = "180d",
) -> None:
    """Delete questions (with their passages, tool calls and feedback) older than the given age."""
    from datetime import UTC, datetime

    from mentor.signals.queries import purge_older_than

    age = parse_age(older_than)
    _, engine = signals_engine()
    removed = purge_older_than(engine, age, now=datetime.now(UTC))
    typer.echo(f"purged {removed} questions older than {older_than}")


eval_app = typer.Typer(
    help="Run the golden set and gate on its metrics (see eval/README.md); subcommands export and replay.",
    invoke_without_command=True,
)
app.add_typer(eval_app, name="eval")
GOLDEN = Path("eval/golden.jsonl")
SetOpt = Annotated[Path, typer.Option("--set", help="Golden set (JSON lines).")]
SplitOpt = Annotated[str, typer.Option("--split", help="dev, heldout or all.")]


def run_golden(golden: Path, split: str, url: str | None, token: str | None):  # noqa: ANN201
    """Ask every case in-process (scratch data directory) or against a running server; return results."""
    import asyncio
    import tempfile

    import httpx

    from mentor.evaluate import load_golden, run_cases, run_in_process

    cases = load_golden(golden, split)
    if url:

        async def remote():  # noqa: ANN202
            async with httpx.AsyncClient(base_url=url.rstrip("/"), timeout=120) as client:
                return await run_cases(cases, client=client, analyst_token=token)

        return asyncio.run(remote())
    # A scratch data directory: the suite's questions must not become learning signals of real learners.
    scratch = Path(tempfile.mkdtemp(prefix="mentor-eval-"))
    settings = make_settings(data_dir=scratch, rate_limit_per_minute=10_000)
    return asyncio.run(run_in_process(cases, settings, analyst_token=token))


@eval_app.callback()
@handle_errors
def evaluate(
    ctx: typer.Context,
    golden: SetOpt = GOLDEN,
    split: SplitOpt = "dev",
    url: Annotated[str | None, typer.Option("--url", help="Evaluate a running server instead.")] = None,
    token: Annotated[str | None, typer.Option("--token", help="Analyst token of that server (PII check).")] = None,
    check: Annotated[bool, typer.Option("--check", help="Exit 1 when a metric is below eval/thresholds.toml.")] = False,
    thresholds: Annotated[Path, typer.Option("--thresholds", help="Bounds for --check.")] = Path(
        "eval/thresholds.toml"
    ),
    report: Annotated[Path | None, typer.Option("--report", help="Write report.json and report.md here.")] = None,
) -> None:
    """Run the golden set in-process on the configured engine (or against --url) and print the metrics."""
    if ctx.invoked_subcommand is not None:
        return
    from mentor.evaluate import check_thresholds, compute_metrics, write_report

    results = run_golden(golden, split, url, token)
    metrics = compute_metrics(results)
    for name, metric in metrics["overall"].items():
        value = metric["value"]
        typer.echo(f"{name:28s} {'—' if value is None else f'{value:.3f}':>8s}   n={metric['n']}")
    if report is not None:
        write_report(results, metrics, report)
        typer.echo(f"report written to {report / 'report.md'}")
    if check:
        failures = check_thresholds(metrics, thresholds)
        for failure in failures:
            typer.echo(f"FAIL {failure}", err=True)
        if failures:
            raise typer.Exit(1)
        typer.echo(f"all metrics within {thresholds}")


@eval_app.command("export")
@handle_errors
def eval_export(
    fmt: Annotated[str, typer.Option("--format", help="ragas or deepeval.")] = "ragas",
    out: Annotated[Path, typer.Option("--out", help="JSON lines file to write.")] = Path("eval-records.jsonl"),
    golden: SetOpt = GOLDEN,
    split: SplitOpt = "dev",
) -> None:
    """Run the golden set and write its records with the field names RAGAS or DeepEval expect."""
    from mentor.errors import InvalidInput
    from mentor.evaluate import export_records

    if fmt not in ("ragas", "deepeval"):
        raise InvalidInput(f"format: ragas or deepeval (got {fmt!r})")
    records = export_records(run_golden(golden, split, None, None), fmt)
    with open(out, "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    typer.echo(f"wrote {len(records)} {fmt} records to {out}")


@eval_app.command("replay")
@handle_errors
def eval_replay(
    since: Annotated[str | None, typer.Option("--since", help="ISO date or age (7d).")] = None,
    module: Annotated[str | None, typer.Option("--module", help="Only this module.")] = None,
    limit: Annotated[int, typer.Option("--limit", help="At most this many logged questions.")] = 500,
    as_json: Annotated[bool, typer.Option("--json", help="Print every change as JSON.")] = False,
) -> None:
    """Re-ask logged questions against the current index, prompts and engine; report what changed."""
    import asyncio

    from mentor.evaluate.replay import replay
    from mentor.runtime import build_runtime
    from mentor.signals.queries import Filters

    settings = make_settings(rate_limit_per_minute=10_000)
    runtime = build_runtime(settings)
    filters = Filters(module_id=module, since=parse_since(since))
    report = asyncio.run(replay(runtime, filters, limit=limit))
    if as_json:
        typer.echo(json.dumps(report, indent=2, ensure_ascii=False))
        return
    totals = report["totals"]
    typer.echo(
        f"replayed {totals['questions']} questions: {totals['changed']} changed "
        f"(citations {totals['citations']}, numbers {totals['numbers']}, scope {totals['scope']}, "
        f"grounding {totals['grounding']})"
    )
    for change in report["changes"][:50]:
        typer.echo(f"- {change['question']!r}: " + "; ".join(change["what"]))


@app.command()
@handle_errors
def bench(
    quick: Annotated[bool, typer.Option("--quick", help="Reduced run (under five minutes).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of the table.")] = False,
    out: Annotated[Path, typer.Option("--out", help="Where results.json and results.md are kept.")] = Path(
        "eval/bench"
    ),
) -> None:
    """Measure mentor beside a LangChain baseline against a stub LLM: throughput, overhead, TTFT, ingest, RSS."""
    from mentor.bench import render_markdown, run_bench

    make_settings()  # logging, so progress shows on stderr
    results = run_bench(quick=quick, out_dir=out)
    typer.echo(json.dumps(results, indent=2) if as_json else render_markdown(results))


if __name__ == "__main__":  # pragma: no cover
    app()
