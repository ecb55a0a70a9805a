"""The analyst dashboard in a real browser: Debian's chromium driven by Playwright, against a real `mentor serve`.

One server for the file, seeded over HTTP by seven learners (the default cohort of five is met): questions in
scope, out of scope and with a calculator, and feedback. The language model is pointed at a closed local port,
so every in-scope answer falls back to the extractive engine with reason "connection" and the fallback panel has
something to show. Every request to anything but 127.0.0.1 is aborted, so nothing reaches the internet.
"""

from __future__ import annotations

import csv
import io
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from mentor.bench.cluster import MENTOR
from mentor.bench.procs import clean_env, free_port, spawn, stop, wait_ready
from mentor.signals.exports import CSV_COLUMNS

from .browser import LocalOnly, launch_chromium

pytestmark = pytest.mark.slow

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

ROOT = Path(__file__).resolve().parent.parent
MODULE = "P10.llm-systems-frontier.02"
TOKEN = "dashboard-browser-token-of-at-least-32-bytes"
LEARNERS = [f"dash-learner-{i}" for i in range(6)]
LEAVER = "dash-leaver"
ZERO = ["What does ZeRO stage 2 shard?", "what does ZeRO stage 2 shard", "Which state does ZeRO stage 2 shard?"]
BREAD = ["how do I bake bread?", "how do I bake sourdough bread?", "how do I bake bread at home?"]
HOSTILE = "<img src=x onerror=\"window.__pwned='question'\"> <script>window.__pwned='script'</script> sourdough?"
MISSPELLED = "what does zero stgae 2 shrad?"  # read as "what does zero stage 2 shard?"


@dataclass
class Server:
    url: str
    asked: dict[str, list[str]] = field(default_factory=dict)  # learner -> question ids

    def get(self, path: str, **params: object) -> httpx.Response:
        response = httpx.get(f"{self.url}{path}", params=params, headers={"Authorization": f"Bearer {TOKEN}"})
        assert response.status_code == 200, response.text
        return response


def seed(server: Server) -> int:
    """Ask as the learners over HTTP and rate some answers; return how many questions were asked."""
    client = httpx.Client(base_url=server.url, timeout=30)

    def ask(learner: str, message: str) -> dict:
        response = client.post("/v1/chat", json={"message": message, "module_id": MODULE, "learner_id": learner})
        assert response.status_code == 200, response.text
        server.asked.setdefault(learner, []).append(response.json()["question_id"])
        return response.json()

    ask("dash-html", HOSTILE)  # the oldest: last on the second page of the question browser
    for i, learner in enumerate(LEARNERS):
        zero = ask(learner, ZERO[i % 3])
        ask(learner, "how much memory does Adam need for a 7B model?")
        ask(learner, "why is bf16 preferred over fp16 for training?")
        ask(learner, BREAD[i % 3])
        rating = {"rating": "up" if i < 4 else "down", "learner_id": learner, "comment": "clear" if i == 0 else None}
        feedback = client.post(f"/v1/questions/{zero['question_id']}/feedback", json=rating)
        assert feedback.status_code == 201, feedback.text
    ask(LEAVER, "what does ZeRO stage 3 shard?")
    ask(LEAVER, "how do I bake rye bread?")
    ask("dash-reader", MISSPELLED)  # the newest: first in the question browser
    client.close()
    return sum(len(ids) for ids in server.asked.values())


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    work = tmp_path_factory.mktemp("dashboard")
    port = free_port()
    env = clean_env(
        MENTOR_DATA_DIR=str(work / "data"),
        MENTOR_CORPUS_DIR=str(ROOT / "corpus"),
        MENTOR_HOST="127.0.0.1",
        MENTOR_PORT=str(port),
        MENTOR_RATE_LIMIT_PER_MINUTE="10000",
        MENTOR_ANALYST_TOKEN=TOKEN,
        MENTOR_LLM_BASE_URL=f"http://127.0.0.1:{free_port()}/v1",  # nobody listens: every answer falls back
        MENTOR_LLM_TIMEOUT_S="2",
    )
    log = work / "serve.log"
    process = spawn([MENTOR, "serve"], env=env, log_path=log)
    try:
        wait_ready(f"http://127.0.0.1:{port}/readyz", process, log)
        served = Server(f"http://127.0.0.1:{port}")
        asked = seed(served)
        deadline = time.monotonic() + 20
        while True:  # the signal writer stores in the background: wait for every question and rating
            summary = served.get("/v1/signals/summary").json()
            if summary["questions"] == asked and summary["feedback_by_section"]:
                break
            assert time.monotonic() < deadline, f"signals not stored within 20 s: {summary}"
            time.sleep(0.3)
        yield served
    finally:
        stop(process)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with playwright_api.sync_playwright() as playwright:
        chromium = launch_chromium(playwright)
        yield chromium
        chromium.close()


