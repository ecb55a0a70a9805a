"""Conversations kept as files in the data directory: what `mentor ask` uses, so that a later `mentor ask
--conversation ID` (another process) continues one. Same Protocol as `mentor.conversations`' memory store.

One JSON file a conversation, `{directory}/{id}.json`: its learner pseudonym, module, turns and last use (epoch
seconds). Each is written whole to a temporary file and renamed, so a reader finds the old file or the new one,
never half of one; two commands answering in the same conversation at once keep the turn of the one that
finishes last. Files unused for `ttl_s` are not continued and are deleted whenever a conversation starts.

Who asked each question and the erasures are this process's alone (the memory store's): they serve feedback and
the signal writer of a server, and a command line answers one question and exits.
"""

from __future__ import annotations

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

    def __init__(self, directory: Path, *, ttl_s: float, max_conversation_bytes: int = MAX_CONVERSATION_BYTES) -> None:
        self._dir = directory
        self._ttl_s = ttl_s
        self._max_conversation_bytes = max_conversation_bytes
        # Askers and erasures: this process's (see the module's docstring).
        self._process = MemoryConversationStore(ttl_s=ttl_s, max_conversations=10)

    async def open(self, conversation_id: str | None, *, learner_key: str, module_id: str) -> Conversation:
        """Continue the learner's conversation about the module from its file, or start one when no id is given."""
        if conversation_id is None:
            self._delete_expired()
            return Conversation(uuid.uuid4().hex, learner_key, module_id)
        check_conversation_id(conversation_id)  # also what keeps the id a plain file name
        try:
            stored = json.loads(self._path(conversation_id).read_text(encoding="utf-8"))
            fresh = time.time() - float(stored["touched"]) <= self._ttl_s
            turns = [Turn(*turn) for turn in stored["turns"]] if stored.get("format") == FORMAT else None
        except (OSError, ValueError, KeyError, TypeError):
            raise conversation_not_found(conversation_id) from None
        if not fresh or turns is None or (stored["learner"], stored["module"]) != (learner_key, module_id):
            raise conversation_not_found(conversation_id)
        conversation = Conversation(conversation_id, learner_key, module_id)
        conversation.turns.extend(turns)
        conversation.stored_bytes += sum(turn_bytes(turn) for turn in turns)
        return conversation

    async def append(self, conversation: Conversation, turn: Turn) -> None:
        """Record a finished turn: the conversation's file is written anew."""
        add_turn(conversation, turn, self._max_conversation_bytes)
        document = {
            "format": FORMAT,
            "learner": conversation.learner_key,
            "module": conversation.module_id,
            "touched": time.time(),
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
        """Delete every conversation file of one learner and remember the erasure (in this process)."""
        await self._process.forget_learner(learner_key)
        forgotten = 0
        for path, stored in self._stored():
            if stored.get("learner") == learner_key:
                path.unlink(missing_ok=True)
                forgotten += 1
        return forgotten

    def erased_since(self, learner_keys: Collection[str]) -> dict[str, float]:
        """Erasures made in this process, for the signal writer."""
        return self._process.erased_since(learner_keys)

    def _path(self, conversation_id: str) -> Path:
        return self._dir / f"{conversation_id}.json"

    def _stored(self) -> list[tuple[Path, dict]]:
        found = []
        for path in self._dir.glob("*.json"):
            try:
                found.append((path, json.loads(path.read_text(encoding="utf-8"))))
            except (OSError, ValueError):
                continue
        return found

    def _delete_expired(self) -> None:
        """Delete the files unused for longer than the TTL (by their modification time: no file is parsed)."""
        oldest = time.time() - self._ttl_s
        for path in self._dir.glob("*.json"):
            try:
                if path.stat().st_mtime < oldest:
                    path.unlink()
            except OSError:  # deleted by another command meanwhile
                continue
