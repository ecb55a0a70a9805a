"""The "Ask the mentor" box in a real browser: Debian's chromium driven by Playwright, against a real `mentor serve`.

One server for the file: the real module plus a poisoned one (raw HTML and script in its text), learners allowed
from one other origin. Two small pages on other ports embed the box: one from the allowed origin, one from an
origin the server does not list. Every request to anything but 127.0.0.1 is aborted, so nothing reaches the internet.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import playwright.sync_api as playwright_api
import pytest
from playwright.sync_api import expect

from mentor.bench.cluster import MENTOR
from mentor.bench.procs import clean_env, free_port, spawn, stop, wait_ready

from .browser import SCREENSHOTS, LocalOnly, launch_chromium

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
MODULE = "P10.llm-systems-frontier.02"
POISONED = "T.poisoned.01"
MEMORY_QUESTION = "how much memory does Adam need for a 7B model?"
# Each payload sets window.__pwned if it ever runs.
POISONED_MODULE = """---
module_id: T.poisoned.01
title: A poisoned module
prerequisites: []
topics:
  - gradient checkpointing
---

# A poisoned module {#poison-overview}

Gradient checkpointing saves activation memory by recomputing activations in the backward pass.
<img src=x onerror="window.__pwned='module-img'"> <script>window.__pwned='module-script'</script>

## Recomputation trade-off {#poison-recompute}

Gradient checkpointing <img src=x onerror="window.__pwned='passage-img'"> costs about one extra forward pass of
compute. <script>window.__pwned='passage-script'</script> See [the trick](javascript:window.__pwned='module-link').
"""


@dataclass
class Server:
    url: str
    data_dir: Path
    allowed_page: str  # a page on an origin MENTOR_CORS_ORIGINS lists, embedding the box as a launcher
    foreign_page: str  # the same page on an origin it does not list

    def analyst_token(self) -> str:
        return (self.data_dir / "analyst.token").read_text().strip()


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def embedding_page(api: str) -> str:
    """A host page of another site: the two lines of docs/box-and-embedding.md, in launcher mode."""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Another site</title></head>
<body><main><h1>Another site</h1><h2 id="concept">Concept</h2><p>Some course text.</p></main>
<script type="module" src="{api}/widget.js"></script>
<mentor-chat api="{api}" module="{MODULE}" mode="launcher"></mentor-chat>
</body></html>
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    work = tmp_path_factory.mktemp("widget")
    corpus = work / "corpus"
    shutil.copytree(ROOT / "corpus", corpus)
    (corpus / "zz-poisoned.md").write_text(POISONED_MODULE, encoding="utf-8")
    site = work / "site"
    site.mkdir()
    # The other origins listen before mentor starts, so their ports are theirs when MENTOR_CORS_ORIGINS names one.
    origins = [ThreadingHTTPServer(("127.0.0.1", 0), partial(QuietHandler, directory=str(site))) for _ in range(2)]
    for origin in origins:
        threading.Thread(target=origin.serve_forever, daemon=True).start()
    allowed, foreign = (f"http://127.0.0.1:{o.server_address[1]}" for o in origins)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    (site / "embed.html").write_text(embedding_page(url), encoding="utf-8")
    env = clean_env(
        MENTOR_DATA_DIR=str(work / "data"),
        MENTOR_CORPUS_DIR=str(corpus),
        MENTOR_HOST="127.0.0.1",
        MENTOR_PORT=str(port),
        MENTOR_RATE_LIMIT_PER_MINUTE="10000",
        MENTOR_CORS_ORIGINS=allowed,
    )
    log = work / "serve.log"
    process = spawn([MENTOR, "serve"], env=env, log_path=log)
    try:
        wait_ready(f"{url}/readyz", process, log)
        yield Server(url, work / "data", f"{allowed}/embed.html", f"{foreign}/embed.html")
    finally:
        stop(process)
        for origin in origins:
            origin.shutdown()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with playwright_api.sync_playwright() as playwright:
        chromium = launch_chromium(playwright)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, server):
    """A fresh browser profile (no storage) whose requests may go to 127.0.0.1 only."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    local_only = LocalOnly()
    context.route("**/*", local_only)
    # The box announces each finished answer as a `mentor-answer` event; the tests read them from here (a streamed
    # response's body is not kept by the browser's network log).
    context.add_init_script(
        "window.__answers = []; addEventListener('mentor-answer', (e) => __answers.push(e.detail));"
    )
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    # Refused HTTP answers (429, 422, CORS) are logged by the browser and expected here; a CSP refusal is not.
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" and "Refused" in m.text else None)
    yield page
    context.close()
    assert not local_only.leaked, f"requests outside 127.0.0.1: {local_only.leaked}"
    assert not errors, f"errors in the page: {errors}"


