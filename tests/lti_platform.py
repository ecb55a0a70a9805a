"""A small LTI 1.3 platform, as Moodle or Canvas plays it towards a tool, served over real HTTP for the tests.

It has its own RSA key and publishes its JWKS; its authorization endpoint answers the tool's OIDC redirect with the
auto-submitting form of an id_token (claims a test may alter: a wrong issuer, another key, a missing claim...); its
course page frames the tool's login initiation in an iframe, as an LMS does; it takes deep-linking responses back
(verifying them with the tool's JWKS, as a platform must) and answers dynamic registration. `launch` drives the whole
OIDC dance with a real HTTP client against a real tool.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from html import escape, unescape
from typing import Any
from urllib.parse import urlencode

import httpx
import jwt
import uvicorn
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse

from mentor.lti import claims as c

from .conftest import free_port

# The learner token secret of the tool under test (LTI needs one).
SECRET = "learner-token-secret-for-lti-tests-0123456789"
LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"
INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"
DELETE = object()  # a claim override that removes the claim


def new_key() -> tuple[rsa.RSAPrivateKey, str]:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048), uuid.uuid4().hex[:12]


@dataclass
class PendingLaunch:
    """What the platform will put in the id_token when the tool's OIDC request for `login_hint` comes back."""

    message_type: str
    user: str
    roles: list[str]
    context_id: str | None
    custom: dict[str, str]
    overrides: dict[str, Any] = field(default_factory=dict)  # claim -> value, or DELETE
    sign_with: rsa.RSAPrivateKey | None = None  # another key than the platform's (a forged launch)
    kid: str | None = None
    hs256_secret: str | None = None  # sign HS256 with this shared secret instead (an algorithm LTI forbids)


@dataclass
class Platform:
    """The emulated platform: its identity at the tool, its keys, and what it received."""

    port: int = field(default_factory=free_port)
    client_id: str = field(default_factory=lambda: f"client-{uuid.uuid4().hex[:8]}")
    deployment_id: str = field(default_factory=lambda: f"deployment-{uuid.uuid4().hex[:6]}")
    tool_url: str = ""
    key: rsa.RSAPrivateKey = field(default=None)  # type: ignore[assignment]
    kid: str = ""
    jwks_down: bool = False
    jwks_fetches: int = 0
    pending: dict[str, PendingLaunch] = field(default_factory=dict)
    deep_links: list[dict[str, Any]] = field(default_factory=list)  # verified deep-linking responses
    deep_link_errors: list[str] = field(default_factory=list)
    registration_token: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    registrations: list[dict[str, Any]] = field(default_factory=list)  # tool configurations posted to us

    def __post_init__(self) -> None:
        if self.key is None:
            self.key, self.kid = new_key()

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def auth_url(self) -> str:
        return f"{self.issuer}/auth"

    @property
    def jwks_url(self) -> str:
        # Its own path per platform: the OS hands a freed port to the next test's platform, and the tool caches keys
        # by JWKS URL, fetching one URL again at most every `platform_keys.RETRY_S` (a kid it lacks was then refused
        # as unknown_key: two emulated platforms sharing one URL, which two real ones never do).
        return f"{self.issuer}/jwks/{self.client_id}"

    def expect(self, message_type: str = c.RESOURCE_LINK_REQUEST, **kwargs: Any) -> str:
        """Prepare a launch (a learner clicking a link) and return its login_hint."""
        hint = uuid.uuid4().hex
        defaults: dict[str, Any] = {"user": "user-42", "roles": [LEARNER], "context_id": "course-101", "custom": {}}
        self.pending[hint] = PendingLaunch(message_type=message_type, **(defaults | kwargs))
        return hint

    def id_token(self, launch: PendingLaunch, *, nonce: str) -> str:
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "aud": self.client_id,
            "sub": launch.user,
            "iat": now,
            "exp": now + 300,
            "nonce": nonce,
            # What mentor must never store: it asks the platform for none of them, and some platforms send them anyway.
            "name": "Janeth Doerfler",
            "email": "janeth@example.edu",
            "picture": "https://lms.example.edu/janeth.png",
            c.MESSAGE_TYPE: launch.message_type,
            c.VERSION: "1.3.0",
            c.DEPLOYMENT_ID: self.deployment_id,
            c.TARGET_LINK_URI: f"{self.tool_url}/lti/launch",
            c.ROLES: launch.roles,
            c.CUSTOM: launch.custom,
        }
        if launch.context_id is not None:
            claims[c.CONTEXT] = {"id": launch.context_id, "label": "PHYS 101", "title": "Physics"}
        if launch.message_type == c.RESOURCE_LINK_REQUEST:
            claims[c.RESOURCE_LINK] = {"id": f"link-{uuid.uuid4().hex[:6]}", "title": "Ask the mentor"}
        else:
            claims[c.DEEP_LINKING_SETTINGS] = {
                "deep_link_return_url": f"{self.issuer}/deep-link-return",
                "accept_types": ["ltiResourceLink"],
                "accept_presentation_document_targets": ["iframe", "window"],
                "accept_multiple": True,
                "data": "opaque-platform-data-7",
            }
        for name, value in launch.overrides.items():
            if value is DELETE:
                claims.pop(name, None)
            else:
                claims[name] = value
        if launch.hs256_secret is not None:
            return jwt.encode(claims, launch.hs256_secret, algorithm="HS256", headers={"kid": launch.kid or self.kid})
        return jwt.encode(
            claims, launch.sign_with or self.key, algorithm="RS256", headers={"kid": launch.kid or self.kid}
        )

    def login_url(self, hint: str) -> str:
        """The tool's login initiation URL the LMS opens (in its iframe) for a launch."""
        query = {
            "iss": self.issuer,
            "login_hint": hint,
            "target_link_uri": f"{self.tool_url}/lti/launch",
            "client_id": self.client_id,
            "lti_message_hint": f"msg-{hint[:6]}",
            "lti_deployment_id": self.deployment_id,
        }
        return f"{self.tool_url}/lti/login?{urlencode(query)}"

    def register_with(self, tool_database: Any) -> None:
        """Register this platform with the tool directly (what `mentor lti register` does)."""
        from mentor.lti.registrations import add_registration

        add_registration(
            tool_database,
            issuer=self.issuer,
            client_id=self.client_id,
            auth_login_url=self.auth_url,
            jwks_url=self.jwks_url,
            deployment_ids=[self.deployment_id],
            name="emulator",
        )


