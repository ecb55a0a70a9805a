"""The benchmark's instant LLM: mentor's scripted stub server, answering in a way mentor's grounding accepts.

`mentor.stub_llm.bench_reply` quotes the words after "[1]" on the same line. mentor's prompt puts a
"(section: ...)" header there and the passage text on the next line, so that quote is not in the passage,
mentor's grounding check rejects it, and every question would be retried and then answered by the extractive
fallback: the benchmark would measure the wrong path. This reply quotes the passage text itself (after the
header when there is one, as in mentor's prompt; on the same line when not, as in the baseline's).
"""

from __future__ import annotations

import re
from functools import partial

import uvicorn

from mentor.stub_llm import Reply, StubLLM, bench_reply

# Passage [1]'s first paragraph, after a "(section: ...)" header line when there is one.
PASSAGE_ONE = re.compile(r"\[1\][^\S\n]*(?:\(section:[^\n]*\)[^\S\n]*\n)?([^\n]+(?:\n[^\n]+)*)")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
QUOTE_WORDS = 20


def grounded_reply(request: dict, *, tool_call: bool = False) -> Reply:
    """`bench_reply`, except that the answer is a verbatim piece of passage [1]'s first full sentence."""
    reply = bench_reply(request, tool_call=tool_call)
    if reply.tool_calls:
        return reply
    for message in reversed(request.get("messages", [])):
        content = message.get("content") if isinstance(message, dict) else None
        match = PASSAGE_ONE.search(content) if isinstance(content, str) else None
        if match and match.group(1).strip():
            # A heading-like fragment ("The two walls.") is too short to be recognised as support.
            sentences = SENTENCE_END.split(" ".join(match.group(1).split()))
            sentence = next((s for s in sentences if len(s.split()) >= 6), sentences[0])
            return Reply(content=" ".join(sentence.split()[:QUOTE_WORDS]) + " [1]")
    return reply


def serve(host: str, port: int, *, token_delay_s: float = 0.0, tool_call: bool = False) -> None:
    """Run the stub in the foreground until interrupted (as `mentor.stub_llm.serve_stub`, with this reply)."""
    stub = StubLLM(partial(grounded_reply, tool_call=tool_call), token_delay_s=token_delay_s)
    uvicorn.run(stub.app, host=host, port=port, log_level="warning", lifespan="off")