def box(page):
    return page.locator("mentor-chat")


def ask(page, question: str) -> object:
    """Type a question, send it with Enter, and return the finished turn (an answer with feedback, or an error)."""
    turns = box(page).locator(".turn")
    count = turns.count()
    field = box(page).locator("form.ask textarea")
    field.fill(question)
    field.press("Enter")
    turn = turns.nth(count)
    expect(turn.locator(".feedback, .error")).to_have_count(1, timeout=20_000)
    return turn


def answers(page) -> list[dict]:
    """The ChatResponses the box received on this page, in order."""
    return page.evaluate("() => window.__answers")


def open_demo(page, server: Server, module: str | None = None) -> None:
    """Open the demo page with the box ready to ask: on a narrow screen the box is a launcher, opened here."""
    page.goto(f"{server.url}/" + (f"?module={module}" if module else ""))
    expect(box(page).locator(".shell")).to_be_visible()  # its styles loaded: laid out inline or as a launcher
    launcher = box(page).locator("button.launcher")
    if launcher.is_visible():
        launcher.click()
    expect(box(page).locator("form.ask textarea")).to_be_visible()


def shadow_count(page, selector: str) -> int:
    """Elements matching `selector` inside the box's shadow root."""
    return page.evaluate("(s) => document.querySelector('mentor-chat').shadowRoot.querySelectorAll(s).length", selector)


def test_ask_on_the_demo_page_streams_the_answer_and_announces_it(page, server) -> None:
    open_demo(page, server)
    with page.expect_response(f"{server.url}/v1/chat/stream") as streamed:
        turn = ask(page, "what is bf16? and what is fp16?")  # two parts: two sentences to announce
    assert streamed.value.headers["content-type"].startswith("text/event-stream")
    (done,) = answers(page)
    shown = turn.locator(".md").inner_text()
    assert "bf16" in shown and "fp32" in shown
    assert "[1]" in shown and "**" not in shown
    # The live region announced the text politely as it streamed in: a sentence at a time, not per token (an
    # answer that arrived whole would be one announcement).
    live = box(page).locator("[aria-live=polite]")
    announced = live.locator("p").all_inner_texts()
    assert len(announced) >= 2 and all(len(a) >= 20 for a in announced[:-1]), announced
    assert "fp32" in " ".join(announced)
    assert turn.locator(".verdict.ok").inner_text() == "✓ Checked against the module"
    assert done["grounding"]["grounded"] is True
    box(page).locator("button.cite").first.click()
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "demo-page.png"))


def test_footnotes_show_the_quote_and_link_to_the_section(page, server) -> None:
    open_demo(page, server)
    turn = ask(page, "why is bf16 preferred over fp16 for training?")
    citations = answers(page)[0]["citations"]
    assert citations
    first = citations[0]
    button = turn.locator("button.cite").first
    assert button.inner_text() == "[1]"
    assert button.get_attribute("aria-expanded") == "false"
    note = turn.locator(f"#{button.get_attribute('aria-controls')}")
    expect(note).to_be_hidden()
    button.click()
    expect(note).to_be_visible()
    assert button.get_attribute("aria-expanded") == "true"
    assert note.locator("blockquote").inner_text() == first["quote"]
    link = note.locator("a")
    assert link.inner_text() == first["section_title"]
    assert link.get_attribute("href") == f"#{first['section_id']}"
    link.click()  # the host page's section: the demo page has the anchor
    page.wait_for_url(f"**/#{first['section_id']}")
    expect(page.locator(f"main #{first['section_id']}")).to_be_in_viewport()


