"""mentor as an LTI 1.3 tool, driven by the platform emulator (tests/lti_platform.py) over real HTTP: the OIDC dance,
the launch's checks (each refusal a plain 4xx page and a log line, each failing without its check), the box signed
in, nothing personal kept."""

from __future__ import annotations

import logging
import time

import httpx
import jwt
import pytest
from sqlalchemy import text

from mentor.lti import claims as c
from mentor.lti.launch import lti_learner_id

from .conftest import MODULE_ID
from .lti_platform import DELETE, INSTRUCTOR, SECRET, Dance, launch, new_key, read_form

# The fixtures tool (the app over HTTP), platform (a registered emulator) and browser (an HTTP client).
pytest_plugins = ["tests.lti_fixtures"]


def box_token(html: str) -> str:
    marker = 'token="'
    start = html.index(marker) + len(marker)
    return html[start : html.index('"', start)]


def test_a_learner_launch_opens_the_box_signed_in_and_the_first_answer_comes_within_a_second(
    platform, browser, tool, runtime
) -> None:
    hint = platform.expect(custom={"module_id": MODULE_ID})
    started = time.perf_counter()
    dance = launch(browser, platform, hint)
    page = dance.response
    assert page.status_code == 200, page.text
    assert f'<mentor-chat module="{MODULE_ID}"' in page.text
    # Framed by the LMS: its own frame-ancestors, no X-Frame-Options DENY.
    assert "frame-ancestors *" in page.headers["content-security-policy"]
    assert "x-frame-options" not in page.headers
    token = box_token(page.text)
    claims = jwt.decode(token, SECRET, algorithms=["HS256"], audience="mentor")
    assert claims["sub"] == lti_learner_id(platform.issuer, "user-42")
    assert claims["exp"] - claims["iat"] <= 2 * 3600  # short-lived
    answer = browser.post(
        f"{tool}/v1/chat",
        json={"message": "Why keep an fp32 master copy of the weights?", "module_id": MODULE_ID},
        headers={"Authorization": f"Bearer {token}"},
    )
    elapsed = time.perf_counter() - started
    assert answer.status_code == 200, answer.text
    assert elapsed < 1.0, f"launch to first answer took {elapsed:.2f} s"
    runtime.writer.flush(5.0)
    learner_key = runtime.chat.learner_key(claims["sub"])
    with runtime.database.connect() as connection:
        asked = connection.execute(
            text("SELECT count(*) FROM questions WHERE learner_id = :k"), {"k": learner_key}
        ).scalar()
        everything = " ".join(
            str(row)
            for table in ("learners", "questions", "conversations", "lti_registrations")
            for row in connection.execute(text(f"SELECT * FROM {table}"))  # noqa: S608 - fixed table names
        )
    assert asked == 1
    for personal in ("Janeth", "janeth@example.edu", "janeth.png", "user-42"):
        assert personal not in everything and personal not in page.text


def test_without_the_binding_cookie_the_launch_still_opens_and_with_another_it_is_refused(
    platform, browser, caplog
) -> None:
    """Cookies blocked in the iframe: the signed state and single-use nonce carry the launch. A cookie of another
    login (another browser) is refused."""
    assert launch(browser, platform, platform.expect(), cookies=False).response.status_code == 200
    hint = platform.expect()
    started = browser.get(platform.login_url(hint), follow_redirects=False)
    cookie_name = next(iter(started.cookies.keys()))
    action, form = read_form(browser.get(started.headers["location"]).text)
    with caplog.at_level(logging.WARNING, logger="mentor.lti.router"):
        refused = browser.post(action, data=form, headers={"Cookie": f"{cookie_name}=someone-elses"})
    assert refused.status_code == 401
    assert "state_mismatch" in caplog.text


def refusal(response: httpx.Response, caplog, reason: str, status: int) -> None:
    assert response.status_code == status, (reason, response.status_code, response.text[:300])
    assert response.headers["content-type"].startswith("text/html")
    assert "mentor cannot open this link" in response.text
    assert f"({reason}, {status})" in caplog.text, caplog.text[-2000:]


