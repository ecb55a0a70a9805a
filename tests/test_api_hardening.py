"""Hostile clients and outages over real HTTP (uvicorn): plain 4xx/503, never a 500, connections left usable."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import httpx
import pytest
import uvicorn
from sqlalchemy import create_engine, text

from mentor.api import create_app
from mentor.api import middleware as limits
from mentor.db import make_engine
from mentor.signals.schema import migrate

from .conftest import CORPUS, free_port
from .proxy import Proxy

PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@contextmanager
def serving(app) -> Iterator[str]:
    """Serve `app` with a real uvicorn on a free port (lifespan included); yield its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture(scope="module")
def base_url(runtime) -> Iterator[str]:
    app = create_app(runtime.settings, runtime=runtime)

    @app.get("/test-only/boom", include_in_schema=False)
    def boom() -> None:  # a route with a bug, to see what an unexpected exception does to the connection
        raise RuntimeError("a bug")

    with serving(app) as url:
        yield url


@pytest.fixture(scope="module")
def auth(runtime) -> dict[str, str]:
    return {"Authorization": f"Bearer {runtime.analyst_token}"}


class Wire:
    """One raw keep-alive connection: send bytes, read one whole HTTP/1.1 response (status, headers, body)."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=20)
        self.buffer = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self) -> bool:
        chunk = self.sock.recv(65536)
        self.buffer += chunk
        return bool(chunk)

    def response(self) -> tuple[int, dict[str, str], bytes]:
        while b"\r\n\r\n" not in self.buffer:
            if not self._fill():
                raise ConnectionError(f"closed before a response (got {self.buffer[:80]!r})")
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}
        length = int(headers.get("content-length", 0))
        while len(self.buffer) < length:
            if not self._fill():
                raise ConnectionError("closed inside a body")
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return int(status_line.split()[1]), headers, body

    def closed_by_server(self) -> bool:
        try:
            return not self._fill()
        except ConnectionError:
            return True

    def close(self) -> None:
        self.sock.close()


def get(path: str, headers: str = "") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: mentor\r\n{headers}\r\n".encode()


def post(path: str, body: bytes, headers: str = "") -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: mentor\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + headers.encode() + b"\r\n" + body


HEALTH = get("/healthz")
DELETE = b"DELETE /v1/learners/x HTTP/1.1\r\nHost: mentor\r\n"

# ---------------------------------------------------------------------------------------------- analyst filters


def test_dates_without_a_time_zone_mean_utc(base_url, auth, runtime) -> None:
    asked = httpx.post(f"{base_url}/v1/chat", json={"message": "what does ZeRO stage 1 shard?", "learner_id": "tz"})
    assert asked.status_code == 200 and runtime.writer.flush()
    today = datetime.now(UTC).date()
    tomorrow = today + timedelta(days=1)
    for since, until in [(today.isoformat(), tomorrow.isoformat()), (f"{today}T00:00:00", f"{tomorrow}T00:00:00")]:
        params = {"since": since, "until": until}
        page = httpx.get(f"{base_url}/v1/signals/questions", params=params | {"limit": 500}, headers=auth)
        assert page.status_code == 200, page.text
        assert asked.json()["question_id"] in [q["question_id"] for q in page.json()["items"]]
        assert httpx.get(f"{base_url}/v1/signals/summary", params=params, headers=auth).status_code == 200
        exported = httpx.get(f"{base_url}/v1/signals/export", params=params, headers=auth)
        assert exported.status_code == 200 and asked.json()["question_id"] in exported.text
    # A date alone is midnight UTC: a question asked today is not before today.
    earlier = httpx.get(f"{base_url}/v1/signals/questions", params={"until": today.isoformat()}, headers=auth)
    assert asked.json()["question_id"] not in [q["question_id"] for q in earlier.json()["items"]]


@pytest.mark.parametrize("route", ["questions", "summary", "export"])
@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ({"since": "2025-01-02", "until": "2025-01-01"}, "since: must not be after until"),
        ({"since": "2025-01-01T10:00:00+02:00", "until": "2025-01-01T07:30:00Z"}, "since: must not be after until"),
        ({"since": "9999-12-31T23:00:00-05:00"}, "since: out of range"),
        ({"until": "0001-01-01T00:30:00+01:00"}, "until: out of range"),
        ({"since": "yesterday"}, "since"),
    ],
)
def test_impossible_ranges_are_422_before_any_byte(base_url, auth, route, params, fragment) -> None:
    with httpx.Client() as client:  # one connection: it must still serve the next request
        response = client.get(f"{base_url}/v1/signals/{route}", params=params, headers=auth)
        assert response.status_code == 422 and fragment in response.json()["message"]
        assert client.get(f"{base_url}/healthz").status_code == 200


# ---------------------------------------------------------------------------------------------- database outage


def analyst_app_on(runtime, url: str):
    engine = make_engine(url)
    return create_app(runtime.settings, runtime=replace(runtime, database=engine)), engine


def assert_all_analyst_routes(url: str, auth: dict, *, database_up: bool) -> None:
    with httpx.Client(base_url=url, headers=auth, timeout=30) as client:
        for method, path in [
            ("GET", "/v1/signals/questions"),
            ("GET", "/v1/signals/summary"),
            ("GET", "/v1/signals/export?format=csv"),
            ("DELETE", "/v1/learners/someone"),
        ]:
            response = client.request(method, path)
            if database_up:
                assert response.is_success, (path, response.status_code, response.text)
                continue
            assert response.status_code == 503, (path, response.status_code, response.text)
            assert response.headers["retry-after"] == "5"
            assert response.json() == {
                "error": "not_ready",
                "message": "the signals database cannot be used right now; please try again shortly",
            }
        assert client.get("/healthz").status_code == 200  # same connection, still usable


@pytest.mark.parametrize("created", ["2024-01-01", "2024-01-01T00:00:00", "9999-12-31T23:00:00-05:00", 7])
def test_a_crafted_cursor_is_422(base_url, auth, created) -> None:
    import base64

    cursor = base64.urlsafe_b64encode(json.dumps([created, "x"]).encode()).decode()
    response = httpx.get(f"{base_url}/v1/signals/questions", params={"cursor": cursor}, headers=auth)
    assert response.status_code == 422, response.text
    assert "cursor" in response.json()["message"]


def test_analyst_routes_answer_503_when_the_database_is_unreachable(runtime, auth) -> None:
    app, _ = analyst_app_on(runtime, "postgresql+psycopg://nobody@127.0.0.1:1/none")
    with serving(app) as url:
        assert_all_analyst_routes(url, auth, database_up=False)


def test_analyst_routes_answer_503_while_postgresql_is_cut_and_recover(runtime, auth) -> None:
    schema = f"mentor_hard_{uuid.uuid4().hex[:8]}"
    admin = create_engine(PG, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f"CREATE SCHEMA {schema}"))
    proxy = Proxy(5432)
    proxy.up()
    try:
        app, engine = analyst_app_on(
            runtime, f"postgresql+psycopg://postgres@127.0.0.1:{proxy.port}/test?options=-csearch_path%3D{schema}"
        )
        migrate(engine)
        with serving(app) as url:
            assert_all_analyst_routes(url, auth, database_up=True)
            proxy.down()
            assert_all_analyst_routes(url, auth, database_up=False)
            proxy.up()
            assert_all_analyst_routes(url, auth, database_up=True)
        engine.dispose()
    finally:
        proxy.down()
        with admin.connect() as connection:
            connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


# ---------------------------------------------------------------------------------------------- keep-alive


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (get("/test-only/boom"), 500),
        (get("/v1/signals/questions"), 401),
        (get("/v1/signals/questions?since=2025-01-02&until=2025-01-01", "Authorization: Bearer {token}\r\n"), 422),
        (get("/no/such/path"), 404),
        (b"PUT /healthz HTTP/1.1\r\nHost: mentor\r\nContent-Length: 3\r\n\r\nabc", 405),
        (post("/v1/tools/no_such_calculator", b'{"params": "7B"}'), 422),
        (post("/v1/tools/training_memory", b"[" * 30_000 + b"]" * 30_000), 422),
        (post("/v1/chat", b'{"message": "hi", "colour": "red"}'), 422),
        (post("/v1/chat", b'{"message": "\xff"}'), 422),
        (post("/v1/questions/nope/feedback", b'{"rating": "up"}'), 422),
        (DELETE + b"Content-Length: 5\r\n\r\nhello", 401),
        (DELETE + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 401),
    ],
    ids=[
        "500-bug",
        "401-no-token",
        "422-range",
        "404",
        "405-with-body",
        "422-unknown-calculator",
        "422-deep-json",
        "422-extra-field",
        "422-not-utf8",
        "422-bad-question-id",
        "401-unread-body",
        "401-unread-chunked-body",
    ],
)
def test_an_error_leaves_the_connection_usable(base_url, runtime, request_bytes, status) -> None:
    wire = Wire(base_url)
    try:
        wire.send(request_bytes.replace(b"{token}", runtime.analyst_token.encode()))
        got, headers, body = wire.response()
        assert got == status and set(json.loads(body)) == {"error", "message"}
        assert "Traceback" not in body.decode()
        assert headers.get("connection") != "close"
        for _ in range(3):  # the next requests on the same connection are answered
            wire.send(HEALTH)
            assert wire.response()[0] == 200
    finally:
        wire.close()


@pytest.mark.parametrize("path", ["/v1/chat", "/v1/chat/stream", f"/v1/questions/{'a' * 32}/feedback"])
@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b'{"message": "\xff\xfe"}', "not UTF-8"),
        (b'{"message": ' + b"[" * 30_000 + b"]" * 30_000 + b"}", "nested too deeply"),
        (b'{"message": "hi", "rating": "up", "learner_id": ' + b"9" * 5_000 + b"}", "more than 4300 digits"),
        (b'{"message": "hi", "rating": "up"', "not valid JSON"),
    ],
    ids=["not-utf8", "deep", "5000-digits", "truncated"],
)
def test_json_bodies_that_cannot_be_decoded_are_422_on_every_route(base_url, path, body, fragment) -> None:
    response = httpx.post(f"{base_url}{path}", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 422 and response.json()["error"] == "invalid_input"
    assert fragment in response.json()["message"]


def test_a_refused_expect_100_continue_closes_cleanly_without_inviting_the_body(base_url) -> None:
    wire = Wire(base_url)
    try:
        wire.send(
            b"DELETE /v1/learners/x HTTP/1.1\r\nHost: mentor\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"
        )
        status, headers, _ = wire.response()
        assert status == 401 and headers["connection"] == "close"  # no "100 Continue" first
        assert wire.closed_by_server()
    finally:
        wire.close()


# ---------------------------------------------------------------------------------------------- limits


def test_a_body_shorter_than_its_content_length_gets_408(base_url, monkeypatch) -> None:
    monkeypatch.setattr(limits, "BODY_TIMEOUT_S", 1.0)  # the server runs in this process; 10 s in production
    for path in ("/v1/chat", "/v1/tools/training_memory"):
        wire = Wire(base_url)
        try:
            started = time.monotonic()
            wire.send(post(path, b'{"message": "what is ZeRO?"}')[:-10])
            status, headers, body = wire.response()
            assert status == 408 and "request body" in json.loads(body)["message"]
            assert 0.9 < time.monotonic() - started < 5 and headers["connection"] == "close"
            assert wire.closed_by_server()
        finally:
            wire.close()


def test_an_answer_sent_before_the_body_has_come_closes_the_connection(base_url) -> None:
    wire = Wire(base_url)  # a route that refuses without reading: the rest of the body would hold the connection
    try:
        wire.send(DELETE + b"Content-Length: 100\r\n\r\nonly ten b")
        status, headers, _ = wire.response()
        assert status == 401 and headers["connection"] == "close"
        started = time.monotonic()
        assert wire.closed_by_server() and time.monotonic() - started < 2
    finally:
        wire.close()


def test_an_oversized_authorization_header_is_431(base_url) -> None:
    wire = Wire(base_url)
    try:
        wire.send(get("/v1/signals/questions", f"Authorization: Bearer {'a' * 1_000_000}\r\n"))
        status, headers, body = wire.response()
        assert status == 431 and headers["connection"] == "close" and "headers" in json.loads(body)["message"]
    finally:
        wire.close()


def test_oversized_bodies_are_413_without_reading_them(base_url) -> None:
    wire = Wire(base_url)
    try:  # announced: refused before a byte of the body is read
        wire.send(b"POST /v1/chat HTTP/1.1\r\nHost: mentor\r\nContent-Type: application/json\r\n")
        wire.send(b"Content-Length: 10000000\r\n\r\n{")
        status, headers, _ = wire.response()
        assert status == 413 and headers["connection"] == "close"
    finally:
        wire.close()
    wire = Wire(base_url)
    try:  # chunked: no length up front, refused once it passes the limit
        chunk = b"a" * 8192
        wire.send(b"POST /v1/tools/training_memory HTTP/1.1\r\nHost: mentor\r\nTransfer-Encoding: chunked\r\n\r\n")
        wire.send(b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(10)))
        status, headers, _ = wire.response()
        assert status == 413 and headers["connection"] == "close"
    finally:
        wire.close()
    wire = Wire(base_url)
    try:  # uvicorn (httptools) refuses a request target over 64 KiB before the app sees it
        wire.send(get("/v1/search?q=" + "z" * 70_000))
        status, headers, _ = wire.response()
        assert status == 400 and headers["connection"] == "close"
    finally:
        wire.close()


def test_the_limits_leave_room_for_the_largest_legitimate_requests(base_url) -> None:
    # 4,000 characters outside the BMP: 48,000 bytes of \\u escapes in the body, 48,000 percent-encoded in a URL.
    question = "what is 𝔷𝔢𝔯𝔬? " + "𝔷" * 3_986
    body = json.dumps({"message": question, "learner_id": "x" * 200, "conversation_id": None}).encode()
    assert 45_000 < len(body) < limits.MAX_BODY_BYTES
    assert httpx.post(f"{base_url}/v1/chat", content=body, headers={"content-type": "application/json"}).is_success
    search = httpx.get(f"{base_url}/v1/search", params={"q": question})
    assert search.status_code == 200, search.text


# ---------------------------------------------------------------------------------------------- headers


def test_every_response_carries_the_security_headers(base_url, auth) -> None:
    responses = {
        "json": httpx.get(f"{base_url}/v1/modules"),
        "404": httpx.get(f"{base_url}/nope"),
        "401": httpx.get(f"{base_url}/v1/signals/summary"),
        "422": httpx.post(f"{base_url}/v1/chat", json={}),
        "500": httpx.get(f"{base_url}/test-only/boom"),
        "analyst": httpx.get(f"{base_url}/v1/signals/questions", headers=auth),
        "export": httpx.get(f"{base_url}/v1/signals/export", params={"format": "csv"}, headers=auth),
        "stream": httpx.post(f"{base_url}/v1/chat/stream", json={"message": "what is ZeRO?"}),
        "docs": httpx.get(f"{base_url}/docs"),
    }
    for name, response in responses.items():
        assert response.headers["x-content-type-options"] == "nosniff", name
        assert response.headers["x-frame-options"] == "DENY", name
        assert "frame-ancestors 'none'" in response.headers["content-security-policy"], name
        assert response.headers["referrer-policy"] == "no-referrer", name
    for name in ("analyst", "export", "401", "stream"):
        assert responses[name].headers["cache-control"] == "no-store", name
    docs_csp = responses["docs"].headers["content-security-policy"]
    assert responses["docs"].status_code == 200 and "script-src 'self' 'sha256-" in docs_csp
    assert responses["json"].headers["content-security-policy"].startswith("default-src 'none'")
    assert responses["401"].headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize("name", ["token", "access_token", "analyst_token", "authorization"])
def test_the_analyst_token_is_never_taken_from_a_query_string(base_url, runtime, name) -> None:
    for path in ("/v1/signals/questions", "/v1/signals/summary", "/v1/signals/export"):
        response = httpx.get(f"{base_url}{path}", params={name: runtime.analyst_token})
        assert response.status_code == 401, (path, name)
        bearer = httpx.get(f"{base_url}{path}", params={name: f"Bearer {runtime.analyst_token}"})
        assert bearer.status_code == 401, (path, name)


# ---------------------------------------------------------------------------------------------- access log


@pytest.mark.slow
def test_mentor_serve_access_log_has_no_query_strings_or_learner_ids(tmp_path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "MENTOR_DATA_DIR": str(tmp_path / "data"),
        "MENTOR_CORPUS_DIR": str(CORPUS),
        "MENTOR_PORT": str(port),
        "MENTOR_ANALYST_TOKEN": "log-test-token-of-at-least-32-bytes",
        "HF_HUB_OFFLINE": "1",
    }
    mentor = os.path.join(os.path.dirname(sys.executable), "mentor")
    out, err = tmp_path / "stdout.log", tmp_path / "stderr.log"
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        process = subprocess.Popen([mentor, "serve"], env=env, stdout=stdout, stderr=stderr)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None and time.monotonic() < deadline, err.read_text()[-2000:]
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
        auth = {"Authorization": "Bearer log-test-token-of-at-least-32-bytes"}
        assert httpx.get(f"{url}/v1/search", params={"q": "mail me at leak.search@example.net"}).status_code == 200
        assert httpx.delete(f"{url}/v1/learners/erase.me@example.com", headers=auth).status_code == 204
        feedback = f"{url}/v1/questions/{'a' * 32}/feedback"
        assert httpx.post(feedback, json={"rating": "up", "learner_id": "fb@example.org"}).status_code == 404
        assert httpx.get(f"{url}/v1/learners/typo@example.com/x").status_code == 404
        assert httpx.get(f"{url}/v1/signals/questions?since=2024-01-01&module_id=a@b.c", headers=auth).is_success
    finally:
        process.terminate()
        process.wait(timeout=20)
    logged = out.read_text() + err.read_text()
    assert '"DELETE /v1/learners/{learner_id} HTTP/1.1" 204' in logged, logged[-3000:]
    assert '"GET /v1/search HTTP/1.1" 200' in logged and '"GET /v1/signals/questions HTTP/1.1" 200' in logged
    assert '"POST /v1/questions/{question_id}/feedback HTTP/1.1" 404' in logged
    assert '"GET … HTTP/1.1" 404' in logged
    for leak in ("example.", "leak.search", "erase.me", "typo", "?q=", "?since", "a" * 32):
        assert leak not in logged.split("Uvicorn running on")[-1], leak