def test_a_computation_card_reruns_with_a_changed_input(page, server) -> None:
    page.set_viewport_size({"width": 1280, "height": 1350})
    open_demo(page, server)
    turn = ask(page, MEMORY_QUESTION)
    card = turn.locator(".card[data-tool=training_memory]")
    expect(card).to_be_visible()
    assert card.locator("dd[data-key=total_bytes]").get_attribute("data-value") == "112000000000"
    assert "112 GB" in card.locator(".formula").inner_text()
    card.locator("input[name=params]").fill("13B")
    card.locator("select[name=optimizer]").select_option("adamw")
    with page.expect_response(f"{server.url}/v1/tools/training_memory") as ran:
        card.locator("button.rerun").click()
    assert ran.value.status == 200
    expected = httpx.post(
        f"{server.url}/v1/tools/training_memory",
        json={"params": "13B", "weight_dtype": "bf16", "optimizer": "adamw", "mixed_precision": True},
    ).json()
    expect(card.locator(".card-status")).to_have_text("Updated with your inputs.")
    total = card.locator("dd[data-key=total_bytes]")
    assert total.get_attribute("data-value") == str(expected["result"]["total_bytes"]) == "208000000000"
    assert total.inner_text() == "208,000,000,000 bytes (208 GB)"
    assert card.locator(".formula").inner_text() == expected["explanation"]
    assert card.locator("input[name=params]").input_value() == "13000000000"  # what the calculator read
    assert box(page).locator(".turn").count() == 1  # no new question was asked
    # A bad input is refused with the calculator's own words, in the card.
    card.locator("input[name=params]").fill("lots")
    card.locator("button.rerun").click()
    expect(card.locator(".card-status.error")).to_contain_text("params")
    card.locator("input[name=params]").fill("13B")
    card.locator("button.rerun").click()
    expect(card.locator(".card-status")).to_have_text("Updated with your inputs.")
    box(page).locator(".log").evaluate("(log) => { log.scrollTop = 0; }")
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "answer-with-computation-card.png"))


def test_a_hint_names_the_calculator_and_runs_it_only_when_asked(page, server) -> None:
    open_demo(page, server)
    box(page).locator("label", has_text="Hint").click()
    turn = ask(page, MEMORY_QUESTION)
    assert answers(page)[0]["tool_calls"][0]["result"] is None
    card = turn.locator(".card[data-tool=training_memory]")
    assert card.locator("dd").count() == 0
    assert card.locator(".formula").inner_text().startswith("Work it out yourself first")
    card.locator("button.rerun", has_text="Run").click()
    expect(card.locator("dd[data-key=total_bytes]")).to_have_attribute("data-value", "112000000000")
    assert card.locator("button.rerun").inner_text() == "Re-run"


def test_a_follow_up_continues_the_conversation(page, server) -> None:
    open_demo(page, server)
    bodies: list[dict] = []
    page.on(
        "request",
        lambda r: bodies.append(json.loads(r.post_data)) if r.url.endswith("/v1/chat/stream") else None,
    )
    ask(page, MEMORY_QUESTION)
    follow_up = ask(page, "and for a 13B model?")
    done = answers(page)[1]
    assert "conversation_id" not in bodies[0]
    assert bodies[1]["conversation_id"] == done["conversation_id"]
    assert not done["out_of_scope"]
    assert follow_up.locator(".card dd[data-key=total_bytes]").get_attribute("data-value") == "208000000000"


def test_an_out_of_scope_question_shows_the_redirect(page, server) -> None:
    open_demo(page, server)
    turn = ask(page, "what is the capital of France?")
    answer = turn.locator(".answer.redirect")
    expect(answer).to_be_visible()
    assert answer.locator(".badge").inner_text() == "Outside this module"
    assert "outside what this module covers" in answer.inner_text()
    assert turn.locator(".verdict").count() == 0


def test_feedback_is_recorded_for_the_analyst(page, server) -> None:
    open_demo(page, server)
    turn = ask(page, "what does ZeRO stage 3 shard?")
    question_id = answers(page)[0]["question_id"]
    turn.locator(".feedback button[data-rating=down]").click()
    comment = turn.locator(".feedback textarea")
    expect(comment).to_be_focused()
    comment.fill("I wanted the per-GPU numbers")
    with page.expect_response(f"{server.url}/v1/questions/{question_id}/feedback") as sent:
        turn.locator(".feedback button[type=submit]").click()
    assert sent.value.status == 201
    expect(turn.locator(".feedback-status")).to_have_text("Thank you: your feedback is recorded.")
    assert turn.locator(".feedback button[data-rating=down]").get_attribute("aria-pressed") == "true"
    headers = {"Authorization": f"Bearer {server.analyst_token()}"}
    deadline = time.monotonic() + 10
    while True:
        items = httpx.get(f"{server.url}/v1/signals/questions", params={"limit": 50}, headers=headers).json()["items"]
        row = next((i for i in items if i["question_id"] == question_id), None)
        if row and row.get("feedback"):
            break
        assert time.monotonic() < deadline, "feedback not stored within 10 s"
        time.sleep(0.3)
    assert row["feedback"][0]["rating"] == "down"
    assert row["learner"] and not row["learner"].startswith("anon-")  # pseudonymised before it was stored


