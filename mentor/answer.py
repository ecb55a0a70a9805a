"""Value types both answer engines produce and every later stage (grounding, signals, API) reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from mentor.corpus import Pointer
from mentor.retrieve import Passage
from mentor.text.profile import ModuleProfile
from mentor.understanding import Reading

Style = Literal["explain", "hint", "brief"]
STYLES: tuple[str, ...] = ("explain", "hint", "brief")
# How much of a question the module answers: all of it, some of it (the answer says which part it lacks), none.
Coverage = Literal["full", "partial", "none"]
COVERAGES: tuple[str, ...] = ("full", "partial", "none")
# The surface a question came through, logged with it so analysts can tell an eval harness speaking the OpenAI API
# from the "Ask the mentor" box: POST /v1/chat, /v1/chat/stream, /v1/chat/completions, `mentor ask`, a replay, and
# the synthetic learners of `mentor demo-data` (so demo rows are told from real ones).
Channel = Literal["chat", "stream", "openai", "cli", "replay", "demo"]
CHANNELS: tuple[str, ...] = ("chat", "stream", "openai", "cli", "replay", "demo")


@dataclass(frozen=True, slots=True)
class ChatInput:
    """A learner's question as the API or CLI received it."""

    message: str
    module_id: str | None = None
    conversation_id: str | None = None
    learner_id: str | None = None
    style: str = "explain"
    client: str = "local"  # the caller's address, for the limits per address: never logged
    # The learner id was proven (a learner token, or named by a server holding the server key). False: it is a name
    # the caller picked, so the address's own ceiling applies too.
    authenticated: bool = False
    channel: str = "chat"  # a Channel: logged with the question
    # The LTI course the learner token was issued in (a pseudonym, mentor.lti): logged, for the course's analyst view.
    lti_context: str | None = None
    # A conversation the client holds (the OpenAI facade resends every earlier turn): read instead of a stored
    # one. None: the conversation is the server's (`conversation_id`, or a new one).
    history: tuple[Turn, ...] | None = None


@dataclass(frozen=True, slots=True)
class Citation:
    """Passage `[n]` of an answer."""

    n: int
    chunk_id: str
    section_id: str
    section_title: str
    quote: str


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One calculator run on behalf of an answer; `error` is set instead of `result` when it failed."""

    name: str
    arguments: dict[str, Any]
    result: dict[str, Any] | None
    explanation: str
    error: str | None = None
    duration_ms: float = 0.0

    def public(self) -> dict[str, Any]:
        """The shape learners and eval suites see."""
        return {"name": self.name, "arguments": self.arguments, "result": self.result, "explanation": self.explanation}


@dataclass(frozen=True, slots=True)
class Turn:
    """One earlier question and answer of a conversation, and the question as mentor read it (its clauses that
    instruct left out, spelling corrected, resolved against the turn before): what a follow-up continues."""

    question: str
    answer: str
    asked: str = ""


@dataclass(frozen=True, slots=True)
class Question:
    """What an engine is asked: the question, its module, its conversation so far and the retrieved passages."""

    text: str
    module_id: str
    module_title: str
    style: str
    passages: list[Passage]
    history: tuple[Turn, ...] = ()
    allowed_urls: frozenset[str] = frozenset()
    profile: ModuleProfile = ModuleProfile()  # the module's word weights and boilerplate (mentor.text.profile)
    reading: Reading | None = None  # the message as read: parts, kind, continues, lacking (mentor.understanding)
    planted: frozenset[str] = frozenset()  # passage units that read as instructions: never quoted nor obeyed
    set_aside: bool = False  # parts of the message about something else were left out of `text`
    # Calculators the question asks for that do not model what it names ("qlora" for full-training memory): their
    # rule is quoted and the concept named, no figure computed.
    unmodelled: tuple[str, ...] = ()
    pointers: tuple[Pointer, ...] = ()  # the other modules the module sends a learner to for what was asked
    # The parts (as read) on a topic the module leaves to another module: where it sends the learner (`pointers`)
    # answers them (`mentor.consult.Grounds.sent`).
    sent: tuple[str, ...] = ()

    @property
    def lacking(self) -> tuple[str, ...]:
        """The concepts the question names that the module lacks."""
        return self.reading.lacking if self.reading is not None else ()


@dataclass(slots=True)
class Answer:
    """What an engine returns; `grounding` and the ids are filled in by the chat pipeline."""

    text: str
    citations: list[Citation]
    tool_calls: list[ToolCall]
    out_of_scope: bool
    engine: str
    model: str | None
    prompt_version: str | None
    passages: list[Passage] = field(default_factory=list)
    fallback_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    coverage: str = "full"  # a Coverage; "none" for a redirect
    framing: tuple[str, ...] = ()  # the engine's own sentences in `text` (what the module lacks): no claim to check
