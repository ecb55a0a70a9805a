"""The conversation store: bounded by count, by bytes per conversation and by bytes overall; expiring; erasable."""

from __future__ import annotations

import asyncio
import time
import tracemalloc

import pytest

from mentor.answer import Turn
from mentor.conversations import CONVERSATION_OVERHEAD_BYTES, MemoryConversationStore, turn_bytes
from mentor.errors import NotFound

MODULE = "P10.llm-systems-frontier.02"
run = asyncio.run  # the store's methods are async (a shared store does I/O); the memory one never awaits


def long_turn(n: int) -> Turn:
    """A turn of the soak's long kind: a ~3,900-character question and an answer of ~1,500 characters."""
    return Turn(f"question {n}: " + "how does ZeRO shard optimizer state " * 108, f"answer {n}: " + "it shards " * 150)


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
