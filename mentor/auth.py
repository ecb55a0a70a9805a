"""Learner tokens: short-lived HS256 JWTs the host platform's server mints, `sub` being its learner id.

A browser cannot choose which learner it is: it can only pass on a token the platform signed. A token must say when
it was issued (`iat`) and live at most `max_age_s` from then, so a leaked one is not a key for years. The messages
say what is wrong with a token and never repeat it (a token is a credential, and error bodies end up in logs).
"""

from __future__ import annotations

import time

import jwt

from mentor.errors import InvalidInput, Unauthorized

ALGORITHM = "HS256"
# Seconds of clock difference tolerated between the platform's server and ours on `exp` (and `iat`/`nbf`).
LEEWAY_S = 30
# The same bounds as the `learner_id` field of a request body.
MAX_LEARNER_ID_CHARS = 200


def mint_learner_token(learner_id: str, *, secret: str, audience: str, ttl_s: int, max_age_s: int) -> str:
    """A token naming `learner_id` for `ttl_s` seconds, as a platform's server would mint it."""
    if not 1 <= len(learner_id) <= MAX_LEARNER_ID_CHARS:
        raise InvalidInput(f"learner_id: 1-{MAX_LEARNER_ID_CHARS} characters")
    if ttl_s > max_age_s:  # the server would refuse it: say so now rather than hand out a token that never works
        raise InvalidInput(f"a learner token may live at most {max_age_s} s (MENTOR_LEARNER_TOKEN_MAX_AGE_S)")
    now = int(time.time())
    claims = {"sub": learner_id, "aud": audience, "iat": now, "exp": now + ttl_s}
    return jwt.encode(claims, secret, algorithm=ALGORITHM)


def learner_from_token(token: str, *, secret: str, audience: str, max_age_s: int) -> str:
    """The learner id (`sub`) of a valid token; Unauthorized with a plain reason otherwise."""
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
    return learner_id
