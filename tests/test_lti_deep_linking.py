"""Deep Linking 2.0 against the platform emulator: an instructor's picker, the signed LtiDeepLinkingResponse the
platform verifies with mentor's JWKS, the placed link launching the module's box; and every refusal on the way."""

from __future__ import annotations

import logging

import jwt
import pytest

from mentor.lti import claims as c

from .conftest import MODULE_ID
from .lti_platform import DELETE, INSTRUCTOR, LEARNER, launch, read_form, running_platform

pytest_plugins = ["tests.lti_fixtures"]


def picker(browser, platform, **kwargs):
    """An instructor's deep-linking launch: the picker page and its signed session."""
    response = launch(browser, platform, platform.expect(c.DEEP_LINKING_REQUEST, roles=[INSTRUCTOR], **kwargs)).response
    assert response.status_code == 200, response.text
    action, fields = read_form(response.text)
    return response, fields["session"]


def refused(response, caplog, reason: str, status: int) -> None:
    assert response.status_code == status, (reason, response.text[:300])
    assert response.headers["content-type"].startswith("text/html")
    assert f"({reason}, {status})" in caplog.text, caplog.text[-2000:]


def test_an_instructor_places_a_module_and_the_link_opens_its_box(platform, browser, tool) -> None:
    page, session = picker(browser, platform)
    assert 'action="/lti/deep-link"' in page.text and f'value="{MODULE_ID}"' in page.text
    posted = browser.post(f"{tool}/lti/deep-link", data={"session": session, "module_id": MODULE_ID})
    assert posted.status_code == 200, posted.text
    action, fields = read_form(posted.text)
    assert action == f"{platform.issuer}/deep-link-return"
    # The page may post to the platform and run its one inline script; nothing else.
    policy = posted.headers["content-security-policy"]
    assert f"form-action {platform.issuer}" in policy and "'sha256-" in policy
    returned = browser.post(action, data=fields)  # the platform checks signature, aud, iss, deployment, data
    assert returned.status_code == 200, (returned.text, platform.deep_link_errors)
    [response] = platform.deep_links
    [item] = response[c.CONTENT_ITEMS]
    assert item["type"] == "ltiResourceLink"
    assert item["custom"] == {"module_id": MODULE_ID}
    assert item["url"] == f"{tool}/lti/launch"
    # The link as placed: the platform launches it with the item's custom parameters.
    box = launch(browser, platform, platform.expect(custom=item["custom"])).response
    assert box.status_code == 200 and f'<mentor-chat module="{MODULE_ID}"' in box.text


def test_a_response_meant_for_one_platform_is_refused_by_another(tool, browser, runtime) -> None:
    """The response names its platform (aud) and deployment: another platform verifying it refuses it."""
    with running_platform(tool) as first, running_platform(tool) as second:
        first.register_with(runtime.database)
        second.register_with(runtime.database)
        _, session = picker(browser, first)
        posted = browser.post(f"{tool}/lti/deep-link", data={"session": session, "module_id": MODULE_ID})
        _, fields = read_form(posted.text)
        answer = browser.post(f"{second.issuer}/deep-link-return", data=fields)
        assert answer.status_code == 400
        assert not second.deep_links
        assert second.deep_link_errors[0].startswith(("InvalidAudienceError", "InvalidIssuerError"))


def test_a_picker_post_with_an_altered_session_is_refused(platform, browser, tool, caplog) -> None:
    """The return URL cannot be pointed at another platform: the session is signed."""
    _, session = picker(browser, platform)
    claims = jwt.decode(session, options={"verify_signature": False})
    forged = jwt.encode(claims | {"ret": "https://evil.example/return"}, "x" * 32, algorithm="HS256")
    with caplog.at_level(logging.WARNING, logger="mentor.lti.router"):
        response = browser.post(f"{tool}/lti/deep-link", data={"session": forged, "module_id": MODULE_ID})
    refused(response, caplog, "bad_deep_link_session", 400)


@pytest.mark.parametrize(
    ("fields", "reason", "status"),
    [
        ({"module_id": MODULE_ID}, "missing_parameter", 400),
        ({"module_id": "no.such.module", "session": "{session}"}, "unknown_module", 404),
        ({"session": "{session}"}, "nothing_picked", 400),
    ],
)
def test_a_picker_post_missing_what_it_needs_is_refused(platform, browser, tool, caplog, fields, reason, status):
    _, session = picker(browser, platform)
    fields = {k: session if v == "{session}" else v for k, v in fields.items()}
    with caplog.at_level(logging.WARNING, logger="mentor.lti.router"):
        refused(browser.post(f"{tool}/lti/deep-link", data=fields), caplog, reason, status)


def test_a_picker_post_after_the_platform_was_removed_is_refused(platform, browser, tool, runtime, caplog) -> None:
    from mentor.lti.registrations import find_registration, remove_registration

    _, session = picker(browser, platform)
    remove_registration(runtime.database, find_registration(runtime.database, platform.issuer, platform.client_id).id)
    with caplog.at_level(logging.WARNING, logger="mentor.lti.router"):
        response = browser.post(f"{tool}/lti/deep-link", data={"session": session, "module_id": MODULE_ID})
    refused(response, caplog, "unknown_registration", 401)


SETTINGS = c.DEEP_LINKING_SETTINGS
BROKEN = [
    ("a learner", {"roles": [LEARNER]}, {}, "not_staff", 403),
    ("no deep_linking_settings", {}, {SETTINGS: DELETE}, "missing_claim", 400),
    (
        "no return URL",
        {},
        {SETTINGS: {"accept_types": ["ltiResourceLink"], "accept_presentation_document_targets": ["iframe"]}},
        "missing_claim",
        400,
    ),
    (
        "no accept_types",
        {},
        {SETTINGS: {"deep_link_return_url": "http://x/r", "accept_presentation_document_targets": ["iframe"]}},
        "missing_claim",
        400,
    ),
    (
        "no presentation targets",
        {},
        {SETTINGS: {"deep_link_return_url": "http://x/r", "accept_types": ["ltiResourceLink"]}},
        "missing_claim",
        400,
    ),
    (
        "links not accepted",
        {},
        {
            SETTINGS: {
                "deep_link_return_url": "http://x/r",
                "accept_types": ["file"],
                "accept_presentation_document_targets": ["iframe"],
            }
        },
        "unsupported_item",
        400,
    ),
]


@pytest.mark.parametrize(
    ("who", "overrides", "reason", "status"), [row[1:] for row in BROKEN], ids=[row[0] for row in BROKEN]
)
def test_a_deep_linking_request_breaking_a_rule_is_refused(platform, browser, caplog, who, overrides, reason, status):
    hint = platform.expect(c.DEEP_LINKING_REQUEST, **({"roles": [INSTRUCTOR]} | who), overrides=overrides)
    with caplog.at_level(logging.WARNING, logger="mentor.lti.router"):
        refused(launch(browser, platform, hint).response, caplog, reason, status)
