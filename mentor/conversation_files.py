"""Conversations kept as files in the data directory: what `mentor ask` uses, so that a later `mentor ask
--conversation ID` (another process) continues one. Same Protocol as `mentor.conversations`' memory store.

One JSON file a conversation, `{directory}/{id}.json` (owner-only): its learner pseudonym, module and turns; the
file's modification time is its last use. Each is written whole to a temporary file and renamed, so a reader finds
the old file or the new one, never half of one; two commands answering in the same conversation at once keep the
turn of the one that finishes last. A file unused for `ttl_s` is not continued, nor written again, and is deleted
whenever a conversation starts.

Who asked each question and the erasures are this process's alone (a memory store's): they serve feedback and the
signal writer of a server, and a command line answers one question and exits.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
import uuid
from collections.abc import Collection
from pathlib import Path

from mentor.answer import Turn
from mentor.conversations import (
    MAX_CONVERSATION_BYTES,
    TOMBSTONE_TTL_S,
    Conversation,
    MemoryConversationStore,
    add_turn,
    check_conversation_id,
    conversation_not_found,
    turn_bytes,
)

FORMAT = 1  # bump when the file's shape changes: files of another format are not continued


class FileConversationStore:
    """Conversations in `directory` (created owner-only), each continued until unused for `ttl_s`."""

    def __init__(
        self,
        directory: Path,
        *,
        ttl_s: float,
        max_conversation_bytes: int = MAX_CONVERSATION_BYTES,
        tombstone_ttl_s: float = TOMBSTONE_TTL_S,
    ) -> None:
        self._dir = directory
        self._ttl_s = ttl_s
        self._max_conversation_bytes = max_conversation_bytes
        # Askers and erasures: this process's (see the module's docstring).
        self._process = MemoryConversationStore(ttl_s=ttl_s, max_conversations=10, tombstone_ttl_s=tombstone_ttl_s)
        # Conversations started here and not written yet (no turn answered): id -> (learner, module, when).
        self._started: dict[str, tuple[str, str, float]] = {}

    async def open(self, conversation_id: str | None, *, learner_key: str, module_id: str) -> Conversation:
        """Continue the learner's conversation about the module from its file, or start one when no id is given.

        Someone else's conversation, or one about another module, is reported as not found, as the memory store
        reports it.
        """
        if conversation_id is None:
            self._delete_expired()
            conversation = Conversation(uuid.uuid4().hex, learner_key, module_id)
            self._started[conversation.id] = (learner_key, module_id, time.monotonic())
            return conversation
        check_conversation_id(conversation_id)  # also what keeps the id a plain file name
        if self._started_here(conversation_id, (learner_key, module_id)):
            return Conversation(conversation_id, learner_key, module_id)  # no turn yet
        path = self._path(conversation_id)
        try:
            if not self._fresh(path):
                raise conversation_not_found(conversation_id)
            stored = json.loads(path.read_text(encoding="utf-8"))
            turns = [Turn(*turn) for turn in stored["turns"]]
            owner = (stored["format"], stored["learner"], stored["module"])
        except (OSError, ValueError, KeyError, TypeError):
            raise conversation_not_found(conversation_id) from None
        if owner != (FORMAT, learner_key, module_id):
            raise conversation_not_found(conversation_id)
        with contextlib.suppress(OSError):
            os.utime(path)  # used now
        conversation = Conversation(conversation_id, learner_key, module_id)
        conversation.turns.extend(turns)
        conversation.stored_bytes += sum(turn_bytes(turn) for turn in turns)
        return conversation

    async def append(self, conversation: Conversation, turn: Turn) -> None:
        """Record a finished turn: the conversation's file is written anew, unless it expired or was erased while
        the turn was answered (then nothing is kept)."""
        owner = (conversation.learner_key, conversation.module_id)
        if conversation.turns:  # continued: its file must still be there, and fresh
            kept = self._fresh(self._path(conversation.id))
        else:
            kept = self._started_here(conversation.id, owner)
            self._started.pop(conversation.id, None)
        add_turn(conversation, turn, self._max_conversation_bytes)
        if not kept:
            return
        document = {
            "format": FORMAT,
            "learner": conversation.learner_key,
            "module": conversation.module_id,
            "turns": [[t.question, t.answer, t.asked] for t in conversation.turns],
        }
        self._dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, partial = tempfile.mkstemp(dir=self._dir, prefix=f".{conversation.id}.", suffix=".tmp")  # mode 0600
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(document, out, ensure_ascii=False)
            os.replace(partial, self._path(conversation.id))
        finally:
            Path(partial).unlink(missing_ok=True)

    async def remember_asker(self, question_id: str, learner_key: str) -> None:
        """Note who asked a question (in this process)."""
        await self._process.remember_asker(question_id, learner_key)

    async def asker(self, question_id: str) -> str | None:
        """The pseudonym of who asked a question in this process, if known."""
        return await self._process.asker(question_id)

    async def forget_learner(self, learner_key: str) -> int:
        """Delete every conversation file of one learner, and remember the erasure (in this process); return how
        many conversations."""
        await self._process.forget_learner(learner_key)
        self._started = {cid: owner for cid, owner in self._started.items() if owner[0] != learner_key}
        forgotten = 0
        for path in self._dir.glob("*.json"):
            try:
                if json.loads(path.read_text(encoding="utf-8")).get("learner") == learner_key:
                    path.unlink()
                    forgotten += 1
            except (OSError, ValueError, AttributeError):  # gone meanwhile, or not a conversation
                continue
        return forgotten

    def erased_since(self, learner_keys: Collection[str]) -> dict[str, float]:
        """Erasures made in this process, for the signal writer."""
        return self._process.erased_since(learner_keys)

    def _path(self, conversation_id: str) -> Path:
        return self._dir / f"{conversation_id}.json"

    def _started_here(self, conversation_id: str, owner: tuple[str, str]) -> bool:
        """Whether this store started the conversation for `owner` (learner, module) within the TTL."""
        learner_key, module_id, started = self._started.get(conversation_id, ("", "", 0.0))
        return (learner_key, module_id) == owner and time.monotonic() - started <= self._ttl_s

    def _fresh(self, path: Path) -> bool:
        """Whether the file is there and was used within the TTL."""
        try:
            return time.time() - path.stat().st_mtime <= self._ttl_s
        except OSError:
            return False

    def _delete_expired(self) -> None:
        """Delete the files unused for longer than the TTL."""
        for path in self._dir.glob("*.json"):
            if not self._fresh(path):
                path.unlink(missing_ok=True)
