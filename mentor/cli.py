"""The `mentor` command line: the same code the service runs, in-process.

Start-up stays light: this module imports only typer and mentor's error tree, and each command imports what it
needs when it runs, so `mentor --help`, `calc`, `signals`, `token` and `eval export --from-report` never load torch
(tests/test_cli_imports.py checks it). Options are checked while the command line is parsed, before anything
heavy loads. Progress bars go to stderr, and only when it is a terminal: stdout carries results (`--json`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from pydantic import ValidationError

from mentor.errors import MentorError
from mentor.lti.cli import lti_app

if TYPE_CHECKING:
    from rich.progress import Progress

    from mentor.settings import Settings

# Plain help (rich_markup_mode=None): flags without a `<bool>` type column, no box drawing, and rich is not imported
# for --help. Each sub-app says it too: the setting is per Typer instance. Lines up to 120 columns where the terminal
# has them (click's default stops at 80 and cuts the command summaries short).
PLAIN_HELP: dict[str, Any] = {"rich_markup_mode": None, "add_completion": False, "pretty_exceptions_enable": False}
app = typer.Typer(
    help="mentor: answers learners' questions grounded in the study module they are reading.\n\n"
    "Every setting is read from MENTOR_* environment variables (see README); options override them.",
    no_args_is_help=True,
    context_settings={"max_content_width": 120},
    **PLAIN_HELP,
)
F = TypeVar("F", bound=Callable[..., Any])
log = logging.getLogger(__name__)
IMPORTED = time.monotonic()  # where `seconds_since_start` counts from when the kernel does not say

# Choices written out here, so that parsing them imports nothing; tests/test_cli_imports.py checks each against its
# owner (mentor.answer.STYLES, mentor.evaluate.golden.SPLITS, mentor.evaluate.export.EXPORT_FORMATS,
# mentor.signals.exports.FORMATS).
STYLES = ("explain", "hint", "brief")
SPLITS = ("dev", "heldout", "fresh", "all")
EVAL_FORMATS = ("ragas", "ragas-multiturn", "deepeval")
SIGNAL_FORMATS = ("csv", "jsonl", "xapi")
BUCKETS = ("day", "week")


def choice(*values: str) -> Callable[[str], str]:
    """A parser that takes one of `values`; anything else is a usage error (exit 2) before the command runs."""

    def parse(value: str) -> str:
        if value not in values:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(values)}")
        return value

    return parse


def show_version(value: bool) -> None:
    if value:
        from mentor import __version__

        typer.echo(f"mentor {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=show_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    # The group's own options; its help is the app's.
    pass


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


# What in-process runs (the golden set, replays, sweeps) set: every question comes from this one process, so neither the
# per-learner limit nor the per-address ones may refuse any.
UNLIMITED = {
    "rate_limit_per_minute": 10_000,
    "rate_limit_per_client_per_minute": 10_000,
    "rate_limit_search_per_minute": 10_000,
    "rate_limit_tools_per_minute": 10_000,
}


def make_settings(**overrides: Any) -> Settings:
    """Settings from the environment, with command-line overrides that were given."""
    from mentor.logs import configure_logging
    from mentor.settings import Settings

    settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
    configure_logging(settings)
    for noisy in ("bm25s", "alembic"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return settings


def check_module(settings: Settings, module_id: str | None) -> None:
    """Refuse a module the corpus directory does not hold, from its files' front matter: a fraction of a second,
    where the runtime's own check comes after the model and the index have loaded.

    Only where this process indexes the corpus directory: a replica of a shared index serves what `mentor ingest`
    published, which the runtime checks.
    """
    if module_id is None or not settings.sync_index:
        return
    from mentor.front_matter import module_ids, unknown_module

    known = module_ids(settings.corpus_dir)
    if known and module_id not in known:  # no module at all: loading the corpus says why, with the file
        raise unknown_module(module_id, known)


def seconds_since_start() -> float:
    """Wall-clock seconds since this process started, as a shell's `time` counts them (Python's own start-up and
    every import included): the kernel's start time of the process on Linux, else since this module was imported."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            # Field 22 is the start time in clock ticks after boot; the command name (field 2) may hold spaces.
            ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
        return time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return time.monotonic() - IMPORTED