def platform_app(platform: Platform) -> FastAPI:
    """The platform's HTTP side."""
    app = FastAPI()

    @app.get("/jwks/{client_id}")
    def jwks(client_id: str) -> JSONResponse:
        if client_id != platform.client_id:
            return JSONResponse({"error": "no such key set"}, 404)
        platform.jwks_fetches += 1
        if platform.jwks_down:
            return JSONResponse({"error": "down"}, 503)
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(platform.key.public_key()))
        return JSONResponse({"keys": [public | {"kid": platform.kid, "use": "sig", "alg": "RS256"}]})

    @app.get("/auth")
    def auth(request: Request) -> HTMLResponse:
        q = request.query_params
        launch = platform.pending.get(q.get("login_hint", ""))
        problems = [
            name
            for name, expected in {
                "scope": "openid",
                "response_type": "id_token",
                "response_mode": "form_post",
                "prompt": "none",
                "client_id": platform.client_id,
                "redirect_uri": f"{platform.tool_url}/lti/launch",
            }.items()
            if q.get(name) != expected
        ]
        if launch is None or problems or not q.get("nonce") or not q.get("state"):
            return HTMLResponse(f"bad authorization request: {problems}", 400)
        token = platform.id_token(launch, nonce=q["nonce"])
        return HTMLResponse(autopost(q["redirect_uri"], {"id_token": token, "state": q["state"]}))

    @app.get("/course/{hint}")
    def course(hint: str) -> HTMLResponse:
        """The LMS's course page: the tool framed, its login initiation the iframe's first address."""
        return HTMLResponse(
            "<!doctype html><title>Physics 101</title><h1>Physics 101</h1>"
            f'<iframe id="tool" src="{escape(platform.login_url(hint))}" width="900" height="700"></iframe>'
        )

    @app.post("/deep-link-return")
    async def deep_link_return(request: Request) -> HTMLResponse:
        form = dict(httpx.QueryParams((await request.body()).decode()))
        try:
            claims = verify_deep_link_response(platform, form.get("JWT", ""))
        except (jwt.InvalidTokenError, httpx.HTTPError, KeyError, ValueError) as exc:
            platform.deep_link_errors.append(f"{type(exc).__name__}: {exc}")
            return HTMLResponse(f"refused: {escape(str(exc))}", 400)
        platform.deep_links.append(claims)
        titles = ", ".join(escape(item["title"]) for item in claims[c.CONTENT_ITEMS])
        return HTMLResponse(f"<!doctype html><title>Added</title><p id='added'>Added: {titles}</p>")

    @app.get("/.well-known/openid-configuration")
    def openid_configuration(request: Request) -> JSONResponse:
        if request.headers.get("authorization") != f"Bearer {platform.registration_token}":
            return JSONResponse({"error": "invalid_token"}, 401)
        return JSONResponse(
            {
                "issuer": platform.issuer,
                "authorization_endpoint": platform.auth_url,
                "token_endpoint": f"{platform.issuer}/token",
                "jwks_uri": platform.jwks_url,
                "registration_endpoint": f"{platform.issuer}/register",
                "id_token_signing_alg_values_supported": ["RS256"],
                "scopes_supported": ["openid"],
                c.PLATFORM_CONFIGURATION: {
                    "product_family_code": "emulator",
                    "version": "1.0",
                    "messages_supported": [{"type": c.RESOURCE_LINK_REQUEST}, {"type": c.DEEP_LINKING_REQUEST}],
                },
            }
        )

    @app.post("/register")
    async def register(request: Request) -> JSONResponse:
        if request.headers.get("authorization") != f"Bearer {platform.registration_token}":
            return JSONResponse({"error": "invalid_token"}, 401)
        body = await request.json()
        platform.registrations.append(body)
        return JSONResponse(
            {
                "client_id": platform.client_id,
                **body,
                c.TOOL_CONFIGURATION: body[c.TOOL_CONFIGURATION] | {"deployment_id": platform.deployment_id},
            }
        )

    return app