def test_a_reload_keeps_the_conversation(page, server) -> None:
    open_demo(page, server)
    ask(page, MEMORY_QUESTION)
    stored = page.evaluate("() => Object.entries(sessionStorage).filter(([k]) => k.startsWith('mentor.chat:'))")
    conversation_id = json.loads(stored[0][1])["conversationId"]
    learner = page.evaluate("() => localStorage.getItem('mentor.learner')")
    assert learner.startswith("anon-")
    page.reload()
    restored = box(page).locator(".turn")
    expect(restored).to_have_count(1)
    assert MEMORY_QUESTION in restored.locator(".question").inner_text()
    expect(restored.locator(".card[data-tool=training_memory]")).to_be_visible()
    with page.expect_request(f"{server.url}/v1/chat/stream") as sent:
        ask(page, "and for a 13B model?")
    body = json.loads(sent.value.post_data)
    assert body["conversation_id"] == conversation_id
    assert body["learner_id"] == learner  # the same anonymous learner after the reload
    box(page).locator("button", has_text="New conversation").click()
    expect(box(page).locator(".turn")).to_have_count(0)
    page.reload()
    expect(box(page).locator("form.ask textarea")).to_be_visible()
    assert box(page).locator(".turn").count() == 0


def focused_in_box(page) -> dict:
    """What has the keyboard focus inside the box: its tag and class."""
    return page.evaluate(
        "() => { const a = document.querySelector('mentor-chat').shadowRoot.activeElement;"
        " return a ? {tag: a.tagName, cls: a.className, expanded: a.getAttribute('aria-expanded'),"
        " controls: a.getAttribute('aria-controls')} : null; }"
    )


def test_keyboard_only_from_the_page_to_a_footnote(page, server) -> None:
    open_demo(page, server)
    page.keyboard.press("Tab")  # the skip link comes first
    assert page.evaluate("() => document.activeElement.textContent") == "Skip to Ask the mentor"
    page.keyboard.press("Enter")
    for _ in range(6):  # past the box's "New conversation" button and its three starter questions
        page.keyboard.press("Tab")
        if (focused_in_box(page) or {}).get("tag") == "TEXTAREA":
            break
    assert focused_in_box(page)["tag"] == "TEXTAREA"
    page.keyboard.type("why is bf16 preferred over fp16 for training?")
    page.keyboard.press("Enter")
    expect(box(page).locator(".turn .feedback")).to_have_count(1, timeout=20_000)
    assert focused_in_box(page)["tag"] == "TEXTAREA"  # focus stays where the next question is typed
    for _ in range(40):
        page.keyboard.press("Shift+Tab")
        if focused_in_box(page)["cls"] == "cite":
            break
    else:
        pytest.fail("no footnote reached with the keyboard")
    page.keyboard.press("Enter")
    footnote = focused_in_box(page)
    assert footnote["expanded"] == "true"
    expect(box(page).locator(f"#{footnote['controls']}")).to_be_visible()
    expect(box(page).locator(f"#{footnote['controls']} blockquote")).not_to_be_empty()


def test_keyboard_opens_and_escape_closes_the_launcher(page, server) -> None:
    page.goto(server.allowed_page)
    launcher = box(page).locator("button.launcher")
    expect(launcher).to_be_visible()
    page.keyboard.press("Tab")
    assert focused_in_box(page)["cls"] == "launcher"
    page.keyboard.press("Enter")
    expect(box(page).locator(".panel")).to_be_visible()
    assert launcher.get_attribute("aria-expanded") == "true"
    assert focused_in_box(page)["tag"] == "TEXTAREA"
    page.keyboard.press("Escape")
    expect(box(page).locator(".panel")).to_be_hidden()
    assert focused_in_box(page)["cls"] == "launcher"
    assert launcher.get_attribute("aria-expanded") == "false"


def serious_violations(page) -> list[dict]:
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    return [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]][:3]}
        for v in results.response["violations"]
        if v["impact"] in ("serious", "critical")
    ]


def test_axe_finds_no_serious_violation_with_an_answer_shown_light_and_dark(page, server) -> None:
    open_demo(page, server)
    ask(page, MEMORY_QUESTION)
    box(page).locator("button.cite").first.click()
    box(page).locator(".feedback button[data-rating=up]").click()
    assert serious_violations(page) == []
    page.emulate_media(color_scheme="dark")
    background = box(page).locator(".panel").evaluate("(e) => getComputedStyle(e).backgroundColor")
    assert background == "rgb(29, 31, 35)"
    assert serious_violations(page) == []


def test_the_box_fits_a_phone(page, server) -> None:
    page.set_viewport_size({"width": 375, "height": 740})
    open_demo(page, server)
    ask(page, MEMORY_QUESTION)
    widths = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], widths
    panel = box(page).locator(".panel").bounding_box()
    assert panel["width"] <= 375