@contextlib.contextmanager
def progress_bar(settings: Settings) -> Iterator[Progress]:
    """A rich progress display on stderr (stdout is for results), drawn only when stderr is a terminal and the log
    format is plain: with MENTOR_LOG_FORMAT=json every line on stderr is a JSON object."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    columns += (TimeElapsedColumn(),)
    drawn = console.is_terminal and settings.log_format == "plain"
    with Progress(*columns, console=console, disable=not drawn) as progress:
        # While the bar is live, rich puts a stand-in on sys.stderr that prints above the bar; log handlers opened on
        # the real stderr are pointed at it, or their lines would be drawn through the bar.
        real = getattr(sys.stderr, "rich_proxied_file", None)
        handlers = [
            handler
            for handler in logging.getLogger().handlers
            if real is not None and isinstance(handler, logging.StreamHandler) and handler.stream is real
        ]
        for handler in handlers:
            handler.setStream(sys.stderr)
        try:
            yield progress
        finally:
            for handler in handlers:
                handler.setStream(real)


@contextlib.contextmanager
def embedding_progress(settings: Settings) -> Iterator[dict[str, Callable[[int], None]]]:
    """`on_plan` and `progress` callbacks for an index sync: a bar of chunks to embed, shown only when there are any."""
    with progress_bar(settings) as bar:
        task = bar.add_task("embedding chunks", total=None, visible=False)
        yield {
            "on_plan": lambda n: bar.update(task, total=n, visible=n > 0),
            "progress": lambda n: bar.advance(task, n),
        }


ModuleOpt = Annotated[str | None, typer.Option("--module", metavar="ID", help="Module id (optional with one module).")]
CorpusOpt = Annotated[Path | None, typer.Option("--corpus", metavar="DIR", help="Directory of module Markdown files.")]


@app.command()
@handle_errors
def ingest(corpus: CorpusOpt = None) -> None:
    """Chunk every module, embed what changed, bring the Chroma index in line with the corpus and publish it.

    The one-off job of a deployment with replicas: they serve the published modules within MENTOR_RELOAD_INTERVAL_S.
    """
    from mentor.runtime import ingest_corpus

    settings = make_settings(corpus_dir=corpus)
    with embedding_progress(settings) as hooks:
        catalog, report = ingest_corpus(settings, **hooks)
    typer.echo(f"{catalog.describe()}: {report}")


@app.command()
@handle_errors
def search(
    query: Annotated[str, typer.Argument(metavar="QUERY", help="The question or keywords to search for.")],
    module: ModuleOpt = None,
    k: Annotated[
        int | None, typer.Option("--k", metavar="N", help="Passages to return (1-50); default MENTOR_TOP_K.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list of passages.")] = False,
    corpus: CorpusOpt = None,
) -> None:
    """Hybrid (dense + BM25) search of one module's passages."""
    settings = make_settings(corpus_dir=corpus)
    check_module(settings, module)  # before anything heavy is imported
    from mentor.retrieve import validate_query
    from mentor.runtime import build_runtime

    validate_query(query)  # fail fast, before the model loads
    runtime = build_runtime(settings)
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
    labelled: Annotated[
        Path, typer.Option("--set", metavar="FILE", help="JSON lines of {module_id, q, in_scope}.")
    ] = Path("eval/calibration/scope.jsonl"),
    module: Annotated[
        str | None, typer.Option("--module", metavar="ID", help="Module the questions are about.")
    ] = None,
    heldout: Annotated[
        Path, typer.Option("--heldout", metavar="DIR", help="Held-out sets of the reader's decisions.")
    ] = Path("eval/understanding/heldout"),
) -> None:
    """Fit the scope weights and threshold on labelled questions and print the settings to use; then report how
    each decision the reader makes from examples does (cross-validated, and on its held-out set), and keep the
    lacking decision's weights for modules without labelled questions."""
    from mentor.calibrate import calibrate_scope
    from mentor.runtime import build_runtime
    from mentor.scope import load_labelled
    from mentor.understanding.lacking import FROZEN
    from mentor.understanding.measure import measure

    settings = make_settings()
    runtime = build_runtime(settings)
    module_id = runtime.module(module).id
    questions = [row for row in load_labelled(labelled, module_id) if row.module_id == module_id]
    in_use = (settings.scope_weight, settings.scope_example_weight)
    result = calibrate_scope(runtime.retriever, module_id, questions, keep=in_use)
    typer.echo(
        f"{result.in_scope} in-scope and {result.out_of_scope} out-of-scope questions: balanced accuracy "
        f"{result.balanced_accuracy:.3f}, gap {result.margin:.3f}\n"
        f"MENTOR_SCOPE_WEIGHT={result.weight}\nMENTOR_SCOPE_EXAMPLE_WEIGHT={result.example_weight}\n"
        f"MENTOR_SCOPE_THRESHOLD={result.threshold}"
    )
    for question in result.misclassified:
        typer.echo(f"  misclassified: {question}")
    typer.echo("\nthe reader's decisions (balanced accuracy):")
    words = runtime.retriever.modules[module_id].words
    for row in measure(runtime.chat.catalog.reader, words, heldout):
        cv = "—" if row.cross_validated is None else f"{row.cross_validated:.3f}"
        held = "—" if row.heldout_score is None else f"{row.heldout_score:.3f}"
        line = f"  {row.decision:<13} examples {row.examples:>5}  5-fold {cv:>6}  held-out {held:>6} (n={row.heldout})"
        typer.echo(f"{line} {row.note}")
    # The lacking decision's weights serve a module without labelled questions (lacking.py): kept as last fitted.
    frozen = runtime.chat.catalog.reader.decisions.lacking.frozen()
    FROZEN.write_text(json.dumps(frozen, indent=2) + "\n", encoding="utf-8")
    typer.echo(f"\nthe lacking decision's weights, for modules without labelled questions: {FROZEN}")


