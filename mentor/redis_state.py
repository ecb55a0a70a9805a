"""Learner state in Redis, shared by every replica and worker process: conversations, who asked each recent
question, erasures (tombstones) and the rate limits. Same Protocol as the in-memory store of
`mentor.conversations`, and the same limiter as `mentor.throttle`'s with Redis storage; `connect_redis` builds the
clients at the edge, nothing connects on import.

Keys, under `prefix` (nothing personal in them beyond learners' pseudonyms and random ids; the values hold the
turns' text, which is the conversation):

    {prefix}:conv:{conversation_id}        hash: learner, module                 expires ttl_s after last use
    {prefix}:turns:{conversation_id}       list of JSON [question, answer, asked] the same
    {prefix}:learner:{key}:conversations   sorted set: id -> expiry (Redis ms)   so an erasure finds them all
    {prefix}:learner:{key}:questions       sorted set: id -> expiry (Redis ms)
    {prefix}:asker:{question_id}           the asker's pseudonym                 ttl_s
    {prefix}:erased:{key}                  epoch seconds of the latest erasure   TOMBSTONE_TTL_S
    {prefix}:rate:{limit}/{key}/...        the `limits` library's moving windows (mentor.throttle's limits)

Whatever must not interleave with an erasure is one Lua script (Redis runs each alone), so an append never
re-creates a conversation erased or expired meanwhile. The erasure script builds keys from the ids it reads: this
needs one Redis (or a primary with replicas), not Redis Cluster.

Redis down or hung costs a question at most one time-out (TIMEOUT_S), never an error: it is answered without
memory (a fresh conversation, nothing saved, no asker known, no rate limits), with one warning per outage and one
line when Redis is back. Erasure is the exception: it raises NotReady rather than be incomplete, and
`erased_since` raises NotReady rather than guess (the signal writer then keeps its records spooled).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import redis
import redis.asyncio
from limits.aio.storage import RedisStorage
from limits.aio.strategies import MovingWindowRateLimiter
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry

from mentor.answer import Turn
from mentor.conversations import (
    MAX_CONVERSATION_BYTES,
    MAX_TURNS,
    TOMBSTONE_TTL_S,
    Conversation,
    check_conversation_id,
    conversation_not_found,
)
from mentor.errors import NotReady
from mentor.throttle import Limit, RateLimiter

log = logging.getLogger(__name__)
T = TypeVar("T")

# Redis answers in well under a millisecond on a local network; half a second means it is down or hung, and is
# what a question may lose to finding that out.
TIMEOUT_S = 0.5
# While Redis is down, try it again at most this often (one call probes, the others skip it), so a hung server
# costs one time-out a second rather than one per call.
RETRY_INTERVAL_S = 1.0
# What counts as Redis being unreachable (refused, reset, timed out, a replica promoted or still loading); any
# other error is a bug and is raised.
UNREACHABLE = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, redis.exceptions.ReadOnlyError, OSError)


class Reachability:
    """Whether Redis answered lately: one warning when it stops, one when it is back, and few attempts between."""

    def __init__(self, retry_interval_s: float = RETRY_INTERVAL_S) -> None:
        self._retry_interval_s = retry_interval_s
        self._down_since: float | None = None
        self._last_attempt = 0.0
        self._lock = threading.Lock()

    @property
    def down(self) -> bool:
        """Whether the last call found Redis unreachable (for a readiness report)."""
        return self._down_since is not None

    async def attempt(self, call: Callable[[], Awaitable[T]]) -> tuple[bool, T | None]:
        """(True, what `call` returned), or (False, None) when Redis is unreachable or was a moment ago."""
        if not self._should_try():
            return False, None
        try:
            result = await call()
        except UNREACHABLE as exc:
            self.failed(exc)
            return False, None
        self.reached()
        return True, result

    def _should_try(self) -> bool:
        if self._down_since is None:
            return True
        with self._lock:
            now = time.monotonic()
            if now - self._last_attempt < self._retry_interval_s:
                return False
            self._last_attempt = now  # this call probes; the others skip until it has an answer
            return True

    def failed(self, exc: BaseException) -> None:
        """Note a failed call; warn when it starts an outage."""
        with self._lock:
            now = time.monotonic()
            self._last_attempt = now
            if self._down_since is not None:
                return
            self._down_since = now
        log.warning(
            "Redis unreachable (%s): questions are answered without conversation memory and rate limits, and "
            "erasures refused, until it is back",
            describe(exc),
        )

    def reached(self) -> None:
        """Note a call that got an answer; say so when it ends an outage."""
        if self._down_since is None:
            return
        with self._lock:
            if self._down_since is None:
                return
            outage_s = time.monotonic() - self._down_since
            self._down_since = None
        log.warning("Redis reachable again after %.1f s: learner state is shared again", outage_s)


def describe(exc: BaseException) -> str:
    """The error in one short line (host and port at most: nothing of a learner's)."""
    return f"{type(exc).__name__}: {exc}"[:200]


@dataclass(frozen=True)
class RedisClients:
    """One process's connections to Redis: async for requests, sync for the signal writer's thread, and what they
    know of its reachability (shared, so an outage is reported once whichever part noticed it)."""

    aio: redis.asyncio.Redis
    sync: redis.Redis
    reachability: Reachability

    async def aclose(self) -> None:
        """Close both connection pools."""
        await self.aio.aclose()
        self.sync.close()


def connect_redis(
    url: str, *, timeout_s: float = TIMEOUT_S, retry_interval_s: float = RETRY_INTERVAL_S
) -> RedisClients:
    """Clients for `url` (redis://host:port/db, rediss://...); nothing connects until first used.

    The async pool is bound to the event loop that first uses it, so build these once per process and use them
    from one loop (the app's).
    """
    # No retries inside redis-py: a second try at a hung server doubles what the question waits for it.
    options: dict[str, Any] = {"socket_connect_timeout": timeout_s, "socket_timeout": timeout_s}
    return RedisClients(
        aio=redis.asyncio.Redis.from_url(url, retry=AsyncRetry(NoBackoff(), 0), **options),
        sync=redis.Redis.from_url(url, retry=Retry(NoBackoff(), 0), **options),
        reachability=Reachability(retry_interval_s),
    )


# Adds `member` to the index sorted set KEYS-named `key`, scored by when it expires (Redis's own clock, so replicas
# whose clocks differ agree), and drops the members already expired, so the index stays as small as what it lists.
INDEX = """
local function index(key, member, ttl_ms)
  local t = redis.call('TIME')
  local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZADD', key, now_ms + ttl_ms, member)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now_ms)
  redis.call('PEXPIRE', key, ttl_ms)
end
"""

# KEYS: conversation, learner's conversations. ARGV: learner, module, ttl_ms, conversation id.
START = (
    INDEX
    + """
redis.call('HSET', KEYS[1], 'learner', ARGV[1], 'module', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
index(KEYS[2], ARGV[4], tonumber(ARGV[3]))
return 1
"""
)

# KEYS: conversation, turns, learner's conversations. ARGV: learner, module, ttl_ms, conversation id.
# The turns, or false when the conversation is unknown, expired, someone else's or about another module.
CONTINUE = (
    INDEX
    + """
local owner = redis.call('HMGET', KEYS[1], 'learner', 'module')
if owner[1] ~= ARGV[1] or owner[2] ~= ARGV[2] then
  return false
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
index(KEYS[3], ARGV[4], tonumber(ARGV[3]))
return redis.call('LRANGE', KEYS[2], 0, -1)
"""
)

# KEYS: conversation, turns, learner's conversations. ARGV: turn, max_turns, max_bytes, ttl_ms, conversation id.
# How many turns are kept (the most recent that fit, always the latest), or -1 when the conversation is gone.
APPEND = (
    INDEX
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
redis.call('RPUSH', KEYS[2], ARGV[1])
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[2]), -1)
local turns = redis.call('LRANGE', KEYS[2], 0, -1)
local total = 0
for _, turn in ipairs(turns) do
  total = total + #turn
