"""Conversations kept on the server, each bound to one learner and one module; plus the per-learner rate limit."""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from mentor.answer import Turn
from mentor.errors import InvalidInput, NotFound, RateLimited

CONVERSATION_ID = re.compile(r"^[0-9a-f]{32}$")
MAX_TURNS = 20


@dataclass
class Conversation:
    """The turns of one learner's conversation about one module."""

    id: str
    learner_key: str
    module_id: str
    turns: deque[Turn] = field(default_factory=lambda: deque(maxlen=MAX_TURNS))
    touched: float = field(default_factory=time.monotonic)


class ConversationStore:
    """In-process, bounded (LRU) and expiring; the signals log keeps the durable record of every turn."""

    def __init__(self, *, ttl_s: float, max_conversations: int) -> None:
        self._ttl_s = ttl_s
        self._max = max_conversations
        self._items: OrderedDict[str, Conversation] = OrderedDict()
        self._lock = threading.Lock()

    def open(self, conversation_id: str | None, *, learner_key: str, module_id: str) -> Conversation:
        """Continue the learner's conversation, or start one when no id is given.

        Someone else's conversation, or one about another module, is reported as not found: its
        existence is not the asker's business.
        """
        now = time.monotonic()
        with self._lock:
            if conversation_id is None:
                conversation = Conversation(uuid.uuid4().hex, learner_key, module_id)
                self._items[conversation.id] = conversation
                while len(self._items) > self._max:
                    self._items.popitem(last=False)
                return conversation
            if not CONVERSATION_ID.match(conversation_id):
                raise InvalidInput("conversation_id: must be the 32-character id a previous answer returned")
            conversation = self._items.get(conversation_id)
            if (
                conversation is None
                or now - conversation.touched > self._ttl_s
                or conversation.learner_key != learner_key
                or conversation.module_id != module_id
            ):
                raise NotFound(f"conversation {conversation_id} not found for this learner and module")
            conversation.touched = now
            self._items.move_to_end(conversation_id)
            return conversation

    def forget_learner(self, learner_key: str) -> int:
        """Drop every conversation of one learner (erasure); return how many."""
        with self._lock:
            doomed = [cid for cid, c in self._items.items() if c.learner_key == learner_key]
            for cid in doomed:
                del self._items[cid]
        return len(doomed)

    def append(self, conversation: Conversation, turn: Turn) -> None:
        """Record a finished turn."""
        with self._lock:
            conversation.turns.append(turn)
            conversation.touched = time.monotonic()


class RateLimiter:
    """At most `per_minute` questions per learner in any sliding 60-second window."""

    def __init__(self, per_minute: int) -> None:
        self._limit = per_minute
        self._seen: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def check(self, key: str) -> None:
        """Count one question for `key`, or raise RateLimited with the seconds to wait."""
        now = time.monotonic()
        with self._lock:
            window = self._seen.setdefault(key, deque())
            while window and now - window[0] >= 60:
                window.popleft()
            if len(window) >= self._limit:
                retry = max(1, int(60 - (now - window[0])) + 1)
                raise RateLimited(f"too many questions: at most {self._limit} a minute; try again in {retry} s", retry)
            window.append(now)
            if len(self._seen) > 100_000:  # forget idle learners so the map cannot grow without bound
                for stale in [k for k, w in self._seen.items() if not w or now - w[-1] >= 60]:
                    del self._seen[stale]