CRAFTED = [
    ("meta", {"question_id": "0" * 32, "conversation_id": "c" * 32, "module_id": MODULE}),
    ("delta", {"text": "Streaming <img src=x onerror=\"window.__pwned='delta-img'\"> text. "}),
    ("delta", {"text": "<script>window.__pwned='delta-script'</script> more. "}),
    (
        "done",
        {
            "question_id": "0" * 32,
            "conversation_id": "c" * 32,
            "answer": "Look <img src=x onerror=\"window.__pwned='answer-img'\"> here [1].\n\n"
            "<script>window.__pwned='answer-script'</script>\n\n"
            "<iframe src=\"javascript:window.__pwned='iframe'\"></iframe>\n\n"
            '<p style="position:fixed" onclick="window.__pwned=\'click\'">styled</p>\n\n'
            "[evil](https://evil.example/steal) [js](javascript:window.__pwned='link') "
            "[section](#concept) ![pic](https://evil.example/pixel.png) https://evil.example/auto "
            '<a href="https://evil.example/raw">raw link</a>',
            "citations": [
                {
                    "n": 1,
                    "chunk_id": "x",
                    "section_id": "concept\"><img src=x onerror=\"window.__pwned='section-id'",
                    "section_title": "<img src=x onerror=\"window.__pwned='title'\">Title",
                    "quote": "<img src=x onerror=\"window.__pwned='quote'\"><script>window.__pwned='q'</script>",
                }
            ],
            "tool_calls": [
                {
                    "name": "<img src=x onerror=\"window.__pwned='tool'\">",
                    "arguments": {"<img src=x onerror=\"window.__pwned='arg'\">": "<script>x</script>"},
                    "result": {"total_bytes": 1, "<b onmouseover=x>": "<img src=x onerror=\"window.__pwned='r'\">"},
                    "explanation": "<img src=x onerror=\"window.__pwned='explanation'\">",
                }
            ],
            "out_of_scope": False,
            "grounding": {
                "grounded": False,
                "unsupported_sentences": ["<img src=x onerror=\"window.__pwned='verdict'\">"],
                "untraced_numbers": [],
            },
            "engine": "crafted",
            "model": None,
            "prompt_version": None,
            "module_version": "x",
            "latency_ms": 1.0,
        },
    ),
]


def crafted_stream(route) -> None:
    body = "".join(f"event: {kind}\ndata: {json.dumps(data)}\n\n" for kind, data in CRAFTED)
    route.fulfill(
        status=200,
        headers={"Content-Type": "text/event-stream", "Access-Control-Allow-Origin": "*"},
        body=body,
    )


def assert_nothing_live(page) -> None:
    assert page.evaluate("() => window.__pwned") is None
    for tag in ("img", "script", "iframe", "[style]", "[onclick]", "[onerror]"):
        assert shadow_count(page, tag) == 0, tag
    links = "document.querySelector('mentor-chat').shadowRoot.querySelectorAll('a')"
    hrefs = page.evaluate(f"() => [...{links}].map((a) => a.getAttribute('href'))")
    assert all(href == "#concept" for href in hrefs), hrefs


@pytest.mark.parametrize("where", ["demo page", "another site without a CSP"])
def test_html_and_script_in_an_answer_never_run(page, server, where) -> None:
    # The other site has no Content-Security-Policy: there the box's own rendering is the only wall.
    page.route("**/v1/chat/stream", crafted_stream)
    if where == "demo page":
        open_demo(page, server)
    else:
        page.goto(server.allowed_page)
        box(page).locator("button.launcher").click()
    turn = ask(page, "anything")
    time.sleep(0.3)  # an image's onerror fires asynchronously: give it the chance to run
    assert_nothing_live(page)
    shown = turn.locator(".md").inner_text()
    assert "<img src=x onerror=" in shown and "<script>" in shown  # shown as text, not dropped silently
    assert "evil" in shown and "raw link" in shown  # foreign links are plain text
    assert turn.locator(".md a").get_attribute("href") == "#concept"
    turn.locator("button.cite").click()
    assert "<img src=x" in turn.locator(".note blockquote").inner_text()
    assert turn.locator(".note a").count() == 0  # a section id that is not an id gets no link
    assert "<img" in turn.locator(".verdict.warn").inner_text()
    time.sleep(0.3)
    assert_nothing_live(page)