end
local first = 1
while first < #turns and total > tonumber(ARGV[3]) do
  total = total - #turns[first]
  first = first + 1
end
if first > 1 then
  redis.call('LTRIM', KEYS[2], first - 1, -1)
end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
index(KEYS[3], ARGV[5], tonumber(ARGV[4]))
return #turns - first + 1
"""
)

# KEYS: asker, learner's questions. ARGV: learner, ttl_ms, question id.
ASKER = (
    INDEX
    + """
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
index(KEYS[2], ARGV[3], tonumber(ARGV[2]))
return 1
"""
)

# KEYS: learner's conversations, learner's questions, tombstone. ARGV: prefix, erased at (epoch s), tombstone ttl_ms.
# How many conversations were dropped. The tombstone keeps the latest of two erasures' times.
FORGET = """
local dropped = 0
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  dropped = dropped + redis.call('DEL', ARGV[1] .. ':conv:' .. id)
  redis.call('DEL', ARGV[1] .. ':turns:' .. id)
end
for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  redis.call('DEL', ARGV[1] .. ':asker:' .. id)
end
redis.call('DEL', KEYS[1], KEYS[2])
local latest = ARGV[2]
local before = redis.call('GET', KEYS[3])
if before and tonumber(before) > tonumber(latest) then
  latest = before
