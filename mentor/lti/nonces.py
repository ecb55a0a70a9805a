"""Nonces used once: an id_token's `nonce` may open one launch, never two (a replayed launch is refused).

Behind a small Protocol, like the conversations (mentor.conversations / mentor.redis_state): in this process's memory
on the embedded default, in Redis where replicas share learner state, so a launch replayed to another replica is
refused too. Only a hash of the nonce is kept, for the nonce's lifetime.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from typing import Any, Protocol

from mentor.errors import NotReady

# Launches arrive a few a second at most; 100,000 nonces within their 10-minute lifetime is far beyond that.
MAX_NONCES = 100_000


def _digest(nonce: str) -> str:
    return hashlib.sha256(nonce.encode("utf-8")).hexdigest()


class NonceStore(Protocol):
    """Where used nonces are remembered."""

    async def use(self, nonce: str, *, ttl_s: int) -> bool:
        """Mark `nonce` used for `ttl_s` seconds; True the first time, False when it was used already.

        Raise NotReady when this cannot be known (a shared store that is down): a launch is then refused rather
        than let a replay through.
        """
        ...


class MemoryNonceStore:
    """This process's memory: the embedded default (one process serves every launch)."""

    def __init__(self, *, max_nonces: int = MAX_NONCES) -> None:
        self._max = max_nonces
        self._used: OrderedDict[str, float] = OrderedDict()  # digest -> expiry (monotonic), oldest first
        self._lock = threading.Lock()

    async def use(self, nonce: str, *, ttl_s: int) -> bool:
        now = time.monotonic()
        key = _digest(nonce)
        with self._lock:
            while self._used and next(iter(self._used.values())) <= now:
                self._used.popitem(last=False)
            expiry = self._used.get(key)
            if expiry is not None and expiry > now:
                return False
            self._used[key] = now + ttl_s
            self._used.move_to_end(key)
            if len(self._used) > self._max:
                # Full of live nonces: the oldest goes. Its id_token has (nearly) expired: exp is checked too.
                self._used.popitem(last=False)
            return True


class RedisNonceStore:
    """Redis, shared by every replica: SET NX with the nonce's lifetime, so the first replica to see it wins."""

    def __init__(self, clients: Any, *, prefix: str) -> None:
        self._clients = clients  # mentor.redis_state.RedisClients
        self._prefix = prefix

    async def use(self, nonce: str, *, ttl_s: int) -> bool:
        key = f"{self._prefix}:lti:nonce:{_digest(nonce)}"
        reached, created = await self._clients.reachability.attempt(
            lambda: self._clients.aio.set(key, b"1", nx=True, ex=ttl_s)
        )
        if not reached:
            raise NotReady("the shared learner state (Redis) cannot be reached to check this launch; try again shortly")
        return bool(created)