@app.command()
@handle_errors
def ask(
    question: Annotated[str, typer.Argument(metavar="QUESTION", help="The learner's question.")],
    module: ModuleOpt = None,
    conversation: Annotated[
        str | None,
        typer.Option("--conversation", metavar="ID", help="Continue the conversation an earlier `ask` printed."),
    ] = None,
    style: Annotated[
        str, typer.Option("--style", parser=choice(*STYLES), metavar="|".join(STYLES), help="How to answer.")
    ] = "explain",
    as_json: Annotated[bool, typer.Option("--json", help="Print the full response object.")] = False,
) -> None:
    """Ask the mentor in-process, exactly as POST /v1/chat would answer, and say how long each stage took.

    The conversation is kept in the data directory (MENTOR_DATA_DIR/conversations) until unused for
    MENTOR_CONVERSATION_TTL_S (6 h): the id printed last continues it with --conversation, from any shell.
    """
    import asyncio

    settings = make_settings()
    check_module(settings, module)  # an unknown module fails here, before anything heavy is imported
    from mentor.answer import ChatInput
    from mentor.api.schemas import ChatResponse
    from mentor.embeddings import make_embedder
    from mentor.intake import validate
    from mentor.runtime import LearnerState, build_runtime

    request = ChatInput(
        message=question, module_id=module, conversation_id=conversation, style=style, client="cli", channel="cli"
    )
    validate(request)  # an empty or oversize question fails here, before the model and the index load
    stages = {"imports": seconds_since_start()}  # Python's start-up, mentor's and its libraries' imports
    with progress_bar(settings) as bar:
        task = bar.add_task("loading the embedding model", total=None)
        started = time.perf_counter()
        embedder = make_embedder(settings)
        embedder.embed_query("warm up")  # loads the model: a first run exports it to ONNX (logged)
        stages["model"] = time.perf_counter() - started
        bar.update(task, description="opening the index and the reader")
        started = time.perf_counter()
        # Conversations as files in the data directory (or in Redis), so that the next `ask` can continue this one.
        runtime = build_runtime(settings, embedder=embedder, state=LearnerState.between_commands(settings))
        stages["index"] = time.perf_counter() - started
        bar.update(task, description="warming up")
        started = time.perf_counter()
        runtime.chat.warm()  # every stage run once, as the server does before it listens
        stages["warm-up"] = time.perf_counter() - started
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
    spent = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in stages.items())
    typer.echo(
        f"-- {response['engine']}, {verdict}, answered in {response['latency_ms']:.0f} ms; "
        f"{seconds_since_start():.1f} s since the command started ({spent})"
    )
    conversation_id = response["conversation_id"]
    typer.echo(f'-- conversation {conversation_id}: follow up with  mentor ask --conversation {conversation_id} "..."')


