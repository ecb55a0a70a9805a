"""Named dependencies routes declare; the runtime is built once in the lifespan and lives on app.state.

They are `async def` although they never await: FastAPI runs a plain `def` dependency in its thread pool, and
these three are on every chat request (three thread hand-offs each, and up to 40 pool threads under load).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from mentor.auth import read_learner_token
from mentor.errors import Unauthorized
from mentor.runtime import Runtime
from mentor.settings import Settings
from mentor.throttle import BAD_TOKEN

SERVER_KEY_HEADER = "X-Mentor-Server-Key"


async def get_runtime(request: Request) -> Runtime:
    """The runtime the lifespan built."""
    return request.app.state.runtime


async def get_settings(request: Request) -> Settings:
    """The settings the app was created with."""
    return request.app.state.settings


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
SettingsDep = Annotated[Settings, Depends(get_settings)]

# Named apart from the analyst token's scheme ("HTTPBearer", mentor/api/routes_analyst.py): the two tokens open
# different routes and neither is ever accepted in place of the other.
learner_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="LearnerToken",
    description="A learner token (JWT HS256: sub = the platform's learner id, exp, aud) minted by the learning "
    "platform's server. Read only when the server sets MENTOR_LEARNER_TOKEN_SECRET.",
)
server_key_header = APIKeyHeader(
    name=SERVER_KEY_HEADER,
    auto_error=False,
    scheme_name="ServerKey",
    description="MENTOR_SERVER_KEY, sent by a trusted server (never a browser) to pass a raw learner_id while "
    "learner tokens are required.",
)


@dataclass(frozen=True, slots=True)
class Learner:
    """Who the request's headers prove the caller to be; `resolve` weighs that against a body's learner_id."""

    token_learner: str | None  # the `sub` of a valid learner token
    may_name_learner: bool  # a raw learner_id is believed: tokens are not required, or the server key was sent
    server_vouched: bool = False  # the server key was sent and matched: the platform's server names the learner
    token_context: str | None = None  # the `ctx` (LTI course pseudonym) of a valid learner token

    @property
    def authenticated(self) -> bool:
        """The learner is proven (a learner token, or the server key), not a name the caller picked."""
        return self.token_learner is not None or self.server_vouched

    def resolve(self, claimed: str | None) -> str | None:
        """The learner to ask or rate as (None: anonymous); Unauthorized when the body claims someone unproven."""
        if self.token_learner is not None:
            if claimed is not None and not hmac.compare_digest(claimed.encode(), self.token_learner.encode()):
                raise Unauthorized("learner_id does not match the learner token; send one or the other")
            return self.token_learner
        if claimed is not None and not self.may_name_learner:
            raise Unauthorized(
                "this server identifies learners by token: send 'Authorization: Bearer <learner token>' "
                "instead of learner_id"
            )
        return claimed


async def get_learner(
    settings: SettingsDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(learner_bearer)],
    server_key: Annotated[str | None, Depends(server_key_header)],
) -> Learner:
    """The caller's learner identity, by the trust rules of a learner route.

    Without MENTOR_LEARNER_TOKEN_SECRET (the embedded default) a body's learner_id is taken as sent and the
    Authorization header is not read: nothing could check a token.

    With it:
    - `Authorization: Bearer <learner token>` names the learner (its `sub`); a bad token is a 401 saying why.
      A learner_id sent beside it must be the same learner, or the request is a 401.
    - A raw learner_id with no token is a 401, unless `X-Mentor-Server-Key` equals MENTOR_SERVER_KEY: that key
      is for the platform's own server calling server-to-server, never for a page (CORS does not even let a
      browser send it).
    - Neither token nor learner_id: an anonymous learner, rate-limited by address.
    """
    secret = settings.learner_token_secret
    if secret is None:
        return Learner(token_learner=None, may_name_learner=True)
    token = None
    if credentials is not None:
        token = read_learner_token(
            credentials.credentials.strip(),
            secret=secret.get_secret_value(),
            audience=settings.learner_token_audience,
            max_age_s=settings.learner_token_max_age_s,
        )
    token_learner = token.learner_id if token is not None else None
    if server_key is None:
        return Learner(
            token_learner=token_learner, may_name_learner=False, token_context=token.context if token else None
        )
    expected = settings.server_key.get_secret_value() if settings.server_key is not None else ""
    if not expected or not hmac.compare_digest(server_key.encode(), expected.encode()):
        raise Unauthorized(f"{SERVER_KEY_HEADER} does not match this server's key")
    return Learner(
        token_learner=token_learner,
        may_name_learner=True,
        server_vouched=True,
        token_context=token.context if token else None,
    )


LearnerDep = Annotated[Learner, Depends(get_learner)]


def client_address(request: Request) -> str:
    """The caller's address: uvicorn takes it from X-Forwarded-For when the peer is a trusted proxy
    (FORWARDED_ALLOW_IPS), so behind one it is the learner's, not the proxy's."""
    return request.client.host if request.client else "unknown"


async def get_client_key(request: Request, runtime: RuntimeDep) -> str:
    """The caller's address as the limits per address count it (a pseudonym)."""
    return runtime.chat.client_key(client_address(request))


ClientKeyDep = Annotated[str, Depends(get_client_key)]


def per_client(limit: str) -> Any:
    """A dependency counting each request against the named limit (mentor.throttle) of its address: 429 beyond."""

    async def throttle(runtime: RuntimeDep, client_key: ClientKeyDep) -> None:
        await runtime.state.limiter.hit(limit, client_key)

    return Depends(throttle)


async def require_token(presented: str, expected: str, *, runtime: Runtime, client_key: str, refusal: str) -> None:
    """Pass a request that presents `expected`; otherwise Unauthorized with `refusal`, a wrong token (not a missing
    one) counted against the address's wrong-token limit. An address over that limit gets 429 before its token is
    compared, so guessing stops and the 429 says nothing of whether the guess was right."""
    limiter = runtime.state.limiter
    await limiter.check(BAD_TOKEN, client_key)
    if presented and hmac.compare_digest(presented.encode(), expected.encode()):
        return
    if presented:
        await limiter.hit(BAD_TOKEN, client_key)
    raise Unauthorized(refusal)
