"""Deep Linking 2.0: the instructor picks modules in mentor's picker; mentor answers the platform with a signed
LtiDeepLinkingResponse carrying an ltiResourceLink per module (its custom module_id names the module at launch).

Between the request and the picker's post, what the response needs (platform, deployment, return URL, the `data`
to echo) travels in a session token mentor signs (mentor.lti.state), never in a form field the browser could edit
unnoticed: a return URL changed to another platform's is a token whose signature fails.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mentor.lti import claims as c
from mentor.lti.errors import LtiRefused
from mentor.lti.keys import ToolKeys
from mentor.lti.launch import Launch
from mentor.lti.state import DEEP_LINK_AUDIENCE, DEEP_LINK_TTL_S, TokenSigner

# The platform reads the response at once; five minutes allows for clock difference.
RESPONSE_TTL_S = 300


@dataclass(frozen=True, slots=True)
class DeepLinkSession:
    """What a deep-linking response needs, carried by the picker's signed session token."""

    issuer: str
    client_id: str
    deployment_id: str
    return_url: str
    accept_multiple: bool
    data: str | None


@dataclass(frozen=True, slots=True)
class PickedModule:
    """A module the instructor placed: its id and the title the link gets."""

    module_id: str
    title: str


def session_token(signer: TokenSigner, launch: Launch) -> str:
    """The picker's session token for a verified deep-linking launch."""
    assert launch.deep_linking is not None
    settings = launch.deep_linking
    claims = {
        "pi": launch.registration.issuer,
        "cid": launch.registration.client_id,
        "dep": launch.deployment_id,
        "ret": settings.return_url,
        "multi": settings.accept_multiple,
        "data": settings.data,
    }
    return signer.sign(DEEP_LINK_AUDIENCE, claims, ttl_s=DEEP_LINK_TTL_S)


def read_session(signer: TokenSigner, token: str) -> DeepLinkSession:
    """The verified session of a picker post; LtiRefused when it is not one mentor issued within the hour."""
    claims = signer.verify(DEEP_LINK_AUDIENCE, token, what="deep_link_session")
    try:
        return DeepLinkSession(
            issuer=str(claims["pi"]),
            client_id=str(claims["cid"]),
            deployment_id=str(claims["dep"]),
            return_url=str(claims["ret"]),
            accept_multiple=bool(claims["multi"]),
            data=claims.get("data"),
        )
    except KeyError:
        raise LtiRefused("bad_deep_link_session", "the deep link session is not one mentor issued") from None


def response_token(
    keys: ToolKeys, session: DeepLinkSession, modules: Sequence[PickedModule], *, launch_url: str
) -> str:
    """The LtiDeepLinkingResponse JWT (RS256 with the tool's key): iss = mentor's client id, aud = the platform."""
    if not modules:
        raise LtiRefused("nothing_picked", "choose at least one module")
    if len(modules) > 1 and not session.accept_multiple:
        raise LtiRefused("too_many_items", "the platform accepts one link here: choose one module")
    now = int(time.time())
    items = [
        {
            "type": c.RESOURCE_LINK_ITEM,
            "title": f"Ask the mentor: {module.title}",
            "url": launch_url,
            "custom": {c.MODULE_PARAMETER: module.module_id},
        }
        for module in modules
    ]
    claims: dict[str, Any] = {
        "iss": session.client_id,
        "aud": session.issuer,
        "iat": now,
        "exp": now + RESPONSE_TTL_S,
        "nonce": secrets.token_urlsafe(16),
        c.MESSAGE_TYPE: c.DEEP_LINKING_RESPONSE,
        c.VERSION: c.LTI_VERSION,
        c.DEPLOYMENT_ID: session.deployment_id,
        c.CONTENT_ITEMS: items,
    }
    if session.data is not None:
        claims[c.DL_DATA] = session.data
    return keys.sign(claims)