NOW = int(time.time())
OTHER_KEY, OTHER_KID = new_key()
# (name, overrides of the id_token's claims, expected status, the reason the log line names). Each row breaks one
# rule of LTI Core 1.3 / the Security Framework; without its check the launch would open (or fail another way).
BROKEN = [
    ("wrong issuer", {"iss": "https://evil.example"}, 401, "wrong_issuer"),
    ("wrong audience", {"aud": "another-client"}, 401, "wrong_audience"),
    ("several audiences, no azp", {"aud": ["{client}", "another"]}, 401, "missing_claim"),
    ("azp of another client", {"aud": ["{client}", "another"], "azp": "another"}, 401, "wrong_audience"),
    ("expired", {"exp": NOW - 600, "iat": NOW - 900}, 401, "expired"),
    ("issued in the future", {"iat": NOW + 3600}, 401, "not_yet_valid"),
    ("no exp", {"exp": DELETE}, 401, "missing_claim"),
    ("no iat", {"iat": DELETE}, 401, "missing_claim"),
    ("nonce of another login", {"nonce": "another-nonce"}, 401, "nonce_mismatch"),
    ("no nonce", {"nonce": DELETE}, 401, "missing_claim"),
    ("unknown deployment", {c.DEPLOYMENT_ID: "deployment-unknown"}, 403, "unknown_deployment"),
    ("no message_type", {c.MESSAGE_TYPE: DELETE}, 400, "missing_claim"),
    ("unsupported message_type", {c.MESSAGE_TYPE: "LtiSubmissionReviewRequest"}, 400, "unsupported_message"),
    ("no version", {c.VERSION: DELETE}, 400, "missing_claim"),
    ("version 1.1", {c.VERSION: "1.1.0"}, 400, "wrong_version"),
    ("no deployment_id", {c.DEPLOYMENT_ID: DELETE}, 400, "missing_claim"),
    ("no target_link_uri", {c.TARGET_LINK_URI: DELETE}, 400, "missing_claim"),
    ("no resource_link", {c.RESOURCE_LINK: DELETE}, 400, "missing_claim"),
    ("resource_link without id", {c.RESOURCE_LINK: {"title": "x"}}, 400, "missing_claim"),
    ("no sub (anonymous launch)", {"sub": DELETE}, 400, "missing_claim"),
    ("no roles", {c.ROLES: DELETE}, 400, "missing_claim"),
    ("unknown module", {c.CUSTOM: {"module_id": "no.such.module"}}, 404, "unknown_module"),
]


@pytest.mark.parametrize(("overrides", "status", "reason"), [row[1:] for row in BROKEN], ids=[r[0] for r in BROKEN])
def test_a_launch_breaking_a_rule_gets_a_plain_4xx_page_and_a_log_line(
    platform, browser, caplog, overrides, status, reason
) -> None:
    overrides = {
        k: [platform.client_id if a == "{client}" else a for a in v] if k == "aud" and isinstance(v, list) else v
        for k, v in overrides.items()
    }
    hint = platform.expect(custom={"module_id": MODULE_ID}, overrides=overrides)
    with caplog.at_level(logging.WARNING, logger="mentor.lti.router"):
        dance = launch(browser, platform, hint)
    refusal(dance.response, caplog, reason, status)


def test_a_launch_signed_with_another_key_is_refused(platform, browser, caplog) -> None:
    """The platform's kid, someone else's key: the signature does not match."""
    hint = platform.expect(sign_with=OTHER_KEY)
    with caplog.at_level(logging.WARNING, logger="mentor.lti.router"):
        refusal(launch(browser, platform, hint).response, caplog, "bad_signature", 401)


def test_a_launch_signed_with_another_algorithm_than_rs256_is_refused(platform, browser, caplog) -> None:
    hint = platform.expect(hs256_secret="a-shared-secret-of-at-least-32-bytes")
    with caplog.at_level(logging.WARNING, logger="mentor.lti.router"):
        refusal(launch(browser, platform, hint).response, caplog, "wrong_algorithm", 401)


def test_a_launch_from_a_platform_removed_after_login_is_refused(platform, browser, runtime, caplog) -> None:
    from mentor.lti.registrations import find_registration, remove_registration

    hint = platform.expect()
    started = browser.get(platform.login_url(hint), follow_redirects=False)
    action, form = read_form(browser.get(started.headers["location"]).text)
    remove_registration(runtime.database, find_registration(runtime.database, platform.issuer, platform.client_id).id)
    with caplog.at_level(logging.WARNING, logger="mentor.lti.router"):
        refusal(browser.post(action, data=form), caplog, "unknown_registration", 401)


def test_a_launch_naming_a_key_the_platform_does_not_publish_is_refused(platform, browser, caplog) -> None:
    hint = platform.expect(sign_with=OTHER_KEY, kid=OTHER_KID)
    with caplog.at_level(logging.WARNING, logger="mentor.lti.router"):
        refusal(launch(browser, platform, hint).response, caplog, "unknown_key", 401)


