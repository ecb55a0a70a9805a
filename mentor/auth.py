"""Learner tokens: short-lived HS256 JWTs the host platform's server mints, `sub` being its learner id.

A browser cannot choose which learner it is: it can only pass on a token the platform signed. A token must say when
it was issued (`iat`) and live at most `max_age_s` from then, so a leaked one is not a key for years. The messages
say what is wrong with a token and never repeat it (a token is a credential, and error bodies end up in logs).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import jwt

from mentor.errors import InvalidInput, Unauthorized

ALGORITHM = "HS256"
# Seconds of clock difference tolerated between the platform's server and ours on `exp` (and `iat`/`nbf`).
LEEWAY_S = 30
# The same bounds as the `learner_id` field of a request body.
MAX_LEARNER_ID_CHARS = 200
# The questions table's lti_context column.
MAX_CONTEXT_CHARS = 64


def mint_learner_token(
    learner_id: str, *, secret: str, audience: str, ttl_s: int, max_age_s: int, context: str | None = None
) -> str:
    """A token naming `learner_id` for `ttl_s` seconds, as a platform's server would mint it; `context` (`ctx`) names
    the course the learner asks in, a pseudonym mentor's LTI launch sets (mentor.lti) and the signals log keeps."""
    if not 1 <= len(learner_id) <= MAX_LEARNER_ID_CHARS:
        raise InvalidInput(f"learner_id: 1-{MAX_LEARNER_ID_CHARS} characters")
    if ttl_s > max_age_s:  # the server would refuse it: say so now rather than hand out a token that never works
        raise InvalidInput(f"a learner token may live at most {max_age_s} s (MENTOR_LEARNER_TOKEN_MAX_AGE_S)")
    now = int(time.time())
    claims: dict[str, str | int] = {"sub": learner_id, "aud": audience, "iat": now, "exp": now + ttl_s}
    if context is not None:
        claims["ctx"] = context
    return jwt.encode(claims, secret, algorithm=ALGORITHM)


@dataclass(frozen=True, slots=True)
class LearnerToken:
    """What a valid learner token says: the learner, and the course (`ctx`) when an LTI launch minted it."""

    learner_id: str
    context: str | None = None


def learner_from_token(token: str, *, secret: str, audience: str, max_age_s: int) -> str:
    """The learner id (`sub`) of a valid token; Unauthorized with a plain reason otherwise."""
    return read_learner_token(token, secret=secret, audience=audience, max_age_s=max_age_s).learner_id


def read_learner_token(token: str, *, secret: str, audience: str, max_age_s: int) -> LearnerToken:
    """The learner id (`sub`) and course (`ctx`) of a valid token; Unauthorized with a plain reason otherwise."""
    try:
        claims = jwt.decode(
            token,
            secret,
            algorithms=[ALGORITHM],  # fixed: the token's own header never picks the algorithm ("none", RS256...)
            audience=audience,
            leeway=LEEWAY_S,  # PyJWT also refuses an `iat` further in the future than this
            options={"require": ["exp", "iat", "aud", "sub"]},
        )
    except jwt.ExpiredSignatureError:
        raise Unauthorized("the learner token has expired; ask the learning platform for a new one") from None
    except jwt.MissingRequiredClaimError as exc:
        raise Unauthorized(f"the learner token has no {exc.claim!r} claim") from None
    except jwt.InvalidAudienceError:
        raise Unauthorized(f"the learner token is not meant for this service (aud must be {audience!r})") from None
    except jwt.InvalidSignatureError:
        raise Unauthorized("the learner token's signature does not match") from None
    except jwt.ImmatureSignatureError:
        raise Unauthorized("the learner token is not valid yet") from None
    except jwt.InvalidTokenError:  # not three base64url parts, bad JSON, another algorithm, a non-string sub...
        raise Unauthorized("the learner token is malformed") from None
    # PyJWT has checked that both are integers (or integral strings and floats, which int() takes the same way).
    issued_at, expires_at = int(claims["iat"]), int(claims["exp"])
    if expires_at - issued_at > max_age_s + LEEWAY_S:
        raise Unauthorized(
            f"the learner token lives longer than this service accepts (at most {max_age_s} s from its iat); "
            "ask the learning platform for a shorter-lived one"
        )
    if time.time() - issued_at > max_age_s + LEEWAY_S:
        raise Unauthorized("the learner token has expired; ask the learning platform for a new one")
    learner_id = claims["sub"]
    if not isinstance(learner_id, str):  # PyJWT checks this itself only from 2.10 on
        raise Unauthorized("the learner token is malformed")
    if not 1 <= len(learner_id) <= MAX_LEARNER_ID_CHARS:
        raise Unauthorized(f"the learner token's sub must be 1-{MAX_LEARNER_ID_CHARS} characters")
    context = claims.get("ctx")
    # A course pseudonym is 32 hex digits (mentor.privacy.pseudonym); anything else is not one mentor minted.
    return LearnerToken(
        learner_id, context if isinstance(context, str) and 0 < len(context) <= MAX_CONTEXT_CHARS else None
    )