@dataclass
class Tab:
    page: object
    requests: list[str]


@pytest.fixture
def tab(browser, server) -> Iterator[Tab]:
    """A fresh browser profile whose requests may go to 127.0.0.1 only; every request URL is kept."""
    context = browser.new_context(viewport={"width": 1360, "height": 1000}, accept_downloads=True)
    local_only = LocalOnly()
    context.route("**/*", local_only)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield Tab(page, local_only.requests)
    pwned = page.evaluate("() => window.__pwned ?? null")
    context.close()
    assert not local_only.leaked, f"requests outside 127.0.0.1: {local_only.leaked}"
    assert not errors, f"errors in the page: {errors}"
    assert pwned is None, f"a logged question ran as code: {pwned}"


def sign_in(page, server: Server) -> None:
    """Keyboard only: the token field has focus after a Tab past the skip link, Enter submits."""
    page.goto(f"{server.url}/dashboard")
    expect(page.locator("#sign-in")).to_be_visible()
    expect(page.locator("#board")).to_be_hidden()
    page.locator("#token").focus()
    page.keyboard.type(TOKEN)
    page.keyboard.press("Enter")
    expect(page.locator("#board")).to_be_visible()
    expect(page.locator("#browser details.question")).to_have_count(20)


def re_text(fragment: str) -> re.Pattern:
    """A pattern matching any text that contains `fragment`."""
    return re.compile(f".*{re.escape(fragment)}.*")


def serious_violations(page) -> list[dict]:
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    return [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]][:3]}
        for v in results.response["violations"]
        if v["impact"] in ("serious", "critical")
    ]


def test_every_panel_shows_the_seeded_signals(tab, server, tmp_path) -> None:
    page = tab.page
    sign_in(page, server)
    asked = sum(len(ids) for ids in server.asked.values())
    expect(page.locator("#t-questions")).to_have_text(str(asked))
    expect(page.locator("#t-learners")).to_have_text(str(len(server.asked)))
    assert page.locator("#f-module").input_value() == MODULE  # the only module is chosen
    # Heatmap: the module's sections in reading order, the busy ones coloured, a table alternative.
    heat = page.locator("#heatmap svg")
    assert "Heatmap of" in heat.get_attribute("aria-label")
    labels = heat.locator("text.row-label").all_text_contents()
    assert labels[0] == "Training at scale" and labels[-1] == "Not covered by the module"
    assert heat.locator("g.cell.l5").count() >= 1
    page.locator("#panel-heatmap summary").click()
    table = page.locator("#heatmap-table table")
    expect(table).to_be_visible()
    summary = server.get("/v1/signals/summary", module_id=MODULE).json()
    shown = [[cell.strip() for cell in row.split("\t")] for row in table.locator("tbody tr").all_inner_texts()]
    assert shown == [
        [row["title"], *("hidden" if c is None else str(c) for c in [*row["counts"], row["questions"]])]
        for row in summary["heatmap"]["rows"]
    ]
    assert max(row["questions"] or 0 for row in summary["heatmap"]["rows"]) >= 6
    # Out of scope, grouped by meaning; most asked; feedback; calculators; grounding and fallbacks.
    expect(page.locator("#gaps li q").first).to_contain_text("bread")
    assert "learners" in page.locator("#gaps .group-head").first.inner_text()
    expect(page.locator("#asked")).to_contain_text("ZeRO")
    expect(page.locator("#feedback-sections svg")).to_have_attribute("aria-label", re_text("4 up · 2 down"))
    expect(page.locator("#feedback-prompts svg")).to_be_visible()
    expect(page.locator("#tools svg")).to_have_attribute("aria-label", re_text("training_memory"))
    expect(page.locator("#grounding")).to_contain_text("% of answers passed the check")
    expect(page.locator("#fallbacks svg")).to_have_attribute("aria-label", re_text("connection"))
    expect(page.locator("#engines svg")).to_have_attribute("aria-label", re_text("extractive"))
    # Groups under the cohort are hidden, and the page says how many (the leaver and the hostile question).
    expect(page.locator("#cohort-note")).to_contain_text("hidden: fewer than 5 distinct learners")
    # The question browser: details of one answer, then the second page.
    first = page.locator("#browser details.question").first
    first.locator("summary").click()
    expect(first.locator(".answer")).to_be_visible()
    calculator = page.locator("#browser details.question", has_text="how much memory does Adam need").first
    calculator.locator("summary").click()
    expect(calculator.locator(".tools")).to_contain_text("training_memory")
    expect(calculator.locator(".passages blockquote").first).to_be_visible()
    expect(page.locator("#browser-range")).to_have_text(f"Questions 1–20 of {asked}, newest first.")
    page.locator("#next").click()
    expect(page.locator("#browser-range")).to_have_text(f"Questions 21–{asked} of {asked}, newest first.")
    expect(page.locator("#browser details.question")).to_have_count(asked - 20)
    # The hostile question (the oldest) is shown as text, and ran nothing (the fixture checks window.__pwned).
    expect(page.locator("#browser .q-text").last).to_contain_text("<img src=x onerror=")
    assert page.locator("#browser img, #browser script").count() == 0
    page.locator("#prev").click()
    expect(page.locator("#browser-range")).to_have_text(f"Questions 1–20 of {asked}, newest first.")
    not_covered = server.get("/v1/signals/questions", out_of_scope="true", limit=1).json()["total"]
    page.locator("#b-kind").select_option("oos")
    expect(page.locator("#browser-range")).to_have_text(f"Questions 1–{not_covered} of {not_covered}, newest first.")
    page.locator("#b-kind").select_option("")
    page.locator("#panel-heatmap details").evaluate("(d) => d.open = false")
    # For a look when it fails; docs/dashboard.png shows demo data (scripts/screenshots_dashboard.py).
    page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)


