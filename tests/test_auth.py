"""Learner identity: learner tokens (mentor/auth.py), the trust rules of learner routes, `mentor token`, CORS."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import jwt
import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from typer.testing import CliRunner

from mentor.api import create_app
from mentor.auth import learner_from_token, mint_learner_token
from mentor.cli import app as cli_app
from mentor.errors import InvalidInput, Unauthorized
from mentor.settings import Settings

from .chat_helpers import serve
from .conftest import MODULE_ID

SECRET = "learner-token-secret-for-tests-0123456789"  # 32+ bytes: PyJWT warns about shorter HMAC keys
SERVER_KEY = "server-key-for-tests-of-at-least-32-bytes"
AUDIENCE = "mentor"
ORIGIN = "https://learn.example.org"
QUESTION = "Why keep an fp32 master copy of the weights?"
DAY_S = 86_400
MAX_AGE_S = Settings.model_fields["learner_token_max_age_s"].default  # MENTOR_LEARNER_TOKEN_MAX_AGE_S: a day
TEN_YEARS_S = 10 * 365 * DAY_S


def token_for(learner_id: str, *, ttl_s: int = 600, secret: str = SECRET, audience: str = AUDIENCE) -> str:
    return mint_learner_token(learner_id, secret=secret, audience=audience, ttl_s=ttl_s, max_age_s=MAX_AGE_S)


def signed(**claims) -> str:
    """A token with exactly these claims (on top of sub and aud), as a platform other than mentor might sign it."""
    return jwt.encode({"sub": "alice", "aud": AUDIENCE} | claims, SECRET, algorithm="HS256")


def accepted(token: str) -> str:
    return learner_from_token(token, secret=SECRET, audience=AUDIENCE, max_age_s=MAX_AGE_S)


def bearer(learner_id: str, **kwargs) -> dict[str, str]:
    return {"Authorization": f"Bearer {token_for(learner_id, **kwargs)}"}


def refused(token: str, **kwargs) -> str:
    with pytest.raises(Unauthorized) as caught:
        learner_from_token(
            token,
            secret=kwargs.get("secret", SECRET),
            audience=kwargs.get("audience", AUDIENCE),
            max_age_s=MAX_AGE_S,
        )
    assert token not in caught.value.message  # a token is a credential: never echoed
    return caught.value.message


# --- tokens -----------------------------------------------------------------------------------------------------


def test_a_minted_token_names_its_learner() -> None:
    token = token_for("alice@platform")
    assert accepted(token) == "alice@platform"
    claims = jwt.decode(token, SECRET, algorithms=["HS256"], audience=AUDIENCE)
    assert claims["exp"] - claims["iat"] == 600


def test_expired_tokens_are_refused_after_the_leeway_only() -> None:
    assert accepted(token_for("alice", ttl_s=-5)) == "alice"
    assert "expired" in refused(token_for("alice", ttl_s=-120))


def test_a_token_for_another_audience_is_refused() -> None:
    assert "not meant for this service" in refused(token_for("alice", audience="another-app"))


def test_a_token_signed_with_another_secret_is_refused() -> None:
    assert "signature" in refused(token_for("alice", secret="another-secret-of-at-least-32-bytes!!"))


def test_a_tampered_token_is_refused() -> None:
    header, _, signature = token_for("alice").split(".")
    now = int(time.time())
    forged = jwt.encode({"sub": "victim", "aud": AUDIENCE, "iat": now, "exp": now + 600}, "x" * 32).split(".")[1]
    assert "signature" in refused(f"{header}.{forged}.{signature}")


@pytest.mark.parametrize("missing", ["sub", "exp", "iat", "aud"])
def test_a_token_without_a_required_claim_is_refused(missing: str) -> None:
    now = int(time.time())
    claims = {"sub": "alice", "aud": AUDIENCE, "iat": now, "exp": now + 600}
    del claims[missing]
    assert f"no '{missing}' claim" in refused(jwt.encode(claims, SECRET, algorithm="HS256"))


@pytest.mark.parametrize(
    "token",
    [
        "not-a-token",
        "a.b.c",
        # alg "none": unsigned, must never be accepted whatever the token claims
        jwt.encode(
            {"sub": "alice", "aud": AUDIENCE, "iat": int(time.time()), "exp": 4102444800}, None, algorithm="none"
        ),
        # a sub that is not a string
        jwt.encode({"sub": 42, "aud": AUDIENCE, "iat": int(time.time()), "exp": 4102444800}, SECRET, algorithm="HS256"),
    ],
)
def test_malformed_tokens_are_refused(token: str) -> None:
    assert "malformed" in refused(token)


def test_a_sub_outside_the_learner_id_bounds_is_refused_and_not_minted() -> None:
    empty = signed(sub="", iat=int(time.time()), exp=int(time.time()) + 600)
    assert "sub must be 1-200 characters" in refused(empty)
    with pytest.raises(InvalidInput):
        token_for("x" * 201)


def test_a_token_must_say_when_it_was_issued_and_live_at_most_the_max_age() -> None:
    now = int(time.time())
    assert accepted(signed(iat=now, exp=now + DAY_S)) == "alice"
    assert "no 'iat' claim" in refused(signed(exp=now + 600))
    assert "lives longer than this service accepts" in refused(signed(iat=now, exp=now + TEN_YEARS_S))
    assert "lives longer" in refused(signed(iat=now - DAY_S, exp=now + 600))  # issued long ago, still unexpired
    # Within the leeway of exp, but issued more than the max age (and its leeway) ago.
    assert "expired" in refused(signed(iat=now - MAX_AGE_S - 40, exp=now - 20))
    assert "not valid yet" in refused(signed(iat=now + 3600, exp=now + 7200))  # issued in the future


def test_no_token_outliving_the_max_age_is_minted() -> None:
    with pytest.raises(InvalidInput) as caught:
        token_for("alice", ttl_s=MAX_AGE_S + 1)
    assert "at most 86400 s" in caught.value.message
    assert accepted(token_for("alice", ttl_s=MAX_AGE_S)) == "alice"
    # A server configured with a shorter max age refuses what another minted for longer.
    with pytest.raises(Unauthorized, match="lives longer"):
        learner_from_token(token_for("alice", ttl_s=600), secret=SECRET, audience=AUDIENCE, max_age_s=300)


# --- learner routes with learner tokens required -----------------------------------------------------------------


@pytest.fixture(scope="module")
def secured(runtime) -> Iterator[TestClient]:
    """An app requiring learner tokens, with a server key and one allowed browser origin."""
    settings = runtime.settings.model_copy(
        update={
            "learner_token_secret": SecretStr(SECRET),
            "server_key": SecretStr(SERVER_KEY),
            "cors_origins": f"{ORIGIN}, https://other.example.org/",
        }
    )
    with TestClient(create_app(settings, runtime=runtime)) as client:
        yield client


def ask(client, *, headers: dict | None = None, **body) -> httpx.Response:
    return client.post("/v1/chat", json={"module_id": MODULE_ID, "message": QUESTION, **body}, headers=headers)


def test_the_session_route_says_which_mode_the_server_is_in(secured, client) -> None:
    assert secured.get("/v1/session").json() == {"learner_tokens": True}
    assert client.get("/v1/session").json() == {"learner_tokens": False}


def test_a_raw_learner_id_is_refused_without_the_server_key(secured) -> None:
    for path in ("/v1/chat", "/v1/chat/stream"):
        response = secured.post(path, json={"module_id": MODULE_ID, "message": QUESTION, "learner_id": "victim"})
        assert response.status_code == 401, response.text
        assert response.json()["error"] == "unauthorized" and "Bearer" in response.json()["message"]
        assert response.headers["www-authenticate"] == "Bearer"


def test_a_raw_learner_id_is_taken_with_the_server_key_only(secured) -> None:
    wrong = ask(secured, learner_id="alice", headers={"X-Mentor-Server-Key": "guess"})
    assert wrong.status_code == 401 and "X-Mentor-Server-Key" in wrong.json()["message"]
    first = ask(secured, learner_id="server-alice", headers={"X-Mentor-Server-Key": SERVER_KEY})
    assert first.status_code == 200, first.text
    # The server named the same learner a token names: one learner, so one conversation.
    follow_up = ask(secured, headers=bearer("server-alice"), conversation_id=first.json()["conversation_id"])
    assert follow_up.status_code == 200, follow_up.text


def test_no_token_and_no_learner_id_is_an_anonymous_learner(secured) -> None:
    assert ask(secured).status_code == 200


def test_a_token_names_the_learner_and_its_conversations(secured) -> None:
    first = ask(secured, headers=bearer("alice"))
    assert first.status_code == 200, first.text
    conversation = first.json()["conversation_id"]
    # A second token for the same learner (a fresh one the platform minted later) continues the conversation.
    follow_up = ask(secured, headers=bearer("alice", ttl_s=900), conversation_id=conversation, message="And why?")
    assert follow_up.status_code == 200, follow_up.text
    assert follow_up.json()["conversation_id"] == conversation
    # Another learner cannot see it: not found, as if it did not exist.
    intruder = ask(secured, headers=bearer("mallory"), conversation_id=conversation)
    assert intruder.status_code == 404, intruder.text
    # Nor can an anonymous caller.
    assert ask(secured, conversation_id=conversation).status_code == 404


def test_a_body_learner_id_must_match_the_token(secured) -> None:
    assert ask(secured, headers=bearer("alice"), learner_id="alice").status_code == 200
    mismatch = ask(secured, headers=bearer("alice"), learner_id="victim")
    assert mismatch.status_code == 401 and "does not match" in mismatch.json()["message"]
    # Even a trusted server cannot send a token for one learner and a learner_id for another.
    both = ask(secured, headers={**bearer("alice"), "X-Mentor-Server-Key": SERVER_KEY}, learner_id="victim")
    assert both.status_code == 401


def test_a_bad_token_is_a_401_that_says_why_without_echoing_it(secured) -> None:
    expired = token_for("alice", ttl_s=-3600)
    response = ask(secured, headers={"Authorization": f"Bearer {expired}"})
    assert response.status_code == 401 and "expired" in response.json()["message"]
    assert expired not in response.text
    forged = token_for("alice", secret="another-secret-of-at-least-32-bytes!!")
    assert ask(secured, headers={"Authorization": f"Bearer {forged}"}).status_code == 401


def test_only_tokens_with_an_iat_and_at_most_a_days_life_are_taken(secured) -> None:
    now = int(time.time())
    ten_years = signed(sub="decade-dan", iat=now, exp=now + TEN_YEARS_S)
    response = ask(secured, headers={"Authorization": f"Bearer {ten_years}"})
    assert response.status_code == 401, response.text
    assert "lives longer than this service accepts" in response.json()["message"] and ten_years not in response.text
    no_iat = signed(sub="decade-dan", exp=now + 600)
    response = ask(secured, headers={"Authorization": f"Bearer {no_iat}"})
    assert response.status_code == 401 and "no 'iat' claim" in response.json()["message"]
    a_day = signed(sub="decade-dan", iat=now, exp=now + DAY_S)
    assert ask(secured, headers={"Authorization": f"Bearer {a_day}"}).status_code == 200


def test_the_analyst_token_and_learner_tokens_open_only_their_own_routes(secured, runtime) -> None:
    # A learner token is not an analyst token...
    assert secured.get("/v1/signals/summary", headers=bearer("alice")).status_code == 401
    # ...and the analyst token is not a learner token.
    analyst = {"Authorization": f"Bearer {runtime.analyst_token}"}
    response = ask(secured, headers=analyst)
    assert response.status_code == 401 and "malformed" in response.json()["message"]


def test_feedback_goes_by_the_token_too(secured) -> None:
    question = ask(secured, headers=bearer("feedback-fay")).json()["question_id"]
    url = f"/v1/questions/{question}/feedback"
    assert secured.post(url, json={"rating": "up"}, headers=bearer("feedback-fay")).status_code == 201
    assert secured.post(url, json={"rating": "down"}, headers=bearer("mallory")).status_code == 404
    raw = secured.post(url, json={"rating": "down", "learner_id": "feedback-fay"})
    assert raw.status_code == 401
    trusted = secured.post(
        url, json={"rating": "down", "learner_id": "feedback-fay"}, headers={"X-Mentor-Server-Key": SERVER_KEY}
    )
    assert trusted.status_code == 201


def test_without_the_secret_learner_id_is_taken_as_sent_and_tokens_are_not_read(client) -> None:
    first = ask(client, learner_id="plain-pat", headers=bearer("someone-else"))
    assert first.status_code == 200, first.text
    follow_up = ask(client, learner_id="plain-pat", conversation_id=first.json()["conversation_id"])
    assert follow_up.status_code == 200
    assert ask(client, learner_id="not-pat", conversation_id=first.json()["conversation_id"]).status_code == 404


def test_the_openapi_document_shows_each_route_its_own_credentials(client) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    optional_learner = [{"LearnerToken": []}, {"ServerKey": []}, {}]
    assert paths["/v1/chat"]["post"]["security"] == optional_learner
    assert paths["/v1/chat/stream"]["post"]["security"] == optional_learner
    assert paths["/v1/questions/{question_id}/feedback"]["post"]["security"] == optional_learner
    assert "LearnerToken" not in str(paths["/v1/signals/summary"]["get"]["security"])


def test_the_token_flow_over_real_http_and_the_stream(runtime) -> None:
    settings = runtime.settings.model_copy(update={"learner_token_secret": SecretStr(SECRET)})
    with serve(create_app(settings, runtime=runtime)) as url, httpx.Client(base_url=url, timeout=60) as http:
        body = {"module_id": MODULE_ID, "message": QUESTION}
        with http.stream("POST", "/v1/chat/stream", json=body, headers=bearer("streaming-sam")) as response:
            assert response.status_code == 200
            text = "".join(response.iter_text())
        assert "event: done" in text
        meta = text.split("event: meta\ndata: ", 1)[1].split("\n", 1)[0]
        conversation = json.loads(meta)["conversation_id"]
        follow_up = http.post(
            "/v1/chat", json={**body, "conversation_id": conversation}, headers=bearer("streaming-sam")
        )
        assert follow_up.status_code == 200 and follow_up.json()["conversation_id"] == conversation
        raw = http.post("/v1/chat/stream", json={**body, "learner_id": "streaming-sam"})
        assert raw.status_code == 401 and raw.headers["content-type"].startswith("application/json")


# --- mentor token --------------------------------------------------------------------------------------------------


def test_mentor_token_mints_what_the_server_accepts(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("MENTOR_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("MENTOR_LEARNER_TOKEN_SECRET", SECRET)
    result = CliRunner().invoke(cli_app, ["token", "cli-carla", "--ttl", "2h"])
    assert result.exit_code == 0, result.output
    token = result.stdout.strip()
    assert accepted(token) == "cli-carla"
    claims = jwt.decode(token, SECRET, algorithms=["HS256"], audience=AUDIENCE)
    assert claims["exp"] - claims["iat"] == 7200
    default = CliRunner().invoke(cli_app, ["token", "cli-carla"])
    claims = jwt.decode(default.stdout.strip(), SECRET, algorithms=["HS256"], audience=AUDIENCE)
    assert claims["exp"] - claims["iat"] == 3600


def test_mentor_token_explains_a_missing_secret_or_a_bad_ttl(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("MENTOR_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("MENTOR_LEARNER_TOKEN_SECRET", raising=False)
    unset = CliRunner().invoke(cli_app, ["token", "cli-carla"])
    assert unset.exit_code == 1
    assert unset.output.strip().splitlines() == [
        "error: MENTOR_LEARNER_TOKEN_SECRET is not set; a learner token needs the secret the server checks"
    ]
    monkeypatch.setenv("MENTOR_LEARNER_TOKEN_SECRET", SECRET)
    bad = CliRunner().invoke(cli_app, ["token", "cli-carla", "--ttl", "soon"])
    assert bad.exit_code == 2 and bad.output.startswith("error: --ttl:")
    too_long = CliRunner().invoke(cli_app, ["token", "cli-carla", "--ttl", "2d"])
    assert too_long.exit_code == 2
    assert too_long.output.strip().splitlines() == [
        "error: a learner token may live at most 86400 s (MENTOR_LEARNER_TOKEN_MAX_AGE_S)"
    ]
    monkeypatch.setenv("MENTOR_LEARNER_TOKEN_MAX_AGE", "172800")
    assert CliRunner().invoke(cli_app, ["token", "cli-carla", "--ttl", "2d"]).exit_code == 0


# --- CORS --------------------------------------------------------------------------------------------------------


def preflight(client, origin: str, headers: str = "authorization,content-type") -> httpx.Response:
    return client.options(
        "/v1/chat/stream",
        headers={"Origin": origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": headers},
    )


def test_a_preflight_from_an_allowed_origin_is_granted(secured) -> None:
    for origin in (ORIGIN, "https://other.example.org"):  # the setting's trailing slash does not matter
        response = preflight(secured, origin)
        assert response.status_code == 200, response.text
        assert response.headers["access-control-allow-origin"] == origin
        assert "POST" in response.headers["access-control-allow-methods"]
        allowed = response.headers["access-control-allow-headers"].lower()
        assert "authorization" in allowed and "content-type" in allowed
        assert "access-control-allow-credentials" not in response.headers


def test_a_preflight_from_another_origin_gets_no_allow_origin(secured, client) -> None:
    for app_client in (secured, client):  # the default allows no other origin at all
        response = preflight(app_client, "https://evil.example")
        assert response.status_code != 405
        assert "access-control-allow-origin" not in response.headers


def test_browsers_may_not_send_the_server_key(secured) -> None:
    response = preflight(secured, ORIGIN, headers="content-type,x-mentor-server-key")
    assert response.status_code == 400
    assert "x-mentor-server-key" not in response.headers.get("access-control-allow-headers", "").lower()


def test_answers_carry_allow_origin_for_allowed_origins_only(secured) -> None:
    allowed = ask(secured, headers={**bearer("cors-cleo"), "Origin": ORIGIN})
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == ORIGIN
    assert "retry-after" in allowed.headers["access-control-expose-headers"].lower()
    assert "origin" in allowed.headers["vary"].lower()
    other = ask(secured, headers={**bearer("cors-cleo"), "Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in other.headers


def test_errors_reach_an_allowed_page_with_allow_origin(secured) -> None:
    """A page can only show a refusal's message if the refusal carries the CORS headers too."""
    unauthorized = ask(secured, headers={"Origin": ORIGIN}, learner_id="victim")
    too_big = secured.post(
        "/v1/chat",
        content=b"{" + b" " * (65 * 1024) + b"}",
        headers={"Origin": ORIGIN, "Content-Type": "application/json"},
    )
    too_many_headers = secured.get("/v1/modules", headers={"Origin": ORIGIN, "X-Filler": "x" * (17 * 1024)})
    for response, status in ((unauthorized, 401), (too_big, 413), (too_many_headers, 431)):
        assert response.status_code == status
        assert response.headers["access-control-allow-origin"] == ORIGIN
        assert response.json()["error"]
