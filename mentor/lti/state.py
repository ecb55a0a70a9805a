"""Short-lived tokens mentor signs for itself (HS256, a key derived from the pseudonym key every replica shares):
the OIDC `state`, the deep-linking picker's session, and dynamic-registration invitations.

Why the state is a signed token and not a server-side session keyed by a cookie: the launch happens inside the LMS's
iframe, where browsers block or partition third-party cookies (Safari blocks them all), so a cookie set at login
initiation may never come back with the launch. The state therefore carries what the launch must check, signed:
the platform and client it was started for, a hash of the nonce sent to the platform (the id_token must carry that
nonce, and a nonce opens one launch only: mentor.lti.nonces), and a hash of a browser-binding value. That value is
also set as a cookie (SameSite=None; Secure; Partitioned, which Chrome and Firefox keep inside the LMS's iframe):
when the cookie comes back it must match, so a launch started in one browser cannot be finished in another; when
it does not come back (cookies blocked), the signature, the 10-minute lifetime and the single-use nonce still hold.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Any

import jwt

from mentor.lti.errors import LtiRefused

ALGORITHM = "HS256"
STATE_AUDIENCE = "mentor-lti-state"
DEEP_LINK_AUDIENCE = "mentor-lti-deep-link"
INVITE_AUDIENCE = "mentor-lti-invite"
# Login initiation to launch is a few redirects (seconds); ten minutes covers a platform's slow sign-in page.
STATE_TTL_S = 600
# An instructor may take a while to choose modules in the picker.
DEEP_LINK_TTL_S = 3600
COOKIE_PREFIX = "mentor-lti-"


def hashed(value: str) -> str:
    """SHA-256 of `value`, hex: what a token carries instead of a secret it must be checked against."""
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


def derive_key(pseudonym_key: bytes) -> bytes:
    """The signing key of these tokens, derived (HMAC) so that it is neither the pseudonym key nor a learner token's."""
    return hmac.new(pseudonym_key, b"mentor lti tokens v1", hashlib.sha256).digest()


@dataclass(frozen=True, slots=True)
class LoginState:
    """What a login initiation hands to the platform (nonce, state) and to the browser (the binding cookie)."""

    state: str
    nonce: str
    cookie_name: str
    cookie_value: str


@dataclass(frozen=True, slots=True)
class StateClaims:
    """A verified state: the registration it was started for and the hashes the launch checks against."""

    issuer: str
    client_id: str
    nonce_hash: str
    binding_hash: str

    @property
    def cookie_name(self) -> str:
        return cookie_name(self.nonce_hash)


def cookie_name(nonce_hash: str) -> str:
    """One cookie per login, so two tool links on one LMS page do not overwrite each other's."""
    return COOKIE_PREFIX + nonce_hash[:16]


class TokenSigner:
    """Signs and checks mentor's own short-lived tokens."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    def sign(self, audience: str, claims: dict[str, Any], *, ttl_s: int) -> str:
        now = int(time.time())
        return jwt.encode({**claims, "aud": audience, "iat": now, "exp": now + ttl_s}, self._key, algorithm=ALGORITHM)

    def verify(self, audience: str, token: str, *, what: str) -> dict[str, Any]:
        """The claims of a valid token for `audience`; LtiRefused (400) naming `what` otherwise."""
        try:
            return jwt.decode(
                token, self._key, algorithms=[ALGORITHM], audience=audience, options={"require": ["exp", "aud"]}
            )
        except jwt.ExpiredSignatureError:
            raise LtiRefused(f"{what}_expired", f"the {what.replace('_', ' ')} has expired; start again") from None
        except jwt.InvalidTokenError:
            raise LtiRefused(f"bad_{what}", f"the {what.replace('_', ' ')} is not one mentor issued") from None

    def new_login_state(self, *, issuer: str, client_id: str) -> LoginState:
        """A fresh nonce, binding value and signed state for one login initiation."""
        nonce, binding = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        nonce_hash = hashed(nonce)
        state = self.sign(
            STATE_AUDIENCE,
            {"pi": issuer, "cid": client_id, "nh": nonce_hash, "bh": hashed(binding)},
            ttl_s=STATE_TTL_S,
        )
        return LoginState(state=state, nonce=nonce, cookie_name=cookie_name(nonce_hash), cookie_value=binding)

    def read_state(self, state: str) -> StateClaims:
        """The verified claims of a state this tool issued within STATE_TTL_S."""
        claims = self.verify(STATE_AUDIENCE, state, what="state")
        try:
            return StateClaims(
                issuer=str(claims["pi"]),
                client_id=str(claims["cid"]),
                nonce_hash=str(claims["nh"]),
                binding_hash=str(claims["bh"]),
            )
        except KeyError:
            raise LtiRefused("bad_state", "the state is not one mentor issued") from None


def check_binding(claims: StateClaims, cookie: str | None) -> bool:
    """Whether the browser binding holds: True when the cookie matches, False when the browser sent none (cookies
    blocked in the iframe); LtiRefused when it sent another (the launch was started in another browser)."""
    if cookie is None:
        return False
    if not hmac.compare_digest(hashed(cookie), claims.binding_hash):
        raise LtiRefused(
            "state_mismatch",
            "this launch was started in another browser window; launch again from the course",
            status=401,
        )
    return True