def test_a_row_shows_the_question_as_read_where_it_differs(tab, server) -> None:
    page = tab.page
    sign_in(page, server)
    misread = page.locator("#browser details.question", has_text="stgae").first
    expect(misread.locator(".q-text")).to_contain_text(MISSPELLED)
    expect(misread.locator(".q-read")).to_have_text("read as: what does zero stage 2 shard?")
    expect(misread.locator(".q-read q")).to_have_text("what does zero stage 2 shard?")  # quoted, as text
    # Read as written (the same words): nothing more to say.
    same = page.locator("#browser details.question", has_text="how much memory does Adam need for a 7B model?")
    expect(same.first).to_be_visible()
    assert same.locator(".q-read").count() == 0


def test_hidden_groups_and_an_empty_panel_say_why_and_what_would_show_them(tab, server) -> None:
    page = tab.page
    sign_in(page, server)
    note = page.locator("#cohort-note")
    expect(note).to_contain_text(re.compile(r"\d+ groups? hidden: fewer than 5 distinct learners are in (it|each)\."))
    expect(note).to_contain_text("MENTOR_MIN_COHORT=5")  # the setting, as it is set
    expect(note).to_contain_text("They appear as more learners ask")
    expect(note).to_contain_text("a lower MENTOR_MIN_COHORT shows them")
    # The panel holding the hidden group says so too.
    expect(page.locator(".hidden-note").first).to_contain_text("fewer than 5 learners (MENTOR_MIN_COHORT)")
    # A range nobody asked in: the gaps panel says why it is empty and what it would show.
    page.locator("#f-from").fill("2001-01-01")
    page.locator("#f-to").fill("2001-01-31")
    page.locator("#filters button[type=submit]").click()
    gaps = page.locator("#gaps")
    expect(gaps).to_contain_text("Fewer than 5 learners asked anything in this range")
    expect(gaps).to_contain_text("MENTOR_MIN_COHORT")
    expect(gaps).to_contain_text("Here you would see the questions the module does not answer, grouped by meaning")
    expect(page.locator("#asked")).to_contain_text("Here you would see the questions learners ask most")


def test_a_phone_never_scrolls_the_page_sideways(tab, server) -> None:
    """390 px wide, as an iPhone 12-15: wide charts scroll inside their own regions, the page does not."""
    page = tab.page
    page.set_viewport_size({"width": 390, "height": 844})
    sign_in(page, server)
    expect(page.locator("#feedback-sections svg")).to_be_visible()
    page.locator("#browser details.question summary").first.click()  # an open answer with its passages
    page.locator("#panel-heatmap summary").click()  # and the heatmap's table
    page.locator("#b-section").select_option(index=1)  # the longest option text: a section title
    page.locator("#b-section").select_option("")
    width = page.evaluate("() => [document.scrollingElement.scrollWidth, document.scrollingElement.clientWidth]")
    assert width[0] <= width[1] == 390, width
    from axe_playwright_python.sync_playwright import Axe

    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        violations = Axe().run(page).response["violations"]
        assert [(v["id"], v["impact"]) for v in violations] == [], scheme