def test_a_poisoned_module_is_shown_and_quoted_as_text(page, server) -> None:
    open_demo(page, server, POISONED)
    assert page.locator("select#module-picker option").count() == 2  # two modules: a picker
    main = page.locator("main")
    assert "<img src=x onerror=" in main.inner_text()
    assert main.locator("img, script").count() == 0
    turn = ask(page, "how does gradient checkpointing trade compute for memory?")
    for button in turn.locator("button.cite").all():
        button.click()
    time.sleep(0.3)
    assert page.evaluate("() => window.__pwned") is None
    assert shadow_count(page, "img, script") == 0
    quoted = turn.inner_text()
    assert "Gradient checkpointing" in quoted or "gradient checkpointing" in quoted


def test_a_rate_limited_question_shows_the_wait(page, server) -> None:
    page.route(
        "**/v1/chat/stream",
        lambda route: route.fulfill(
            status=429,
            headers={"Retry-After": "7", "Content-Type": "application/json"},
            body=json.dumps({"error": "rate_limited", "message": "too many questions: at most 20 a minute"}),
        ),
    )
    open_demo(page, server)
    turn = ask(page, "what does ZeRO shard?")
    wait = "You have asked a lot in a short time. You can ask again in 7 seconds."
    assert turn.locator(".error").inner_text() == wait
    send = box(page).locator("button.send")
    assert send.get_attribute("aria-disabled") == "true"
    assert send.inner_text().startswith("Wait ")


def test_a_learner_token_travels_as_a_bearer_header_instead_of_a_learner_id(page, server) -> None:
    sent: list[tuple[dict, dict]] = []

    def capture(route) -> None:
        sent.append((route.request.headers, json.loads(route.request.post_data)))
        crafted_stream(route)

    page.route("**/v1/chat/stream", capture)
    open_demo(page, server)
    box(page).evaluate("(e) => e.setAttribute('token', 'header.payload.signature')")
    ask(page, "anything")
    ((headers, body),) = sent
    assert headers["authorization"] == "Bearer header.payload.signature"
    assert "learner_id" not in body and body["module_id"] == MODULE


def test_the_box_on_an_allowed_origin_works_and_on_another_fails_plainly(page, server) -> None:
    page.goto(server.allowed_page)
    box(page).locator("button.launcher").click()
    turn = ask(page, "why is bf16 preferred over fp16 for training?")
    assert "bf16" in turn.locator(".md").inner_text()
    assert turn.locator(".error").count() == 0

    page.goto(server.foreign_page)
    box(page).locator("button.launcher").click()
    turn = ask(page, "why is bf16 preferred over fp16 for training?")
    error = turn.locator(".error")
    assert error.get_attribute("role") == "alert"
    assert error.inner_text().startswith(f"The mentor at {server.url} cannot be reached from this page.")


# --- the first screen, starter questions, stop, copy, ask again, a calculation said once, a greeting ----------------


def axe_clean(page) -> None:
    assert serious_violations(page) == []


@pytest.mark.parametrize("width,height", [(390, 844), (1366, 768)])
def test_the_ask_field_is_on_the_first_screen(page, server, width, height) -> None:
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{server.url}/")
    field = box(page).locator("form.ask textarea")
    launcher = box(page).locator("button.launcher")
    if width < 960:  # one column: the box floats behind a launcher at the bottom of the first screen
        expect(launcher).to_be_in_viewport(ratio=1)
        expect(field).to_be_hidden()
        launcher.click()
        assert launcher.get_attribute("aria-expanded") == "true"
        assert box(page).locator(".panel").get_attribute("role") == "dialog"
    else:  # beside the module, open
        expect(launcher).to_be_hidden()
    expect(field).to_be_in_viewport(ratio=1)
    if width < 960:
        expect(field).to_be_focused()  # opened: ready to type
    assert page.evaluate("() => window.scrollY") == 0  # nothing was scrolled to get there
    scroll_width, inner_width = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert scroll_width <= inner_width, (scroll_width, inner_width)  # no sideways scroll
    panel = box(page).locator(".panel").bounding_box()
    assert panel["x"] >= 0 and panel["x"] + panel["width"] <= width
    axe_clean(page)
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"first-screen-{width}.png"))


def test_the_box_follows_the_window_between_launcher_and_inline(page, server) -> None:
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto(f"{server.url}/")
    field = box(page).locator("form.ask textarea")
    expect(field).to_be_in_viewport(ratio=1)
    page.set_viewport_size({"width": 390, "height": 844})  # a window made narrow, a phone turned
    expect(box(page).locator("button.launcher")).to_be_in_viewport(ratio=1)
    expect(field).to_be_hidden()
    page.set_viewport_size({"width": 1366, "height": 768})
    expect(field).to_be_in_viewport(ratio=1)
    expect(box(page).locator("button.launcher")).to_be_hidden()


