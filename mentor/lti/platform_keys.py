"""Each platform's public keys (its JWKS), fetched over HTTP and cached in this process.

A launch needs the key its id_token's header names (`kid`). The JWKS is fetched when not cached, when older than
FRESH_S, or when a launch names a kid the cache lacks (a platform rotated its key), but at most once per
RETRY_S per URL, so a stream of made-up kids cannot turn mentor into a fetcher of the platform's JWKS. When the JWKS
cannot be fetched (time-out, 5xx, not JSON), the keys cached before keep working, with one warning per outage;
only a platform never fetched, or a kid never seen, is then refused.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import jwt

from mentor.lti.errors import LtiRefused

log = logging.getLogger(__name__)

# An hour: platforms rotate keys rarely and publish the new one before using it; a new kid triggers a fetch anyway.
FRESH_S = 3600.0
# Fetches of one JWKS at most this often, whatever launches ask for.
RETRY_S = 10.0
# A platform's JWKS answers in well under a second; a launch should not hang on one that does not.
TIMEOUT_S = 5.0
MAX_JWKS_BYTES = 256 * 1024


@dataclass
class _Cached:
    keys: dict[str, Any] = field(default_factory=dict)  # kid -> public key ("" for a key without kid)
    fetched: float = float("-inf")  # monotonic time of the last successful fetch
    attempted: float = float("-inf")
    failing: bool = False


class PlatformKeys:
    """Public keys of the platforms, by JWKS URL; one instance per process, shared by its requests."""

    def __init__(self, *, timeout_s: float = TIMEOUT_S, fresh_s: float = FRESH_S, retry_s: float = RETRY_S) -> None:
        self._timeout_s = timeout_s
        self._fresh_s = fresh_s
        self._retry_s = retry_s
        self._cache: dict[str, _Cached] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def key(self, jwks_url: str, kid: str | None) -> Any:
        """The public key for `kid` (or the only key, when the token names none); LtiRefused (401) otherwise."""
        cached = self._cache.setdefault(jwks_url, _Cached())
        found = _pick(cached.keys, kid)
        now = time.monotonic()
        if found is not None and now - cached.fetched < self._fresh_s:
            return found
        lock = self._locks.setdefault(jwks_url, asyncio.Lock())
        async with lock:  # one fetch at a time per URL; the others then read what it found
            found = _pick(cached.keys, kid)
            if found is not None and time.monotonic() - cached.fetched < self._fresh_s:
                return found
            if time.monotonic() - cached.attempted >= self._retry_s:
                await self._refresh(jwks_url, cached)
            found = _pick(cached.keys, kid)
        if found is not None:
            return found
        if cached.failing:
            raise LtiRefused(
                "jwks_unavailable",
                "the platform's public keys could not be fetched, so this launch cannot be verified; try again in a "
                "minute, and if it persists ask the platform's administrator to check its key set URL",
                status=401,
            )
        raise LtiRefused("unknown_key", "the launch is signed with a key the platform does not publish", status=401)

    async def _refresh(self, jwks_url: str, cached: _Cached) -> None:
        cached.attempted = time.monotonic()
        try:
            async with httpx.AsyncClient(timeout=self._timeout_s, follow_redirects=True) as client:
                response = await client.get(jwks_url, headers={"Accept": "application/json"})
            response.raise_for_status()
            if len(response.content) > MAX_JWKS_BYTES:
                raise ValueError(f"larger than {MAX_JWKS_BYTES} bytes")
            keys = parse_jwks(response.json())
        except (httpx.HTTPError, ValueError, TypeError) as exc:
            if not cached.failing:
                log.warning(
                    "cannot fetch the platform JWKS at %s (%s: %s); %s",
                    jwks_url,
                    type(exc).__name__,
                    str(exc)[:200],
                    f"its {len(cached.keys)} cached keys keep working" if cached.keys else "no key of it is cached",
                )
            cached.failing = True
            return
        if cached.failing:
            log.info("the platform JWKS at %s can be fetched again", jwks_url)
        cached.keys, cached.fetched, cached.failing = keys, time.monotonic(), False


def parse_jwks(document: Any) -> dict[str, Any]:
    """The RSA signing keys of a JWKS document, by kid; ValueError when it holds none."""
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise ValueError("not a JWKS (no keys list)")
    keys: dict[str, Any] = {}
    for jwk in document["keys"]:
        if not isinstance(jwk, dict) or jwk.get("kty") != "RSA" or jwk.get("use", "sig") != "sig":
            continue
        if jwk.get("alg", "RS256") != "RS256":
            continue
        try:
            keys[str(jwk.get("kid", ""))] = jwt.algorithms.RSAAlgorithm.from_jwk(json.dumps(jwk))
        except (jwt.InvalidKeyError, ValueError, KeyError, TypeError):
            continue
    if not keys:
        raise ValueError("no RSA signing key in it")
    return keys


def _pick(keys: dict[str, Any], kid: str | None) -> Any:
    if kid is not None:
        return keys.get(kid)
    return next(iter(keys.values())) if len(keys) == 1 else None