def test_a_replayed_launch_is_refused(platform, browser, caplog) -> None:
    dance: Dance = launch(browser, platform, platform.expect())
    assert dance.response.status_code == 200
    with caplog.at_level(logging.WARNING, logger="mentor.lti.router"):
        replayed = browser.post(f"{platform.tool_url}/lti/launch", data=dance.form)
    refusal(replayed, caplog, "nonce_replayed", 401)


def test_a_launch_whose_platform_keys_cannot_be_fetched_is_refused(platform, browser, caplog) -> None:
    platform.jwks_down = True
    with caplog.at_level(logging.WARNING):
        refusal(launch(browser, platform, platform.expect()).response, caplog, "jwks_unavailable", 401)
    assert "cannot fetch the platform JWKS" in caplog.text


@pytest.mark.parametrize(
    ("form", "reason"),
    [
        ({"state": "x"}, "missing_parameter"),
        ({"id_token": "x"}, "missing_parameter"),
        ({"id_token": "x", "state": "not-a-state-mentor-issued"}, "bad_state"),
        ({"error": "login_required", "error_description": "no session", "state": "x"}, "platform_error"),
    ],
)
def test_a_launch_post_without_a_valid_state_is_refused(tool, browser, caplog, form, reason) -> None:
    with caplog.at_level(logging.WARNING, logger="mentor.lti.router"):
        refusal(browser.post(f"{tool}/lti/launch", data=form), caplog, reason, 400)


def test_a_state_signed_by_another_deployment_of_mentor_is_refused(tool, browser, caplog) -> None:
    forged = jwt.encode(
        {"aud": "mentor-lti-state", "exp": NOW + 600, "pi": "x", "cid": "y", "nh": "", "bh": ""},
        "another-key-of-at-least-32-bytes-long!!",
        algorithm="HS256",
    )
    with caplog.at_level(logging.WARNING, logger="mentor.lti.router"):
        refusal(browser.post(f"{tool}/lti/launch", data={"id_token": "x", "state": forged}), caplog, "bad_state", 400)


@pytest.mark.parametrize(
    ("change", "reason", "status"),
    [
        ({"iss": "https://unregistered.example"}, "unknown_issuer", 404),
        ({"client_id": "unregistered-client"}, "unknown_client", 404),
        ({"login_hint": ""}, "missing_parameter", 400),
        ({"target_link_uri": ""}, "missing_parameter", 400),
    ],
)
def test_a_login_initiation_from_an_unknown_platform_or_missing_a_parameter_is_refused(
    platform, browser, caplog, change, reason, status
) -> None:
    url = httpx.URL(platform.login_url(platform.expect()))
    with caplog.at_level(logging.WARNING, logger="mentor.lti.router"):
        response = browser.get(url.copy_merge_params(change), follow_redirects=False)
    refusal(response, caplog, reason, status)


def test_login_initiation_by_form_post_sets_a_partitioned_cross_site_cookie(platform, browser) -> None:
    hint = platform.expect()
    params = dict(httpx.URL(platform.login_url(hint)).params)
    started = browser.post(f"{platform.tool_url}/lti/login", data=params, follow_redirects=False)
    assert started.status_code == 302
    cookie = started.headers["set-cookie"].lower()
    assert all(part in cookie for part in ("secure", "httponly", "samesite=none", "partitioned", "path=/lti/launch"))
    assert "state=" in started.headers["location"] and "nonce=" in started.headers["location"]


def test_an_instructor_launch_of_a_link_still_opens_the_box(platform, browser) -> None:
    response = launch(browser, platform, platform.expect(roles=[INSTRUCTOR], custom={"module_id": MODULE_ID})).response
    assert response.status_code == 200
    assert "<mentor-chat" in response.text


def test_the_tool_publishes_its_public_key(tool) -> None:
    keys = httpx.get(f"{tool}/lti/jwks").json()["keys"]
    assert keys and all(k["kty"] == "RSA" and k["alg"] == "RS256" and k["use"] == "sig" and "d" not in k for k in keys)


def test_lti_routes_say_plainly_when_lti_is_off(client) -> None:
    """The session app has no learner token secret: LTI is off, with a 404 page saying why, never a 500."""
    for response in (client.get("/lti/jwks"), client.post("/lti/launch", data={"id_token": "x", "state": "y"})):
        assert response.status_code == 404
        assert "MENTOR_LEARNER_TOKEN_SECRET" in response.text
