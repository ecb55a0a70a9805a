"""The conversation stores: the Protocol's contract, run against the memory store, the Redis one and the files
`mentor ask` keeps; then the memory store's own bounds (count, bytes per conversation, bytes overall), expiry and
erasure, and what the files are on disk."""

from __future__ import annotations

import asyncio
import json
import shutil
import stat
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from mentor.answer import Turn
from mentor.conversation_files import FileConversationStore
from mentor.conversations import (
    CONVERSATION_OVERHEAD_BYTES,
    ConversationStore,
    MemoryConversationStore,
    turn_bytes,
)
from mentor.errors import InvalidInput, NotFound
from mentor.redis_state import RedisClients, RedisConversationStore, connect_redis

MODULE = "P10.llm-systems-frontier.02"
OTHER_MODULE = "P10.llm-systems-frontier.03"
REDIS_URL = "redis://127.0.0.1:6379/0"
run = asyncio.run  # the store's methods are async (a shared store does I/O); the memory one never awaits


def long_turn(n: int) -> Turn:
    """A turn of the soak's long kind: a ~3,900-character question and an answer of ~1,500 characters."""
    return Turn(f"question {n}: " + "how does ZeRO shard optimizer state " * 108, f"answer {n}: " + "it shards " * 150)


class Backend:
    """Builds stores of one kind for a test. Each Redis store has its own clients, as a replica would, and all of
    a test's share one key prefix, removed afterwards; file stores share one directory, as successive commands do."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.prefix = f"test-conversations:{uuid.uuid4().hex}"
        self.directory = Path(tempfile.mkdtemp(prefix="test-conversations-")) / "conversations"
        self._clients: list[RedisClients] = []

    def store(
        self, *, ttl_s: float = 3600, max_conversation_bytes: int = 16 * 1024, tombstone_ttl_s: float = 3600
    ) -> ConversationStore:
        if self.kind == "memory":
            return MemoryConversationStore(
                ttl_s=ttl_s,
                max_conversations=1000,
                max_conversation_bytes=max_conversation_bytes,
                tombstone_ttl_s=tombstone_ttl_s,
            )
        if self.kind == "files":
            return FileConversationStore(
                self.directory,
                ttl_s=ttl_s,
                max_conversation_bytes=max_conversation_bytes,
                tombstone_ttl_s=tombstone_ttl_s,
            )
        clients = connect_redis(REDIS_URL)
        self._clients.append(clients)
        return RedisConversationStore(
            clients,
            prefix=self.prefix,
            ttl_s=ttl_s,
            max_conversation_bytes=max_conversation_bytes,
            tombstone_ttl_s=tombstone_ttl_s,
        )

    def run(self, scenario: Callable[[], Awaitable[Any]]) -> None:
        """Run one scenario in one event loop (the Redis clients' pools belong to the loop that used them)."""

        async def main() -> None:
            try:
                await scenario()
            finally:
                for clients in self._clients:
                    await clients.aclose()
                self._clients.clear()

        asyncio.run(main())

    def remove_keys(self) -> None:
        shutil.rmtree(self.directory.parent, ignore_errors=True)
        if self.kind != "redis":
            return
        with redis.Redis.from_url(REDIS_URL) as client:
            for key in client.scan_iter(match=f"{self.prefix}:*", count=1000):
                client.delete(key)


@pytest.fixture(params=["memory", "redis", "files"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    backend = Backend(request.param)
    yield backend
    backend.remove_keys()


async def turns_of(store: ConversationStore, conversation_id: str, learner_key: str = "k") -> list[Turn]:
    """The turns a later question of the learner would see."""
    return list((await store.open(conversation_id, learner_key=learner_key, module_id=MODULE)).turns)


def test_a_follow_up_sees_the_earlier_turns_in_order(backend: Backend) -> None:
    async def scenario() -> None:
        store = backend.store()
        first = await store.open(None, learner_key="k", module_id=MODULE)
        assert list(first.turns) == []
        await store.append(first, Turn("what is ZeRO?", "it shards optimizer state"))
        follow_up = await store.open(first.id, learner_key="k", module_id=MODULE)
        assert list(follow_up.turns) == [Turn("what is ZeRO?", "it shards optimizer state")]
        await store.append(follow_up, Turn("and stage 3? ünïcödé ✓", "parameters too"))
        assert await turns_of(store, first.id) == [
            Turn("what is ZeRO?", "it shards optimizer state"),
            Turn("and stage 3? ünïcödé ✓", "parameters too"),
        ]
        other = await store.open(None, learner_key="k", module_id=MODULE)
        assert other.id != first.id and await turns_of(store, other.id) == []

    backend.run(scenario)


def test_a_conversation_is_its_learners_and_its_modules_alone(backend: Backend) -> None:
    async def scenario() -> None:
        store = backend.store()
        mine = await store.open(None, learner_key="k", module_id=MODULE)
        await store.append(mine, Turn("secret question", "secret answer"))
        message = f"conversation {mine.id} not found for this learner and module"
        with pytest.raises(NotFound, match=message):
            await store.open(mine.id, learner_key="someone-else", module_id=MODULE)
        with pytest.raises(NotFound, match=message):
            await store.open(mine.id, learner_key="k", module_id=OTHER_MODULE)
        with pytest.raises(NotFound):
            await store.open(uuid.uuid4().hex, learner_key="k", module_id=MODULE)
        for malformed in ("", "../../etc", "A" * 32, mine.id + "0"):
            with pytest.raises(InvalidInput, match="conversation_id: must be the 32-character id"):
                await store.open(malformed, learner_key="k", module_id=MODULE)
        assert await turns_of(store, mine.id) == [Turn("secret question", "secret answer")]

    backend.run(scenario)


def test_a_conversation_keeps_its_last_twenty_turns(backend: Backend) -> None:
    async def scenario() -> None:
        store = backend.store()
        conversation = await store.open(None, learner_key="k", module_id=MODULE)
        for n in range(25):
            await store.append(conversation, Turn(f"what is stage {n}?", "short answer"))
        expected = [f"what is stage {n}?" for n in range(5, 25)]
        assert [t.question for t in conversation.turns] == expected
        assert [t.question for t in await turns_of(store, conversation.id)] == expected

    backend.run(scenario)


def test_a_conversation_keeps_its_latest_turns_that_fit_its_byte_budget(backend: Backend) -> None:
    async def scenario() -> None:
        store = backend.store(max_conversation_bytes=16 * 1024)
        conversation = await store.open(None, learner_key="k", module_id=MODULE)
        turns = [long_turn(n) for n in range(20)]
        for turn in turns:
            await store.append(conversation, turn)
        kept = await turns_of(store, conversation.id)
        assert kept == turns[-len(kept) :], "the most recent turns are the ones kept, in order"
        assert 2 <= len(kept) < 20
        assert sum(len(t.question.encode()) + len(t.answer.encode()) for t in kept) <= 16 * 1024
        assert list(conversation.turns) == kept, "the caller's copy holds what the store holds"

        tight = backend.store(max_conversation_bytes=2 * 1024)  # the latest turn stays even alone over budget
        small = await tight.open(None, learner_key="k", module_id=MODULE)
        await tight.append(small, Turn("short?", "short."))
        await tight.append(small, long_turn(1))
        assert await turns_of(tight, small.id) == [long_turn(1)]

    backend.run(scenario)


def test_conversations_and_askers_expire_unless_used(backend: Backend) -> None:
    async def scenario() -> None:
        store = backend.store(ttl_s=0.6)
        kept = await store.open(None, learner_key="k", module_id=MODULE)
        await store.append(kept, Turn("q", "a"))
        left = await store.open(None, learner_key="k", module_id=MODULE)
        await store.remember_asker("a" * 32, "k")
        for _ in range(3):  # used every 0.3 s: alive well past its TTL
            await asyncio.sleep(0.3)
            assert await turns_of(store, kept.id) == [Turn("q", "a")]
        with pytest.raises(NotFound):
            await store.open(left.id, learner_key="k", module_id=MODULE)
        assert await store.asker("a" * 32) is None
        await asyncio.sleep(0.8)
        with pytest.raises(NotFound):
            await store.open(kept.id, learner_key="k", module_id=MODULE)
        await store.append(kept, Turn("late", "turn"))  # an expired conversation is not brought back
        with pytest.raises(NotFound):
            await store.open(kept.id, learner_key="k", module_id=MODULE)

    backend.run(scenario)


def test_erasure_drops_the_learners_conversations_and_askers_and_leaves_a_tombstone(backend: Backend) -> None:
    async def scenario() -> None:
        store = backend.store()
        gone = [await store.open(None, learner_key="erase-me", module_id=m) for m in (MODULE, OTHER_MODULE)]
        for conversation in gone:
            await store.append(conversation, Turn("my question", "an answer"))
        await store.remember_asker("e" * 32, "erase-me")
        kept = await store.open(None, learner_key="keep-me", module_id=MODULE)
        await store.append(kept, Turn("their question", "their answer"))
        await store.remember_asker("f" * 32, "keep-me")

        before = time.time()
        assert await store.forget_learner("erase-me") == 2
        after = time.time()
        for conversation in gone:
            with pytest.raises(NotFound):
                await store.open(conversation.id, learner_key="erase-me", module_id=conversation.module_id)
        assert await store.asker("e" * 32) is None
        await store.append(gone[0], Turn("answered during the erasure", "..."))  # not stored again
        with pytest.raises(NotFound):
            await store.open(gone[0].id, learner_key="erase-me", module_id=MODULE)
        assert await turns_of(store, kept.id, "keep-me") == [Turn("their question", "their answer")]
        assert await store.asker("f" * 32) == "keep-me"

        erased = await asyncio.to_thread(store.erased_since, {"erase-me", "keep-me", "never-seen"})
        assert list(erased) == ["erase-me"]
        assert before <= erased["erase-me"] <= after
        assert await store.forget_learner("erase-me") == 0  # erasing again is harmless, and the latest time counts
        assert store.erased_since(["erase-me"])["erase-me"] >= erased["erase-me"]
        assert store.erased_since([]) == {}

    backend.run(scenario)


def test_a_tombstone_expires(backend: Backend) -> None:
    async def scenario() -> None:
        store = backend.store(tombstone_ttl_s=0.3)
        await store.forget_learner("erase-me")
        assert set(store.erased_since(["erase-me"])) == {"erase-me"}
        await asyncio.sleep(0.5)
        assert store.erased_since(["erase-me"]) == {}

    backend.run(scenario)


def recount(store: MemoryConversationStore) -> int:
    """The bytes the store should hold, recomputed from what it holds."""
    return sum(CONVERSATION_OVERHEAD_BYTES + sum(map(turn_bytes, c.turns)) for c in store._items.values())


def test_a_conversation_keeps_its_most_recent_turns_that_fit_its_byte_budget() -> None:
    store = MemoryConversationStore(ttl_s=3600, max_conversations=100, max_conversation_bytes=16 * 1024)
    conversation = run(store.open(None, learner_key="k", module_id=MODULE))
    turns = [long_turn(n) for n in range(20)]
    for turn in turns:
        run(store.append(conversation, turn))
    kept = list(conversation.turns)
    assert kept == turns[-len(kept) :], "the most recent turns are the ones kept, in order"
    assert 2 <= len(kept) < 20
    assert conversation.stored_bytes <= 16 * 1024
    assert store.stored_bytes == recount(store)


def test_short_turns_are_still_bounded_by_count() -> None:
    store = MemoryConversationStore(ttl_s=3600, max_conversations=100)
    conversation = run(store.open(None, learner_key="k", module_id=MODULE))
    for n in range(25):
        run(store.append(conversation, Turn(f"what is stage {n}?", "short answer")))
    assert [t.question for t in conversation.turns] == [f"what is stage {n}?" for n in range(5, 25)]
    assert store.stored_bytes == recount(store)


def test_the_latest_turn_stays_even_when_it_alone_is_over_budget() -> None:
    """A follow-up reads the previous turn, so it is never dropped; one turn is bounded by the message limit."""
    store = MemoryConversationStore(ttl_s=3600, max_conversations=100, max_conversation_bytes=2 * 1024)
    conversation = run(store.open(None, learner_key="k", module_id=MODULE))
    run(store.append(conversation, Turn("short?", "short.")))
    run(store.append(conversation, long_turn(1)))
    assert list(conversation.turns) == [long_turn(1)]


def test_the_store_evicts_least_recently_used_conversations_beyond_its_byte_budget() -> None:
    budget = 256 * 1024
    store = MemoryConversationStore(ttl_s=3600, max_conversations=10_000, max_bytes=budget)
    ids = []
    for n in range(100):
        conversation = run(store.open(None, learner_key=f"learner-{n}", module_id=MODULE))
        run(store.append(conversation, long_turn(n)))
        ids.append(conversation.id)
        if n % 10 == 0:  # learner 0 keeps coming back, so their conversation stays recently used
            first = run(store.open(ids[0], learner_key="learner-0", module_id=MODULE))
            run(store.append(first, long_turn(n)))
        assert store.stored_bytes <= budget
        assert store.stored_bytes == recount(store)
    assert 10 < len(store) < 100
    run(store.open(ids[0], learner_key="learner-0", module_id=MODULE))
    run(store.open(ids[-1], learner_key="learner-99", module_id=MODULE))
    with pytest.raises(NotFound):
        run(store.open(ids[1], learner_key="learner-1", module_id=MODULE))


def test_memory_held_by_long_turns_is_bounded_and_released() -> None:
    """What the process really allocates (tracemalloc), not only the store's own count, stays within budget.

    300 conversations of 20 long turns: ~33 MB when bounded by count alone; at 16 KB each, ~5 MB.
    """
    store = MemoryConversationStore(ttl_s=3600, max_conversations=50_000)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(300):
            conversation = run(store.open(None, learner_key=f"learner-{n}", module_id=MODULE))
            for i in range(20):
                run(store.append(conversation, long_turn(n * 20 + i)))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 300 * 18 * 1024, f"{held / 2**20:.1f} MB held"
    assert store.stored_bytes == recount(store)


def test_erasure_and_expiry_release_their_bytes() -> None:
    store = MemoryConversationStore(ttl_s=0.2, max_conversations=100)
    gone = run(store.open(None, learner_key="erase-me", module_id=MODULE))
    run(store.append(gone, long_turn(1)))
    assert run(store.forget_learner("erase-me")) == 1
    run(store.append(gone, long_turn(2)))  # a turn finished after the erasure is not stored again
    assert store.stored_bytes == 0 and len(store) == 0
    old = run(store.open(None, learner_key="a", module_id=MODULE))
    run(store.append(old, long_turn(3)))
    time.sleep(0.3)
    fresh = run(store.open(None, learner_key="b", module_id=MODULE))  # any later use purges what has expired
    assert len(store) == 1
    assert store.stored_bytes == recount(store) == CONVERSATION_OVERHEAD_BYTES
    with pytest.raises(NotFound):
        run(store.open(old.id, learner_key="a", module_id=MODULE))
    assert run(store.open(fresh.id, learner_key="b", module_id=MODULE)) is fresh


def test_command_line_conversations_are_owner_only_files_that_a_later_process_continues(tmp_path) -> None:
    """What `mentor ask` keeps: one JSON file a conversation, read whole by the next command's store."""
    directory = tmp_path / "data" / "conversations"
    first = FileConversationStore(directory, ttl_s=3600)
    conversation = run(first.open(None, learner_key="k", module_id=MODULE))
    assert not directory.exists()  # nothing is written until a turn is answered
    run(first.append(conversation, Turn("what does ZeRO stage 1 shard?", "optimizer states", "ZeRO stage 1")))
    path = directory / f"{conversation.id}.json"
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in directory.iterdir()] == [path.name]  # no temporary file left behind
    later = FileConversationStore(directory, ttl_s=3600)  # another process
    continued = run(later.open(conversation.id, learner_key="k", module_id=MODULE))
    assert list(continued.turns) == [Turn("what does ZeRO stage 1 shard?", "optimizer states", "ZeRO stage 1")]
    assert continued.stored_bytes == conversation.stored_bytes  # the byte budget counts the same turns
    path.write_text(json.dumps({"format": 0, "learner": "k", "module": MODULE, "turns": []}))
    with pytest.raises(NotFound):  # another format, or a file cut short, is not continued
        run(later.open(conversation.id, learner_key="k", module_id=MODULE))
    path.write_text('{"format": 1, "learner": "k", "mod')
    with pytest.raises(NotFound):
        run(later.open(conversation.id, learner_key="k", module_id=MODULE))