def test_exports_download_and_parse(tab, server) -> None:
    page = tab.page
    sign_in(page, server)
    asked = sum(len(ids) for ids in server.asked.values())
    files = {}
    for fmt in ("csv", "jsonl", "xapi"):
        with page.expect_download() as download:
            page.locator(f"button.export[data-format={fmt}]").click()
        files[fmt] = Path(download.value.path()).read_text(encoding="utf-8")
        assert download.value.suggested_filename.startswith("mentor-signals.")
        expect(page.locator("#status")).to_contain_text("Downloaded mentor-signals.")
    rows = list(csv.reader(io.StringIO(files["csv"])))
    assert rows[0] == CSV_COLUMNS and len(rows) == asked + 1
    records = [json.loads(line) for line in files["jsonl"].splitlines()]
    assert len(records) == asked and {r["question_id"] for r in records} == {
        q for ids in server.asked.values() for q in ids
    }
    statements = [json.loads(line) for line in files["xapi"].splitlines()]
    assert len(statements) == asked and all(s["verb"]["id"].endswith("/asked") for s in statements)
    assert all(s["version"] == "1.0.3" for s in statements)


def test_erasure_asks_first_then_removes_the_learner(tab, server) -> None:
    page = tab.page
    sign_in(page, server)
    before = server.get("/v1/signals/questions", limit=1).json()["total"]
    gone = server.asked[LEAVER]
    page.locator("#erase-id").fill(LEAVER)
    page.locator("#erase-form button[type=submit]").click()
    dialog = page.locator("#erase-dialog")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text(LEAVER)
    dialog.locator("button[value=cancel]").click()  # changing one's mind erases nothing
    expect(dialog).to_be_hidden()
    assert server.get("/v1/signals/questions", limit=1).json()["total"] == before
    page.locator("#erase-form button[type=submit]").click()
    with page.expect_response(lambda r: r.request.method == "DELETE") as deleted:
        dialog.locator("#erase-confirm").click()
    assert deleted.value.status == 204
    expect(page.locator("#status")).to_have_text(f"Erased every record of learner “{LEAVER}”.")
    items = server.get("/v1/signals/questions", limit=500).json()["items"]
    assert len(items) == before - len(gone) and not {i["question_id"] for i in items} & set(gone)
    expect(page.locator("#browser-range")).to_contain_text(f"of {before - len(gone)}")


def test_the_token_stays_out_of_addresses_and_leaves_with_the_tab(tab, server) -> None:
    page = tab.page
    sign_in(page, server)
    assert TOKEN not in page.url
    assert not [url for url in tab.requests if TOKEN in url]
    assert page.evaluate("() => sessionStorage.getItem('mentor.analystToken')") == TOKEN
    assert page.evaluate("() => localStorage.length") == 0
    assert page.locator("#token").input_value() == ""
    # Kept for the tab. The reloaded page has sent for its data before the click (waiting for that request's entry
    # below timed out under load when the click came first and nothing was sent).
    with page.expect_request(lambda request: "/v1/signals/summary" in request.url):
        page.reload()
    expect(page.locator("#board")).to_be_visible()
    page.locator("#sign-out").click()  # while the reloaded page is still fetching its data
    expect(page.locator("#sign-in")).to_be_visible()
    assert page.evaluate("() => sessionStorage.getItem('mentor.analystToken')") is None
    page.wait_for_function(
        "() => performance.getEntriesByType('resource').some((e) => e.name.includes('/v1/signals/summary'))"
    )
    page.wait_for_timeout(300)  # what was on its way has arrived, and was dropped
    assert page.locator("#browser details, #heatmap svg").count() == 0  # no analyst data left in the page
    page.locator("#token").fill("not-the-token")
    page.locator("#token").press("Enter")
    expect(page.locator("#sign-in-error")).to_have_text("The analyst token was refused. Sign in again.")
    expect(page.locator("#board")).to_be_hidden()


def test_axe_finds_no_serious_violation_light_and_dark(tab, server) -> None:
    page = tab.page
    sign_in(page, server)
    page.locator("#browser details.question summary").first.click()
    page.locator("#panel-heatmap summary").click()
    assert serious_violations(page) == []
    page.emulate_media(color_scheme="dark")
    assert page.evaluate("() => getComputedStyle(document.body).backgroundColor") == "rgb(17, 18, 21)"
    assert serious_violations(page) == []
    page.locator("#erase-id").fill("someone")
    page.locator("#erase-form button[type=submit]").click()
    expect(page.locator("#erase-dialog")).to_be_visible()
    assert serious_violations(page) == []
    page.keyboard.press("Escape")
    expect(page.locator("#erase-dialog")).to_be_hidden()