end
redis.call('SET', KEYS[3], latest, 'PX', ARGV[3])
return dropped
"""


def encode_turn(turn: Turn) -> bytes:
    """A turn as Redis keeps it: JSON in UTF-8, whose length is what the byte budget counts (a lone surrogate a
    client sent in its JSON passes through rather than fail the turn)."""
    return json.dumps([turn.question, turn.answer, turn.asked], ensure_ascii=False).encode("utf-8", "surrogatepass")


def decode_turn(raw: bytes) -> Turn:
    question, answer, *asked = json.loads(raw.decode("utf-8", "surrogatepass"))  # turns stored before: 2 fields
    return Turn(question, answer, asked[0] if asked else "")


class RedisConversationStore:
    """Conversations and askers in Redis, for every replica at once; erasures recorded as tombstones.

    A conversation keeps its most recent `max_turns` turns that fit in `max_conversation_bytes` (UTF-8 bytes of
    the stored turns; the latest always stays) and expires `ttl_s` after it was last used; so do askers. There is
    no store-wide cap: Redis's own `maxmemory` is the operator's bound (every key here has a TTL, so with
    `volatile-ttl`, as docker-compose.yml sets it, idle conversations go first and tombstones last).
    """

    def __init__(
        self,
        clients: RedisClients,
        *,
        prefix: str,
        ttl_s: float,
        max_turns: int = MAX_TURNS,
        max_conversation_bytes: int = MAX_CONVERSATION_BYTES,
        tombstone_ttl_s: float = TOMBSTONE_TTL_S,
    ) -> None:
        self._aio = clients.aio
        self._sync = clients.sync
        self._reach = clients.reachability
        self._prefix = prefix
        self._ttl_ms = max(1, round(ttl_s * 1000))
        self._max_turns = max_turns
        self._max_bytes = max_conversation_bytes
        self._tombstone_ttl_ms = max(1, round(tombstone_ttl_s * 1000))
        self._start = self._aio.register_script(START)
        self._continue = self._aio.register_script(CONTINUE)
        self._append = self._aio.register_script(APPEND)
        self._asker = self._aio.register_script(ASKER)
        self._forget = self._aio.register_script(FORGET)

    def _key(self, *parts: str) -> str:
        return ":".join((self._prefix, *parts))

    async def open(self, conversation_id: str | None, *, learner_key: str, module_id: str) -> Conversation:
        """Continue the learner's conversation about the module (NotFound otherwise), or start one when no id.

        With Redis unreachable, a fresh conversation that is not saved (with the id asked for, if any: there is
        no history to leak, and the learner gets an answer).
        """
        if conversation_id is not None:
            check_conversation_id(conversation_id)
        conversation = Conversation(
            conversation_id or uuid.uuid4().hex, learner_key, module_id, deque(maxlen=self._max_turns)
        )
        cid = conversation.id
        index = self._key("learner", learner_key, "conversations")
        args = [learner_key, module_id, self._ttl_ms, cid]
        if conversation_id is None:
            await self._reach.attempt(lambda: self._start(keys=[self._key("conv", cid), index], args=args))
            return conversation
        keys = [self._key("conv", cid), self._key("turns", cid), index]
        reached, turns = await self._reach.attempt(lambda: self._continue(keys=keys, args=args))
        if reached:
            if turns is None:
                raise conversation_not_found(cid)
            conversation.turns.extend(map(decode_turn, turns))
        return conversation

    async def append(self, conversation: Conversation, turn: Turn) -> None:
        """Record a finished turn, unless the conversation was erased or expired meanwhile (or Redis is away)."""
        cid = conversation.id
        index = self._key("learner", conversation.learner_key, "conversations")
        keys = [self._key("conv", cid), self._key("turns", cid), index]
        args = [encode_turn(turn), self._max_turns, self._max_bytes, self._ttl_ms, cid]
        reached, kept = await self._reach.attempt(lambda: self._append(keys=keys, args=args))
        conversation.turns.append(turn)
        if reached and kept is not None and kept >= 0:  # the caller's copy keeps what Redis kept
            while len(conversation.turns) > kept:
                conversation.turns.popleft()

    async def remember_asker(self, question_id: str, learner_key: str) -> None:
        """Note who asked a question, for ttl_s (skipped while Redis is away)."""
        keys = [self._key("asker", question_id), self._key("learner", learner_key, "questions")]
        await self._reach.attempt(lambda: self._asker(keys=keys, args=[learner_key, self._ttl_ms, question_id]))

    async def asker(self, question_id: str) -> str | None:
        """The pseudonym of who asked a recent question, if known (None while Redis is away)."""
        _, value = await self._reach.attempt(lambda: self._aio.get(self._key("asker", question_id)))
        return value.decode() if value else None

    async def forget_learner(self, learner_key: str) -> int:
        """Drop every conversation of one learner and who asked their questions, for every replica at once, and
        leave a tombstone; return how many conversations. NotReady when Redis cannot be reached: an erasure is
        complete or visibly failed."""
        keys = [
            self._key("learner", learner_key, "conversations"),
            self._key("learner", learner_key, "questions"),
            self._key("erased", learner_key),
        ]
        try:
            dropped = await self._forget(keys=keys, args=[self._prefix, repr(time.time()), self._tombstone_ttl_ms])
        except UNREACHABLE as exc:
            self._reach.failed(exc)
            raise NotReady("the learner state store (Redis) cannot be reached; erase again shortly") from exc
        self._reach.reached()
        return int(dropped)

    def erased_since(self, learner_keys: Collection[str]) -> dict[str, float]:
        """For each of these learners erased within the tombstone TTL, the epoch seconds of the latest erasure.

        Blocking (the signal writer's thread). NotReady when Redis cannot be reached: not knowing is not "none".
        """
        keys = list(learner_keys)
        if not keys:
            return {}
        try:
            values = self._sync.mget([self._key("erased", key) for key in keys])
        except UNREACHABLE as exc:
            raise NotReady(f"the learner state store (Redis) cannot be reached ({describe(exc)})") from exc
        return {key: float(value) for key, value in zip(keys, values, strict=True) if value is not None}


def redis_limiter(clients: RedisClients, *, prefix: str, limits: Mapping[str, Limit]) -> RateLimiter:
    """The named limits counted in Redis across replicas (the `limits` library's moving windows), let through
    while Redis is away."""
    # The limiter shares the clients' pool (and so their time-outs, database number and credentials).
    storage = RedisStorage(
        "async+redis://",
        implementation="redispy",
        key_prefix=f"{prefix}:rate",
        connection_pool=clients.aio.connection_pool,
    )
    return RateLimiter(MovingWindowRateLimiter(storage), limits, attempt=clients.reachability.attempt)