def test_starter_questions_come_from_the_module_headings_and_ask(page, server) -> None:
    open_demo(page, server)
    (module,) = [m for m in httpx.get(f"{server.url}/v1/modules").json() if m["id"] == MODULE]
    chips = box(page).locator(".starters button.starter")
    expect(chips).to_have_count(3)
    assert chips.all_inner_texts() == [s["question"] for s in module["starters"]]
    for starter in module["starters"]:  # each names its heading's subject, as the page shows that heading
        heading = page.locator(f"main #{starter['section_id']}").inner_text()
        subject = heading.split("—")[-1].split("(")[0].strip()
        assert subject.lower() in starter["question"].lower(), (heading, starter["question"])
    chosen = chips.nth(2).inner_text()
    chips.nth(2).click()
    turn = box(page).locator(".turn")
    expect(turn.locator(".feedback")).to_have_count(1, timeout=20_000)
    assert turn.locator(".question").inner_text() == f"You: {chosen}"
    (done,) = answers(page)
    assert not done["out_of_scope"] and done["citations"] and done["grounding"]["grounded"]
    assert turn.locator("button.cite").count() >= 1
    expect(box(page).locator(".starters")).to_have_count(0)  # asked: the offer is gone
    assert focused_in_box(page)["tag"] == "TEXTAREA"
    box(page).locator("button", has_text="New conversation").click()
    expect(chips).to_have_count(3)  # a new conversation offers them again


@dataclass
class SlowStream:
    """A stand-in for the mentor's stream: a word every 0.1 s for 30 s, and whether its client hung up early."""

    url: str
    hung_up: threading.Event
    words_sent: list[int]


@pytest.fixture(scope="module")
def slow_stream() -> Iterator[SlowStream]:
    hung_up = threading.Event()
    words_sent = [0]

    class Handler(QuietHandler):
        def cors(self) -> None:
            self.send_header("Access-Control-Allow-Origin", "*")
            self.send_header("Access-Control-Allow-Headers", "content-type, authorization")
            self.send_header("Access-Control-Allow-Methods", "GET, POST")

        def do_OPTIONS(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(204)
            self.cors()
            self.end_headers()

        def do_GET(self) -> None:  # noqa: N802 - /v1/modules and /v1/tools: nothing to offer
            self.send_response(200)
            self.cors()
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b"[]")

        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.cors()
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            meta = {"question_id": "0" * 32, "conversation_id": "c" * 32, "module_id": MODULE}
            try:
                self.wfile.write(f"event: meta\ndata: {json.dumps(meta)}\n\n".encode())
                for n in range(300):
                    self.wfile.write(f"event: delta\ndata: {json.dumps({'text': f'word{n} '})}\n\n".encode())
                    self.wfile.flush()
                    words_sent[0] = n + 1
                    time.sleep(0.1)
            except (BrokenPipeError, ConnectionResetError):
                hung_up.set()

    origin = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=origin.serve_forever, daemon=True).start()
    yield SlowStream(f"http://127.0.0.1:{origin.server_address[1]}", hung_up, words_sent)
    origin.shutdown()


def test_stop_ends_a_streaming_answer_and_closes_its_connection(page, server, slow_stream) -> None:
    # What is verified: Stop shows only while an answer streams; clicking it aborts the fetch (the stand-in server
    # sees its client hang up while it still had 25 s of words to send), keeps what had arrived marked unfinished,
    # and gives the box back (Ask enabled, focus in the field). The real mentor's side of a client leaving (the model
    # stops, the question is logged as abandoned) is tested in test_chat_stream.py. The box is on the other site's
    # page: the demo page's Content-Security-Policy lets it call its own origin only.
    page.goto(server.allowed_page)
    box(page).locator("button.launcher").click()
    box(page).evaluate("(e, api) => e.setAttribute('api', api)", slow_stream.url)
    stop_button = box(page).locator("button.stop")
    expect(stop_button).to_be_hidden()
    field = box(page).locator("form.ask textarea")
    field.fill("tell me everything")
    field.press("Enter")
    turn = box(page).locator(".turn")
    expect(turn.locator(".md")).to_contain_text("word3", timeout=10_000)
    expect(stop_button).to_be_visible()
    assert box(page).locator("button.send").get_attribute("aria-disabled") == "true"
    stop_button.click()
    expect(turn.locator(".stopped")).to_have_text("Stopped: the answer above is unfinished.")
    assert slow_stream.hung_up.wait(5), "the stream's connection stayed open after Stop"
    assert slow_stream.words_sent[0] < 250
    shown = turn.locator(".md").inner_text()
    time.sleep(0.5)  # no more words arrive after Stop
    assert turn.locator(".md").inner_text() == shown and "word3" in shown
    expect(stop_button).to_be_hidden()
    assert box(page).locator("button.send").get_attribute("aria-disabled") is None
    assert focused_in_box(page)["tag"] == "TEXTAREA"
    assert answers(page) == [] and turn.locator(".error").count() == 0
    expect(turn.locator(".actions button.retry")).to_be_visible()  # and it may be asked again


