"""A question on its way in: checked, its module resolved and its conversation opened (`ChatService.prepare`), or
the conversation a client holds read as a stored one would be."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from mentor.answer import STYLES, ChatInput, Turn
from mentor.catalog import Catalog
from mentor.conversations import MAX_CONVERSATION_BYTES, Conversation, turn_bytes
from mentor.corpus import Module
from mentor.errors import InvalidInput
from mentor.text import MAX_MESSAGE_CHARS


@dataclass(slots=True)
class Prepared:
    """A validated question, ready to answer."""

    input: ChatInput
    catalog: Catalog  # the snapshot this question is answered from, even if another is swapped in meanwhile
    module: Module
    conversation: Conversation
    learner_key: str
    question_id: str
    started: float


def held_conversation(
    history: tuple[Turn, ...], message: str, *, learner_key: str, module_id: str, key: bytes
) -> Conversation:
    """The conversation a client holds, as the readers of a stored one see it; never stored.

    Its id is keyed on the learner, the module and the thread's first question, so every turn of one thread is
    one conversation in the signals log, as with a stored conversation (two threads one learner opens with the
    same question are logged as one). It is kept within a stored conversation's bounds: the latest 20 turns that
    fit in 16 KB, and always the latest.
    """
    first = history[0].question if history else message
    material = "\x00".join(("client-held", learner_key, module_id, first)).encode("utf-8", "surrogatepass")
    conversation = Conversation(hmac.new(key, material, hashlib.sha256).hexdigest()[:32], learner_key, module_id)
    conversation.turns.extend(history)  # the deque keeps the latest MAX_TURNS
    size = sum(turn_bytes(turn) for turn in conversation.turns)
    while len(conversation.turns) > 1 and size > MAX_CONVERSATION_BYTES:
        size -= turn_bytes(conversation.turns.popleft())
    return conversation


def validate(request: ChatInput) -> None:
    """Raise InvalidInput for a message or style the chat cannot take."""
    message = request.message
    if request.history is not None and request.conversation_id is not None:
        raise InvalidInput("conversation_id: not with a client-held history; send one or the other")
    if not isinstance(message, str) or not message.strip():
        raise InvalidInput("message: must contain some text")
    if len(message) > MAX_MESSAGE_CHARS:
        raise InvalidInput(f"message: at most {MAX_MESSAGE_CHARS} characters (got {len(message)})")
    if request.style not in STYLES:
        raise InvalidInput(f"style: must be one of {', '.join(STYLES)} (got {request.style!r})")