@app.command()
@handle_errors
def calc(
    name: Annotated[str | None, typer.Argument(metavar="NAME", help="Calculator name (see --list).")] = None,
    args: Annotated[
        str, typer.Option("--args", metavar="JSON", help='Arguments as a JSON object, e.g. \'{"params": "7B"}\'.')
    ] = "{}",
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
    host: Annotated[
        str | None, typer.Option(metavar="ADDRESS", help="Address to bind (default MENTOR_HOST or 127.0.0.1).")
    ] = None,
    port: Annotated[int | None, typer.Option(metavar="PORT", help="Port (default MENTOR_PORT or 8000).")] = None,
    workers: Annotated[
        int,
        typer.Option(
            min=1, max=64, metavar="N", help="Worker processes on this port; more than 1 needs MENTOR_REDIS_URL."
        ),
    ] = 1,
) -> None:
    """Run the HTTP service (uvicorn). An embedded index is brought up to date with the corpus on start; a shared
    one is served as `mentor ingest` published it."""
    from mentor import __version__

    settings = make_settings(host=host, port=port)
    # Each step of a start says what it does before it starts (a first start takes ~15-60 s: the libraries, the
    # model's export to ONNX, the index, the reader's labelled examples), and the address once the port is open.
    log.info("mentor %s starting: loading its libraries…", __version__)
    import uvicorn

    from mentor.api import create_app
    from mentor.api.app import run_server, tune_serving_process
    from mentor.logs import uvicorn_log_config
    from mentor.metrics import metrics_for_workers
    from mentor.runtime import build_runtime, prepare_for_workers

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
        with metrics_for_workers():  # a Prometheus directory the workers share, removed when they stop
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
    log.info("loading the embedding model and the index…")
    with embedding_progress(settings) as hooks:  # a first start embeds the whole corpus
        runtime = build_runtime(settings, **hooks)
    app = create_app(settings, runtime=runtime)
    tune_serving_process()
    try:
        run_server(app, log_config=uvicorn_log_config(app), **server)  # access log: route templates, no queries
    finally:
        runtime.writer.stop()  # an app leaves a runtime it was given running: flush the signals still queued