def test_copy_puts_the_answer_and_its_sources_on_the_clipboard(page, server) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
    open_demo(page, server)
    turn = ask(page, "why is bf16 preferred over fp16 for training?")
    assert turn.locator(".error").count() == 0, turn.inner_text()
    (done,) = answers(page)
    copy = turn.locator(".actions button.copy")
    copy.click()
    expect(copy).to_have_text("Copied")
    copied = page.evaluate("() => navigator.clipboard.readText()")
    text, _, sources = copied.partition("\n\nSources:\n")
    assert "**" not in text and "[1]" in text
    assert text.split("[1]")[0].strip() in done["answer"]  # the answer's own words, emphasis dropped
    first = done["citations"][0]
    assert sources.splitlines()[0] == f"[1] {first['section_title']} ({server.url}/#{first['section_id']})"
    assert len(sources.splitlines()) == len(done["citations"])
    expect(box(page).locator("[aria-live=polite]")).to_contain_text("Copied the answer and its sources.")


def test_ask_again_re_asks_the_last_question_after_a_failure(page, server) -> None:
    streams: list[str] = []

    def second_fails(route) -> None:
        streams.append(route.request.url)
        if len(streams) == 2:
            route.fulfill(
                status=503,
                headers={"Content-Type": "application/json", "Access-Control-Allow-Origin": "*"},
                body=json.dumps({"error": "unavailable", "message": "The mentor is restarting."}),
            )
        else:
            route.continue_()

    page.route("**/v1/chat/stream", second_fails)
    open_demo(page, server)
    ask(page, MEMORY_QUESTION)
    failed = ask(page, "why is bf16 preferred over fp16 for training?")
    assert failed.locator(".error").inner_text() == "The mentor is restarting."
    retries = box(page).locator(".actions button.retry")
    expect(retries).to_have_count(1)  # only the last question has it
    with page.expect_request(f"{server.url}/v1/chat/stream") as sent:
        failed.locator("button.retry").click()
    body = json.loads(sent.value.post_data)
    assert body["message"] == "why is bf16 preferred over fp16 for training?"
    assert body["conversation_id"] == answers(page)[0]["conversation_id"]  # the same conversation goes on
    again = box(page).locator(".turn").nth(2)
    expect(again.locator(".feedback")).to_have_count(1, timeout=20_000)
    assert "bf16" in again.locator(".md").inner_text()
    expect(retries).to_have_count(1)
    assert again.locator("button.retry").count() == 1


def test_a_calculation_is_said_once_by_its_card_with_one_line_of_prose(page, server) -> None:
    page.set_viewport_size({"width": 1280, "height": 1350})
    open_demo(page, server)
    turn = ask(page, MEMORY_QUESTION)
    (done,) = answers(page)
    (call,) = done["tool_calls"]
    assert call["explanation"] in done["answer"]  # the API's text keeps every figure (grounding, eval)
    prose = turn.locator(".md").inner_text()
    assert "Training memory: worked out in the card below." in prose
    assert "optimizer state = 7B params × 12 bytes" not in prose  # the formula is not printed twice
    assert "112 GB" in turn.locator(".card .formula").inner_text()
    assert "Adam keeps momentum" in prose  # the module's own words stay
    # A calculator whose explanation opens with a verdict in words keeps that sentence as the line.
    fit = ask(page, "will a 7B model fit on one 80 GB GPU for training?")
    (call,) = answers(page)[1]["tool_calls"]
    verdict = call["explanation"].split(". ")[0]
    line = fit.locator(".md p").first.inner_text()
    assert line == f"{call['title']}: {verdict}. The figures are in the card below.", line
    assert call["explanation"] not in fit.locator(".md").inner_text()


def test_a_greeting_gets_a_short_kind_reply_in_the_box(page, server) -> None:
    open_demo(page, server)
    turn = ask(page, "hi")
    text = turn.locator(".md").inner_text()
    assert text.startswith("Hi!") and "Training at scale" in text
    assert turn.locator(".answer.redirect, .badge, .verdict").count() == 0  # not refused, nothing to check
    thanks = ask(page, "thank you so much")
    assert "You're welcome" in thanks.locator(".md").inner_text()
