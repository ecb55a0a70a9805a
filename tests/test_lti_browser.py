"""The happy paths in Chromium: the emulated LMS's course page frames mentor; the OIDC dance runs inside the iframe;
the box answers there, signed in. And an instructor places a module with the picker and is sent back to the LMS."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import playwright.sync_api as playwright_api
import pytest
from playwright.sync_api import expect
from sqlalchemy import text

from mentor.lti import claims as c
from mentor.lti.launch import context_key, lti_learner_id
from mentor.runtime import pseudonym_secret

from .browser import LocalOnly, launch_chromium
from .conftest import MODULE_ID
from .lti_platform import INSTRUCTOR

pytestmark = pytest.mark.slow
pytest_plugins = ["tests.lti_fixtures"]


@pytest.fixture(scope="module")
def chromium() -> Iterator[object]:
    with playwright_api.sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium):
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    local_only = LocalOnly()
    context.route("**/*", local_only)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    yield page
    context.close()
    assert not local_only.leaked, local_only.leaked
    assert not errors, errors


def test_a_learner_asks_in_the_box_inside_the_lms_iframe(page, platform, runtime, caplog) -> None:
    hint = platform.expect(custom={"module_id": MODULE_ID})
    with caplog.at_level(logging.INFO, logger="mentor.lti.router"):
        page.goto(f"{platform.issuer}/course/{hint}")
        frame = page.frame_locator("#tool")
        field = frame.locator("mentor-chat form.ask textarea")
        expect(field).to_be_visible(timeout=20_000)
        field.fill("Why keep an fp32 master copy of the weights?")
        field.press("Enter")
        turn = frame.locator("mentor-chat .turn").first
        expect(turn.locator(".feedback")).to_have_count(1, timeout=20_000)
    assert turn.locator(".md").inner_text().strip()
    assert "LtiResourceLinkRequest" in caplog.text
    # Chromium kept the state's Partitioned cookie inside the iframe: the launch was bound to this browser.
    assert "state not bound" not in caplog.text
    # Asked as the LTI learner, in the LTI course (both pseudonymised).
    runtime.writer.flush(5.0)
    learner = runtime.chat.learner_key(lti_learner_id(platform.issuer, "user-42"))
    course = context_key(platform.issuer, "course-101", pseudonym_secret(runtime.settings))
    with runtime.database.connect() as connection:
        asked = "SELECT count(*) FROM questions WHERE learner_id = :l AND lti_context = :c"
        assert connection.execute(text(asked), {"l": learner, "c": course}).scalar() == 1


def test_an_instructor_places_a_module_from_inside_the_lms(page, platform) -> None:
    hint = platform.expect(c.DEEP_LINKING_REQUEST, roles=[INSTRUCTOR])
    page.goto(f"{platform.issuer}/course/{hint}")
    frame = page.frame_locator("#tool")
    expect(frame.locator(f"input[value='{MODULE_ID}']")).to_be_checked(timeout=20_000)
    frame.locator("button[type=submit]").click()
    expect(frame.locator("#added")).to_contain_text("Ask the mentor", timeout=20_000)
    [response] = platform.deep_links
    assert response[c.CONTENT_ITEMS][0]["custom"] == {"module_id": MODULE_ID}