def verify_deep_link_response(platform: Platform, token: str) -> dict[str, Any]:
    """What a platform checks of a deep-linking response: the tool's signature (its JWKS), aud = this platform,
    iss = the tool's client id, the message type, the deployment, and the echoed data."""
    header = jwt.get_unverified_header(token)
    keys = httpx.get(f"{platform.tool_url}/lti/jwks", timeout=10).json()["keys"]
    jwk = next(k for k in keys if k["kid"] == header["kid"])
    claims = jwt.decode(
        token,
        jwt.algorithms.RSAAlgorithm.from_jwk(json.dumps(jwk)),
        algorithms=["RS256"],
        audience=platform.issuer,
        issuer=platform.client_id,
        options={"require": ["iss", "aud", "exp", "iat", "nonce"]},
    )
    if claims[c.MESSAGE_TYPE] != c.DEEP_LINKING_RESPONSE or claims[c.VERSION] != "1.3.0":
        raise ValueError("not an LTI 1.3 deep-linking response")
    if claims[c.DEPLOYMENT_ID] != platform.deployment_id:
        raise ValueError("another deployment")
    if claims.get(c.DL_DATA) != "opaque-platform-data-7":
        raise ValueError("the data claim is not echoed")
    return claims


def autopost(url: str, fields: dict[str, str]) -> str:
    inputs = "".join(f'<input type="hidden" name="{escape(k)}" value="{escape(v)}">' for k, v in fields.items())
    return (
        f'<!doctype html><form method="post" action="{escape(url)}">{inputs}</form>'
        "<script>document.forms[0].submit()</script>"
    )


FORM = re.compile(r'<form method="post" action="([^"]+)"[^>]*>(.*?)</form>', re.S)
INPUT = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)">')


def read_form(html: str) -> tuple[str, dict[str, str]]:
    """The action and hidden fields of an auto-submitting form (what a browser would post)."""
    match = FORM.search(html)
    assert match is not None, html[:500]
    return unescape(match.group(1)), {unescape(k): unescape(v) for k, v in INPUT.findall(match.group(2))}


@dataclass
class Dance:
    """One launch's requests as a browser makes them, and the launch's form (to replay it)."""

    response: httpx.Response
    form: dict[str, str]


def launch(client: httpx.Client, platform: Platform, hint: str, *, cookies: bool = True) -> Dance:
    """The OIDC dance with a real HTTP client: login initiation at the tool, the redirect to the platform's
    authorization endpoint, and the form post of the id_token back to the tool."""
    started = client.get(platform.login_url(hint), follow_redirects=False)
    assert started.status_code == 302, started.text[:500]
    location = started.headers["location"]
    assert location.startswith(platform.auth_url), location
    authorized = client.get(location)
    assert authorized.status_code == 200, authorized.text[:300]
    action, form = read_form(authorized.text)
    # The binding cookie is Secure: a browser keeps it on http://127.0.0.1 (a secure context), httpx does not.
    jar = "; ".join(f"{k}={v}" for k, v in started.cookies.items()) if cookies else ""
    response = client.post(action, data=form, headers={"Cookie": jar} if jar else {})
    return Dance(response=response, form=form)


@contextmanager
def serve_on(app: Any, port: int) -> Iterator[str]:
    """Run an ASGI app with uvicorn on `port` in a thread; yield its base URL."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "the server did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def running_platform(tool_url: str) -> Iterator[Platform]:
    """An emulated platform serving over HTTP, pointed at the tool."""
    platform = Platform(tool_url=tool_url)
    with serve_on(platform_app(platform), platform.port):
        yield platform