@app.command()
@handle_errors
def token(
    learner_id: Annotated[
        str, typer.Argument(metavar="LEARNER_ID", help="The platform's learner id: the token's sub.")
    ],
    ttl: Annotated[
        str,
        typer.Option(
            "--ttl", metavar="AGE", help="Lifetime: 30m, 1h or 1d; at most MENTOR_LEARNER_TOKEN_MAX_AGE_S (a day)."
        ),
    ] = "1h",
) -> None:
    """Print a learner token signed with MENTOR_LEARNER_TOKEN_SECRET, for tests and demos.

    In production the learning platform's server mints the same token (HS256; sub, aud, iat, exp) for each learner.
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
            max_age_s=settings.learner_token_max_age_s,
        )
    )


db_app = typer.Typer(help="The signals database: schema migrations (Alembic).", no_args_is_help=True, **PLAIN_HELP)
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


@app.command("demo-data")
@handle_errors
def demo_data(
    learners: Annotated[
        int, typer.Option("--learners", min=2, max=200, help="Synthetic learners (at least MENTOR_MIN_COHORT + 2).")
    ] = 12,
    days: Annotated[int, typer.Option("--days", min=1, max=92, help="Days back the questions are spread over.")] = 14,
    golden: Annotated[
        Path, typer.Option("--golden", metavar="FILE", help="Golden set the questions are taken from.")
    ] = Path("eval/golden.jsonl"),
    force: Annotated[
        bool, typer.Option("--force", help="Write even into a database holding other signals (demo rows are marked).")
    ] = False,
) -> None:
    """Fill a scratch signals database with synthetic learners (demo-learner-01 ...) so every dashboard panel shows.

    Their questions come from the golden set, are answered by the extractive engine and logged through the signal
    writer, marked channel "demo". A database holding other signals is refused unless --force; an earlier run's demo
    rows are replaced.
    """
    from mentor.demo_data import fill_demo_data, refuse_unless_scratch
    from mentor.evaluate.golden import load_golden
    from mentor.runtime import build_runtime

    settings, engine = signals_engine()
    refuse_unless_scratch(engine, force=force)  # before the model loads
    cases = load_golden(golden, "all")
    with progress_bar(settings) as bar:
        bar.add_task("loading the embedding model and the index", total=None)
        runtime = build_runtime(settings)
    runtime.writer.start()
    try:
        with progress_bar(settings) as bar:
            task = bar.add_task("asking as the demo learners", total=None)
            advance = functools.partial(bar.advance, task)
            report = fill_demo_data(
                runtime, cases, runtime.writer, learners=learners, days=days, force=force, progress=advance
            )
        written = runtime.writer.flush(60)
    finally:
        runtime.writer.stop()
    if not written:
        typer.echo("error: the signals database did not take every demo record (they wait in the spool)", err=True)
        raise typer.Exit(1)
    where = settings.database if settings.database.startswith("sqlite") else "the signals database"
    replaced = f" (replacing {report.replaced} earlier demo questions)" if report.replaced else ""
    token = "MENTOR_ANALYST_TOKEN" if settings.analyst_token else settings.data_dir / "analyst.token"
    typer.echo(
        f"wrote {report.questions} questions and {report.ratings} ratings of {report.learners} demo learners to "
        f"{where}{replaced}; run `mentor serve`, open /dashboard and sign in with the analyst token ({token})"
    )


signals_app = typer.Typer(
    help="The learning-signal log: summary, export and retention.", no_args_is_help=True, **PLAIN_HELP
)
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


OnlyModuleOpt = Annotated[str | None, typer.Option("--module", metavar="ID", help="Only this module.")]
SinceOpt = Annotated[str | None, typer.Option("--since", metavar="WHEN", help="ISO date or age (7d).")]


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
    module: OnlyModuleOpt = None,
    since: SinceOpt = None,
    bucket: Annotated[
        str, typer.Option("--bucket", parser=choice(*BUCKETS), metavar="|".join(BUCKETS), help="Time bucket.")
    ] = "day",
) -> None:
    """Print the analyst summary as readable tables (small groups hidden, as in the API)."""
    from mentor.signals.queries import Filters
    from mentor.signals.summary import summarize

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
    fmt: Annotated[
        str,
        typer.Option(
            "--format", parser=choice(*SIGNAL_FORMATS), metavar="|".join(SIGNAL_FORMATS), help="Record format."
        ),
    ] = "jsonl",
    out: Annotated[Path, typer.Option("--out", metavar="FILE", help="File to write.")] = Path("signals.jsonl"),
    module: OnlyModuleOpt = None,
    since: SinceOpt = None,
) -> None:
    """Export the logged questions as CSV, JSON lines or xAPI 1.0.3 statements."""
    from mentor.signals.exports import export_lines
    from mentor.signals.queries import Filters, iter_questions

    settings, engine = signals_engine()
    rows = iter_questions(engine, Filters(module_id=module, since=parse_since(since)))
    written = -1 if fmt == "csv" else 0  # a CSV's first piece is its header
    with open(out, "w", encoding="utf-8", newline="") as handle, progress_bar(settings) as bar:
        task = bar.add_task(f"writing {out}", total=None)
        for piece in export_lines(rows, fmt, home_page=settings.public_url):
            handle.write(piece)
            written += 1
            bar.update(task, completed=written)
    typer.echo(f"wrote {max(written, 0)} records to {out}")


@signals_app.command("purge")
@handle_errors
def signals_purge(
    older_than: Annotated[str, typer.Option("--older-than", metavar="AGE", help="Age like 180d, 12h or 2w.")] = "180d",
) -> None:
    """Delete questions (with their passages, tool calls and feedback) older than the given age."""
    from datetime import UTC, datetime

    from mentor.signals.queries import purge_older_than

    age = parse_age(older_than)
    _, engine = signals_engine()
    removed = purge_older_than(engine, age, now=datetime.now(UTC))
    typer.echo(f"purged {removed} questions older than {older_than}")


eval_app = typer.Typer(
    help="Run the golden set and gate on its metrics (see eval/README.md); subcommands export, replay and sweep.",
    invoke_without_command=True,
    **PLAIN_HELP,
)
app.add_typer(eval_app, name="eval")
GOLDEN = Path("eval/golden.jsonl")
SetOpt = Annotated[Path, typer.Option("--set", metavar="FILE", help="Golden set (JSON lines).")]
SplitOpt = Annotated[
    str, typer.Option("--split", parser=choice(*SPLITS), metavar="|".join(SPLITS), help="Cases to run.")
]


def run_golden(golden: Path, split: str, url: str | None, token: str | None):  # noqa: ANN201
    """Ask every case in-process (in a scratch data directory, removed after) or against a running server."""
    import asyncio
    import tempfile

    import httpx

    from mentor.evaluate import load_golden, run_cases, run_in_process

    cases = load_golden(golden, split)
    # httpx logs every request at INFO: two or three lines per case, which the progress bar replaces.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    if url:
        settings = make_settings()  # logging, and whether a bar may be drawn

        async def remote(advance: Callable[[Any], None]):  # noqa: ANN202
            async with httpx.AsyncClient(base_url=url.rstrip("/"), timeout=120) as client:
                return await run_cases(cases, client=client, analyst_token=token, on_result=advance)

        with progress_bar(settings) as bar:
            task = bar.add_task(f"golden set ({split}) at {url}", total=len(cases))
            return asyncio.run(remote(lambda _result: bar.advance(task)))
    # A scratch data directory: the suite's questions must not become learning signals of real learners.
    with tempfile.TemporaryDirectory(prefix="mentor-eval-", ignore_cleanup_errors=True) as scratch:
        settings = make_settings(data_dir=Path(scratch), **UNLIMITED)
        with progress_bar(settings) as bar:
            task = bar.add_task(f"golden set ({split})", total=len(cases))
            return asyncio.run(
                run_in_process(cases, settings, analyst_token=token, on_result=lambda _result: bar.advance(task))
            )


@eval_app.callback()
@handle_errors
def evaluate(
    ctx: typer.Context,
    golden: SetOpt = GOLDEN,
    split: SplitOpt = "dev",
    url: Annotated[str | None, typer.Option("--url", metavar="URL", help="Evaluate a running server instead.")] = None,
    token: Annotated[
        str | None, typer.Option("--token", metavar="TOKEN", help="Analyst token of that server (PII check).")
    ] = None,
    check: Annotated[bool, typer.Option("--check", help="Exit 1 when a metric is below eval/thresholds.toml.")] = False,
    thresholds: Annotated[Path, typer.Option("--thresholds", metavar="FILE", help="Bounds for --check.")] = Path(
        "eval/thresholds.toml"
    ),
    report: Annotated[
        Path | None, typer.Option("--report", metavar="DIR", help="Write report.json and report.md here.")
    ] = None,
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
    fmt: Annotated[
        str,
        typer.Option("--format", parser=choice(*EVAL_FORMATS), metavar="|".join(EVAL_FORMATS), help="Record shape."),
    ] = "ragas",
    out: Annotated[Path, typer.Option("--out", metavar="FILE", help="JSON lines file to write.")] = Path(
        "eval-records.jsonl"
    ),
    golden: SetOpt = GOLDEN,
    split: SplitOpt = "dev",
    from_report: Annotated[
        Path | None,
        typer.Option(
            "--from-report",
            metavar="DIR",
            help="Export the results a `mentor eval --report DIR` run kept, instead of running the set again "
            "(its cases, whatever --split says).",
        ),
    ] = None,
) -> None:
    """Write a run's records with the field names RAGAS or DeepEval expect: the results of a report, or a new run."""
    from mentor.evaluate import export_records

    if from_report is not None:
        from mentor.evaluate.report import read_results

        results = read_results(from_report, golden)
    else:
        results = run_golden(golden, split, None, None)
    records = export_records(results, fmt)
    with open(out, "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    typer.echo(f"wrote {len(records)} {fmt} records to {out}")


@eval_app.command("replay")
@handle_errors
def eval_replay(
    since: SinceOpt = None,
    module: OnlyModuleOpt = None,
    limit: Annotated[int, typer.Option("--limit", metavar="N", help="At most this many logged questions.")] = 500,
    as_json: Annotated[bool, typer.Option("--json", help="Print every change as JSON.")] = False,
) -> None:
    """Re-ask logged questions against the current index, prompts and engine; report what changed."""
    import asyncio

    from mentor.evaluate.replay import replay
    from mentor.runtime import build_runtime
    from mentor.signals.queries import Filters

    settings = make_settings(**UNLIMITED)
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


SWEEP_SEED = 0  # mentor.evaluate.sweeps.DEFAULT_SEED, written out so that parsing imports nothing


@eval_app.command("sweep")
@handle_errors
def eval_sweep(
    golden: SetOpt = GOLDEN,
    split: Annotated[
        str,
        typer.Option("--split", parser=choice("dev"), metavar="dev", help="Cases to rewrite: the dev split only."),
    ] = "dev",
    seed: Annotated[int, typer.Option("--seed", metavar="N", help="Seed of the rewrites.")] = SWEEP_SEED,
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole report (every variant) as JSON.")] = False,
    out: Annotated[
        Path | None, typer.Option("--out", metavar="FILE", help="Also write the whole report as JSON here.")
    ] = None,
    module: ModuleOpt = None,
) -> None:
    """Rewrite the dev questions by code (typos, shorthand, order words, chatter, topic switches); measure answers."""
    import asyncio
    import tempfile

    from mentor.evaluate import corpus_settings, load_golden
    from mentor.evaluate.sweeps import format_table, run_sweeps
    from mentor.runtime import build_runtime

    cases = load_golden(golden, split)
    # A scratch data directory, as `mentor eval` runs in-process: the sweeps' questions are no learning signals.
    with tempfile.TemporaryDirectory(prefix="mentor-sweep-", ignore_cleanup_errors=True) as scratch:
        settings = make_settings(data_dir=Path(scratch), **UNLIMITED)
        settings = corpus_settings(settings, "default")
        with progress_bar(settings) as bar:
            task = bar.add_task("loading the embedding model and the index", total=None)
            runtime = build_runtime(settings)
            bar.update(task, description=f"sweeps of the {split} split (questions asked)")
            module_id = runtime.module(module).id
            report = asyncio.run(
                run_sweeps(runtime.chat, cases, module_id=module_id, seed=seed, on_answer=lambda: bar.advance(task))
            )
    document = json.dumps(report.to_dict(), indent=2, ensure_ascii=False)
    if out is not None:
        out.write_text(document + "\n", encoding="utf-8")
    typer.echo(document if as_json else format_table(report))
    if out is not None:
        typer.echo(f"report written to {out}", err=True)


@app.command()
@handle_errors
def bench(
    quick: Annotated[bool, typer.Option("--quick", help="Reduced run (under five minutes).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of the table.")] = False,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            metavar="DIR",
            help="Where results.json and results.md are written (default MENTOR_DATA_DIR/bench, outside the "
            "repository's tracked files).",
        ),
    ] = None,
    no_baseline: Annotated[
        bool,
        typer.Option(
            "--no-baseline", help="Leave out the LangChain baseline (its packages are the dev extra) and its ratios."
        ),
    ] = False,
) -> None:
    """Measure mentor beside a LangChain baseline against a stub LLM: throughput, overhead, TTFT, ingest, RSS."""
    from mentor.bench import render_markdown, run_bench

    settings = make_settings()  # logging: the steps are logged on stderr too
    out_dir = out or settings.data_dir / "bench"
    with progress_bar(settings) as bar:
        task = bar.add_task("bench", total=None)
        steps = [0]

        def on_step(what: str) -> None:
            bar.update(task, completed=steps[0], description=what)
            steps[0] += 1

        results = run_bench(
            quick=quick,
            out_dir=out_dir,
            include_baseline=not no_baseline,
            on_plan=lambda n: bar.update(task, total=n),
            on_step=on_step,
        )
        bar.update(task, completed=steps[0], description="done")
    typer.echo(json.dumps(results, indent=2) if as_json else render_markdown(results))
    typer.echo(f"results written to {out_dir}", err=True)


# `mentor lti ...` (mentor/lti/cli.py), given this CLI's error handling, settings and age parser.
app.add_typer(lti_app(handle_errors=handle_errors, make_settings=make_settings, parse_age=parse_age), name="lti")


if __name__ == "__main__":  # pragma: no cover
    app()
