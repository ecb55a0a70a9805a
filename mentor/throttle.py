"""Named rate limits: at most so many of something per key (a learner's pseudonym, a client address's) in any
60-second window, counted by the `limits` library's moving window.

One class whatever the store, given the library's moving window over it: `memory_limiter` counts in this process
(the embedded default, one process), and `mentor.redis_state.redis_limiter` counts in Redis, where every replica and
every worker of `mentor serve --workers N` (which requires Redis) sees the same counts. A store that cannot be
reached lets every hit through: `attempt` (Redis's reachability) decides that, and warns once per outage.

The limits, by name:

    ask          questions per learner (per address for an anonymous learner)
    ask-client   questions per address whose learner ids are not proven (no learner token, no server key):
                 a name the caller picks is no limit on the caller
    search       searches per address (each runs the embedder)
    tools        calculator runs per address
    bad-token    wrong analyst or metrics tokens per address; over it, the address is refused before its token is
                 compared, so the refusal says nothing of the token
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import limits.storage
import limits.strategies
from limits import RateLimitItem, RateLimitItemPerMinute
from limits.util import WindowStats

from mentor.errors import RateLimited
from mentor.settings import Settings

ASK = "ask"
ASK_CLIENT = "ask-client"
SEARCH = "search"
TOOLS = "tools"
BAD_TOKEN = "bad-token"

T = TypeVar("T")
Attempt = Callable[[Callable[[], Awaitable[Any]]], Awaitable[tuple[bool, Any]]]


@dataclass(frozen=True, slots=True)
class Limit:
    """At most `per_minute` per key in any 60-second window; `what` names what is counted, for the refusal."""

    per_minute: int
    what: str

    def refusal(self, retry_after_s: int) -> RateLimited:
        """The one answer for a key over this limit."""
        message = f"too many {self.what}: at most {self.per_minute} a minute; try again in {retry_after_s} s"
        return RateLimited(message, retry_after_s)


def limits_of(settings: Settings) -> dict[str, Limit]:
    """Every named limit, as the settings set them."""
    return {
        ASK: Limit(settings.rate_limit_per_minute, "questions"),
        ASK_CLIENT: Limit(settings.rate_limit_per_client_per_minute, "questions from this address"),
        SEARCH: Limit(settings.rate_limit_search_per_minute, "searches from this address"),
        TOOLS: Limit(settings.rate_limit_tools_per_minute, "calculator runs from this address"),
        BAD_TOKEN: Limit(settings.rate_limit_bad_tokens_per_minute, "wrong tokens from this address"),
    }


async def always_reached(call: Callable[[], Awaitable[T]]) -> tuple[bool, T]:
    """This process's memory is always there: (True, what `call` returned)."""
    return True, await call()


class MovingWindow(Protocol):
    """What the limiter uses of `limits.aio.strategies.MovingWindowRateLimiter`."""

    async def hit(self, item: RateLimitItem, *identifiers: str) -> bool: ...

    async def test(self, item: RateLimitItem, *identifiers: str) -> bool: ...

    async def get_window_stats(self, item: RateLimitItem, *identifiers: str) -> WindowStats: ...


class InProcessWindow:
    """The library's moving window in this process's memory, behind the async methods of its Redis one.

    Not `limits.aio`'s memory storage: it binds each key's asyncio lock to the event loop that first contends for it,
    and a runtime serves several loops (tests, benchmarks, `mentor eval` next to a server): the second loop's
    requests failed with RuntimeError. The thread-safe synchronous storage takes microseconds and never waits.
    """

    def __init__(self) -> None:
        self._window = limits.strategies.MovingWindowRateLimiter(limits.storage.MemoryStorage())

    async def hit(self, item: RateLimitItem, *identifiers: str) -> bool:
        return self._window.hit(item, *identifiers)

    async def test(self, item: RateLimitItem, *identifiers: str) -> bool:
        return self._window.test(item, *identifiers)

    async def get_window_stats(self, item: RateLimitItem, *identifiers: str) -> WindowStats:
        return self._window.get_window_stats(item, *identifiers)


class RateLimiter:
    """Counts hits per named limit and key, in the moving window it is given (in memory, or in Redis).

    Keys should be pseudonyms: with Redis they are part of its keys. The moving window stamps each hit with the
    clock of the process that counted it, so replicas' clocks should agree (NTP) to well within a second.
    """

    def __init__(self, window: MovingWindow, limits: Mapping[str, Limit], *, attempt: Attempt = always_reached) -> None:
        self._limiter = window
        self._limits = dict(limits)
        # The limit's name is the window's namespace: the same key under two limits is counted apart.
        self._items = {name: RateLimitItemPerMinute(limit.per_minute, namespace=name) for name, limit in limits.items()}
        self._attempt = attempt

    async def hit(self, limit: str, key: str) -> None:
        """Count one for `key` under the named limit, or raise RateLimited with the seconds to wait (let through
        while the store is away: an outage must not cost learners their answers)."""
        item = self._items[limit]
        reached, allowed = await self._attempt(lambda: self._limiter.hit(item, key))
        if reached and not allowed:
            raise await self._refusal(limit, key)

    async def check(self, limit: str, key: str) -> None:
        """Raise RateLimited if `key` has used up the named limit, counting nothing."""
        item = self._items[limit]
        reached, free = await self._attempt(lambda: self._limiter.test(item, key))
        if reached and not free:
            raise await self._refusal(limit, key)

    async def _refusal(self, limit: str, key: str) -> RateLimited:
        # The window frees a slot when its oldest hit is 60 s old: that is its reset time.
        item = self._items[limit]
        reached, stats = await self._attempt(lambda: self._limiter.get_window_stats(item, key))
        wait_s = stats.reset_time - time.time() if reached and stats is not None else 60
        return self._limits[limit].refusal(min(60, max(1, math.ceil(wait_s))))


def memory_limiter(limits: Mapping[str, Limit]) -> RateLimiter:
    """Limits counted in this process's memory (expired hits are swept by the storage's own timer thread)."""
    return RateLimiter(InProcessWindow(), limits)
