"""Learner state the chat keeps between questions, behind a small async Protocol: conversations (each bound to
one learner and one module, with who asked each recent question, for feedback). Rate limits are `mentor.throttle`'s.

The in-memory class here is the embedded default; a shared store (`mentor.redis_state`) implements the same
Protocol so that replicas agree, and `mentor.conversation_files` keeps `mentor ask`'s between commands. The
methods are async because a shared store does I/O, except `erased_since`, which the signal writer calls from its
own thread.
"""

from __future__ import annotations

import re
import sys
import threading
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Protocol

from mentor.answer import Turn
from mentor.errors import InvalidInput, NotFound

CONVERSATION_ID = re.compile(r"^[0-9a-f]{32}$")
MAX_TURNS = 20
# Per conversation: what the readers of the history use, with room to spare. The LLM is sent at most 6,000
# characters of it by default (llm_history_tokens x 4); retrieval and the planner lean on the latest turns.
# Bounded by count alone, 20 turns of 4,000-character questions with their answers held up to ~200 KB per
# conversation, and a soak of long turns grew RSS by 322 MB.
MAX_CONVERSATION_BYTES = 16 * 1024
# For the whole store: small next to the process's own baseline (~760 MB RSS with the model loaded), so learner
# state can never dominate it. 64 MB holds ~4,000 conversations at their cap, or ~12,000 ordinary ones (three
# turns of short questions and answers). A setting would be better than this default (see ConversationStore).
MAX_STORE_BYTES = 64 * 1024 * 1024
# What an empty conversation costs besides its turns (object, deque, ids, the store's entry): ~1 KB by tracemalloc.
CONVERSATION_OVERHEAD_BYTES = 1024
MAX_ASKERS = 100_000
# How long an erasure is remembered: long enough for any record of the learner still spooled by a replica whose
# database was down (spools are replayed within hours) to be dropped rather than written.
TOMBSTONE_TTL_S = 30 * 24 * 3600
MAX_TOMBSTONES = 100_000


def check_conversation_id(conversation_id: str) -> None:
    """Raise InvalidInput unless `conversation_id` has the shape of an id this service hands out."""
    if not CONVERSATION_ID.match(conversation_id):
        raise InvalidInput("conversation_id: must be the 32-character id a previous answer returned")


def conversation_not_found(conversation_id: str) -> NotFound:
    """The one answer for a conversation that is unknown, expired, someone else's or about another module."""
    return NotFound(f"conversation {conversation_id} not found for this learner and module")


def turn_bytes(turn: Turn) -> int:
    """Memory a stored turn holds: its object and its texts (1, 2 or 4 bytes a character, as CPython keeps them)."""
    return sys.getsizeof(turn) + sys.getsizeof(turn.question) + sys.getsizeof(turn.answer) + sys.getsizeof(turn.asked)


@dataclass
class Conversation:
    """The turns of one learner's conversation about one module."""

    id: str
    learner_key: str
    module_id: str
    turns: deque[Turn] = field(default_factory=lambda: deque(maxlen=MAX_TURNS))
    touched: float = field(default_factory=time.monotonic)
    stored_bytes: int = CONVERSATION_OVERHEAD_BYTES


def add_turn(conversation: Conversation, turn: Turn, max_conversation_bytes: int) -> None:
    """Append a finished turn, dropping the conversation's oldest turns beyond MAX_TURNS and its byte budget."""
    if len(conversation.turns) == conversation.turns.maxlen:
        conversation.stored_bytes -= turn_bytes(conversation.turns.popleft())
    conversation.turns.append(turn)
    conversation.stored_bytes += turn_bytes(turn)
    # The latest turn stays even alone over budget: a follow-up reads it, and one turn is bounded by the message
    # limit and the answer's.
    while len(conversation.turns) > 1 and conversation.stored_bytes > max_conversation_bytes:
        conversation.stored_bytes -= turn_bytes(conversation.turns.popleft())


class ConversationStore(Protocol):
    """Where conversations and the askers of recent questions live."""

    async def open(self, conversation_id: str | None, *, learner_key: str, module_id: str) -> Conversation:
        """Continue the learner's conversation about the module (NotFound otherwise), or start one when no id."""
        ...

    async def append(self, conversation: Conversation, turn: Turn) -> None:
        """Record a finished turn."""
        ...

    async def remember_asker(self, question_id: str, learner_key: str) -> None:
        """Note who asked a question, so feedback can be checked before its signal row is written."""
        ...

    async def asker(self, question_id: str) -> str | None:
        """The pseudonym of who asked a recent question, if known."""
        ...

    async def forget_learner(self, learner_key: str) -> int:
        """Drop every conversation of one learner and who asked their questions, and remember the erasure (its
        time.time()) for TOMBSTONE_TTL_S; return how many conversations. Raise NotReady rather than erase partly."""
        ...

    def erased_since(self, learner_keys: Collection[str]) -> dict[str, float]:
        """For each of these learners erased within TOMBSTONE_TTL_S, the epoch seconds of the latest erasure.

        Synchronous: the signal writer calls it from its thread and drops the records made before that time (a
        learner who asks again after the erasure is logged again). Raise when the answer cannot be known.
        """
        ...


