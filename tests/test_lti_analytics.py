"""Course staff and the analyst view: questions carry their LTI course (pseudonymised), an instructor's launch opens
the analytics of that course only, learners never see it, and an LTI learner can be erased like any other."""

from __future__ import annotations

from sqlalchemy import text

from mentor.lti.launch import context_key, lti_learner_id
from mentor.runtime import pseudonym_secret

from .conftest import MODULE_ID
from .lti_platform import INSTRUCTOR, launch, read_form

pytest_plugins = ["tests.lti_fixtures"]
QUESTION = "Why keep an fp32 master copy of the weights?"


def ask_in(browser, platform, tool, *, user: str, course: str) -> None:
    page = launch(browser, platform, platform.expect(user=user, context_id=course, custom={"module_id": MODULE_ID}))
    assert page.response.status_code == 200, page.response.text
    token = page.response.text.split('token="', 1)[1].split('"', 1)[0]
    answer = browser.post(f"{tool}/v1/chat", json={"message": QUESTION}, headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200, answer.text


def course_token(browser, platform, course: str) -> str:
    page = launch(browser, platform, platform.expect(user="teacher-1", roles=[INSTRUCTOR], context_id=course))
    assert page.response.status_code == 200
    action, fields = read_form(page.response.text)
    assert action == "/lti/analytics"
    return fields["course_token"]


def test_questions_carry_their_course_and_an_instructor_sees_only_that_course(platform, browser, tool, runtime):
    ask_in(browser, platform, tool, user="ada", course="physics")
    ask_in(browser, platform, tool, user="ada", course="physics")
    ask_in(browser, platform, tool, user="bob", course="chemistry")
    runtime.writer.flush(5.0)
    key = pseudonym_secret(runtime.settings)
    physics, chemistry = (context_key(platform.issuer, course, key) for course in ("physics", "chemistry"))
    with runtime.database.connect() as connection:
        stored = dict(
            connection.execute(
                text("SELECT lti_context, count(*) FROM questions WHERE lti_context IN (:a, :b) GROUP BY lti_context"),
                {"a": physics, "b": chemistry},
            ).all()
        )
    assert stored == {physics: 2, chemistry: 1}
    # The box's learner token as the facade's API key: that question is the course's too.
    page = launch(browser, platform, platform.expect(user="cy", context_id="physics", custom={"module_id": MODULE_ID}))
    box_token = page.response.text.split('token="', 1)[1].split('"', 1)[0]
    completion = browser.post(
        f"{tool}/v1/chat/completions",
        json={"model": MODULE_ID, "messages": [{"role": "user", "content": QUESTION}]},
        headers={"Authorization": f"Bearer {box_token}"},
    )
    assert completion.status_code == 200, completion.text
    runtime.writer.flush(5.0)
    assert "physics" not in physics  # a pseudonym, not the platform's course id

    token = course_token(browser, platform, "physics")
    headers = {"Authorization": f"Bearer {token}"}
    listed = browser.get(f"{tool}/v1/signals/questions", headers=headers)
    assert listed.status_code == 200, listed.text
    assert listed.json()["total"] == 3
    assert [item["channel"] for item in listed.json()["items"]].count("openai") == 1
    exported = browser.get(f"{tool}/v1/signals/export", params={"format": "jsonl"}, headers=headers)
    assert exported.status_code == 200 and len(exported.text.strip().splitlines()) == 3
    summary = browser.get(f"{tool}/v1/signals/summary", headers=headers)
    assert summary.status_code == 200  # one learner: under the minimum cohort, its groups stay hidden
    assert (
        browser.get(
            f"{tool}/v1/signals/questions",
            headers={"Authorization": f"Bearer {course_token(browser, platform, 'chemistry')}"},
        ).json()["total"]
        == 1
    )
    # Erasure stays with the analyst token.
    assert browser.delete(f"{tool}/v1/learners/anyone", headers=headers).status_code == 401
    # The analyst token sees every course, each row naming its course, and filters by one; a course token's own
    # course wins over what its query asks.
    analyst = {"Authorization": f"Bearer {runtime.analyst_token}"}
    rows = browser.get(f"{tool}/v1/signals/questions", params={"lti_context": chemistry}, headers=analyst).json()
    assert rows["total"] == 1 and rows["items"][0]["lti_context"] == chemistry
    asked = browser.get(f"{tool}/v1/signals/questions", params={"lti_context": chemistry}, headers=headers).json()
    assert asked["total"] == 3 and {item["lti_context"] for item in asked["items"]} == {physics}
    exported = browser.get(
        f"{tool}/v1/signals/export", params={"format": "csv", "lti_context": physics}, headers=analyst
    )
    assert exported.text.splitlines()[0].endswith(",lti_context") and exported.text.count(physics) == 3


def test_a_learner_launch_has_no_analytics_and_a_forged_course_token_opens_nothing(platform, browser, tool) -> None:
    page = launch(browser, platform, platform.expect(custom={"module_id": MODULE_ID})).response
    assert "/lti/analytics" not in page.text
    forged = browser.get(f"{tool}/v1/signals/questions", headers={"Authorization": "Bearer a.b.c"})
    assert forged.status_code == 401
    assert browser.post(f"{tool}/lti/analytics", data={"course_token": "a.b.c"}).status_code == 401


def test_the_analytics_hand_off_gives_the_dashboard_the_course_token_in_a_tab_of_its_own(platform, browser, tool):
    token = course_token(browser, platform, "physics")
    handoff = browser.post(f"{tool}/lti/analytics", data={"course_token": token})
    assert handoff.status_code == 200
    assert f'data-token="{token}"' in handoff.text and "mentor.analystToken" in handoff.text
    assert "frame-ancestors 'none'" in handoff.headers["content-security-policy"]


def test_an_lti_learner_is_erased_by_the_id_mentor_lti_learner_id_prints(platform, browser, tool, runtime) -> None:
    ask_in(browser, platform, tool, user="carol", course="physics")
    runtime.writer.flush(5.0)
    learner = lti_learner_id(platform.issuer, "carol")
    key = runtime.chat.learner_key(learner)
    count = "SELECT count(*) FROM questions WHERE learner_id = :k"
    with runtime.database.connect() as connection:
        assert connection.execute(text(count), {"k": key}).scalar() == 1
    erased = browser.delete(
        f"{tool}/v1/learners/{learner}", headers={"Authorization": f"Bearer {runtime.analyst_token}"}
    )
    assert erased.status_code == 204
    with runtime.database.connect() as connection:
        assert connection.execute(text(count), {"k": key}).scalar() == 0