class MemoryConversationStore:
    """In-process, bounded by count and by bytes (least recently used go first) and expiring; the signals log
    keeps the durable record of every turn.

    `max_bytes` caps the whole store and `max_conversation_bytes` each conversation (its most recent turns that
    fit are kept, and always the latest). Both are constructor arguments so the edge can pass settings.
    Erasures are remembered for `tombstone_ttl_s` (the most recent 100,000).
    """

    def __init__(
        self,
        *,
        ttl_s: float,
        max_conversations: int,
        max_bytes: int = MAX_STORE_BYTES,
        max_conversation_bytes: int = MAX_CONVERSATION_BYTES,
        tombstone_ttl_s: float = TOMBSTONE_TTL_S,
    ) -> None:
        self._ttl_s = ttl_s
        self._tombstone_ttl_s = tombstone_ttl_s
        self._max = max_conversations
        self._max_bytes = max_bytes
        self._max_conversation_bytes = max_conversation_bytes
        self._items: OrderedDict[str, Conversation] = OrderedDict()  # least recently used first
        self._bytes = 0
        self._lock = threading.Lock()
        # Who asked each recent question, and when (bounded: feedback comes soon after an answer, or from the log).
        self._askers: OrderedDict[str, tuple[str, float]] = OrderedDict()
        # When each recently erased learner was erased (epoch seconds), oldest erasure first.
        self._erased: OrderedDict[str, float] = OrderedDict()

    @property
    def stored_bytes(self) -> int:
        """Bytes the stored conversations hold, by the store's own count."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    async def open(self, conversation_id: str | None, *, learner_key: str, module_id: str) -> Conversation:
        """Continue the learner's conversation, or start one when no id is given.

        Someone else's conversation, or one about another module, is reported as not found: its
        existence is not the asker's business.
        """
        now = time.monotonic()
        with self._lock:
            if conversation_id is None:
                conversation = Conversation(uuid.uuid4().hex, learner_key, module_id)
                self._items[conversation.id] = conversation
                self._bytes += conversation.stored_bytes
                self._evict(now)
                return conversation
            check_conversation_id(conversation_id)
            conversation = self._items.get(conversation_id)
            if (
                conversation is None
                or now - conversation.touched > self._ttl_s
                or conversation.learner_key != learner_key
                or conversation.module_id != module_id
            ):
                raise conversation_not_found(conversation_id)
            conversation.touched = now
            self._items.move_to_end(conversation_id)
            return conversation

    async def forget_learner(self, learner_key: str) -> int:
        """Drop every conversation of one learner (erasure) and the record of what they asked, and remember when;
        return how many conversations."""
        with self._lock:
            self._erased.pop(learner_key, None)
            self._erased[learner_key] = time.time()
            if len(self._erased) > MAX_TOMBSTONES:
                self._erased.popitem(last=False)
            doomed = [cid for cid, c in self._items.items() if c.learner_key == learner_key]
            for cid in doomed:
                self._bytes -= self._items.pop(cid).stored_bytes
            for qid in [q for q, (k, _) in self._askers.items() if k == learner_key]:
                del self._askers[qid]
        return len(doomed)

    def erased_since(self, learner_keys: Collection[str]) -> dict[str, float]:
        """For each of these learners erased within the tombstone TTL, the epoch seconds of the latest erasure."""
        oldest = time.time() - self._tombstone_ttl_s
        with self._lock:
            while self._erased and next(iter(self._erased.values())) < oldest:
                self._erased.popitem(last=False)
            return {key: self._erased[key] for key in learner_keys if key in self._erased}

    async def remember_asker(self, question_id: str, learner_key: str) -> None:
        """Note who asked a question, for the conversations' TTL (the most recent 100,000 are kept)."""
        with self._lock:
            self._askers[question_id] = (learner_key, time.monotonic())
            if len(self._askers) > MAX_ASKERS:
                self._askers.popitem(last=False)

    async def asker(self, question_id: str) -> str | None:
        """The pseudonym of who asked a recent question in this process, if known."""
        learner_key, asked = self._askers.get(question_id, (None, 0.0))
        return learner_key if time.monotonic() - asked <= self._ttl_s else None

    async def append(self, conversation: Conversation, turn: Turn) -> None:
        """Record a finished turn, dropping the conversation's oldest turns beyond its byte budget."""
        now = time.monotonic()
        with self._lock:
            stored = self._items.get(conversation.id) is conversation
            if stored and now - conversation.touched > self._ttl_s:  # expired meanwhile: not brought back
                self._bytes -= self._items.pop(conversation.id).stored_bytes
                stored = False
            before = conversation.stored_bytes
            add_turn(conversation, turn, self._max_conversation_bytes)
            conversation.touched = now
            if stored:  # not when it was evicted or erased while this turn was being answered
                self._bytes += conversation.stored_bytes - before
                self._items.move_to_end(conversation.id)
                self._evict(now)

    def _evict(self, now: float) -> None:
        """Drop expired conversations, then least recently used ones, until count and bytes are within bounds.

        The most recently used one always stays, so the learner who just asked can follow up.
        """
        while len(self._items) > 1:
            oldest = next(iter(self._items.values()))
            over = len(self._items) > self._max or self._bytes > self._max_bytes
            if not over and now - oldest.touched <= self._ttl_s:
                return
            self._bytes -= self._items.pop(oldest.id).stored_bytes
