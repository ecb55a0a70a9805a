"""The scripted OpenAI-compatible server, driven through the real openai SDK over real HTTP."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import httpx
import openai
import pytest

from mentor.stub_llm import Reply, StubLLM, bench_reply

MESSAGES = [{"role": "user", "content": "How much memory does ZeRO-3 need for 7B params?"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "zero_memory",
            "description": "Memory per GPU under ZeRO.",
            "parameters": {"type": "object", "properties": {"params": {"type": "string"}}},
        },
    }
]
ZERO_CALL = {"name": "zero_memory", "arguments": {"params": "7B", "stage": 3, "gpus": 64}}


@pytest.fixture(scope="module")
def running_stub() -> Iterator[StubLLM]:
    with StubLLM() as running:
        yield running


@pytest.fixture
def stub(running_stub: StubLLM) -> StubLLM:
    """The module's server with an empty script and no recorded requests (a server start costs ~0.1 s)."""
    running_stub.set_script(None)
    running_stub.requests.clear()
    return running_stub


# By default the SDK builds response models without validating them, so a wrong shape would pass silently;
# strict validation makes every response and chunk prove it matches the SDK's types.
def sync_client(stub: StubLLM, **kwargs) -> openai.OpenAI:
    return openai.OpenAI(base_url=stub.url, api_key="x", max_retries=0, _strict_response_validation=True, **kwargs)


def async_client(stub: StubLLM, **kwargs) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=stub.url, api_key="x", max_retries=0, _strict_response_validation=True, **kwargs)


def collect_stream(stub: StubLLM, **kwargs) -> list:
    """Stream one completion with the async client and return every parsed chunk."""

    async def run() -> list:
        async with async_client(stub) as client:
            stream = await client.chat.completions.create(model="stub", messages=MESSAGES, stream=True, **kwargs)
            return [chunk async for chunk in stream]

    return asyncio.run(run())


def reassemble_tool_calls(chunks: list) -> dict[int, dict]:
    """Merge tool-call deltas by index the way an OpenAI client must."""
    calls: dict[int, dict] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or []:
                call = calls.setdefault(delta.index, {"id": None, "name": "", "arguments": ""})
                call["id"] = delta.id or call["id"]
                if delta.function is not None:
                    call["name"] += delta.function.name or ""
                    call["arguments"] += delta.function.arguments or ""
    return calls


def test_non_streaming_text_has_message_and_usage(stub: StubLLM) -> None:
    stub.set_script([Reply(content="ZeRO-3 shards everything [1].")])

    completion = sync_client(stub).chat.completions.create(model="stub", messages=MESSAGES)

    choice = completion.choices[0]
    assert choice.message.content == "ZeRO-3 shards everything [1]."
    assert choice.message.tool_calls is None
    assert choice.finish_reason == "stop"
    assert completion.usage.prompt_tokens == 9
    assert completion.usage.completion_tokens == 4
    assert completion.usage.total_tokens == 13


def test_streaming_text_arrives_in_several_deltas_that_reassemble(stub: StubLLM) -> None:
    text = "Pipeline bubbles shrink as microbatches grow [1]."
    stub.set_script([Reply(content=text)])

    chunks = collect_stream(stub)

    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(pieces) == len(text.split())
    assert "".join(pieces) == text
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks][-1] == "stop"
    assert all(c.usage is None for c in chunks)


def test_non_streaming_tool_call_carries_json_arguments(stub: StubLLM) -> None:
    stub.set_script([Reply(tool_calls=[ZERO_CALL])])

    completion = sync_client(stub).chat.completions.create(model="stub", messages=MESSAGES, tools=TOOLS)

    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.id
    assert call.function.name == "zero_memory"
    assert json.loads(call.function.arguments) == ZERO_CALL["arguments"]


def test_streaming_tool_calls_split_arguments_across_chunks(stub: StubLLM) -> None:
    second = {"name": "chinchilla_optimal", "arguments": {"params": "70B"}}
    stub.set_script([Reply(tool_calls=[ZERO_CALL, second])])

    chunks = collect_stream(stub, tools=TOOLS)

    argument_deltas = [
        d for c in chunks if c.choices for d in c.choices[0].delta.tool_calls or [] if d.function.arguments
    ]
    assert len(argument_deltas) > 2  # arguments really arrive in pieces
    calls = reassemble_tool_calls(chunks)
    assert [calls[i]["name"] for i in sorted(calls)] == ["zero_memory", "chinchilla_optimal"]
    assert json.loads(calls[0]["arguments"]) == ZERO_CALL["arguments"]
    assert json.loads(calls[1]["arguments"]) == {"params": "70B"}
    assert calls[0]["id"] != calls[1]["id"]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_malformed_arguments_arrive_as_the_raw_string(stub: StubLLM) -> None:
    raw = '{"params": "7B", '
    stub.set_script([Reply(tool_calls=[{"name": "zero_memory", "arguments": raw}])] * 2)

    completion = sync_client(stub).chat.completions.create(model="stub", messages=MESSAGES, tools=TOOLS)
    streamed = reassemble_tool_calls(collect_stream(stub, tools=TOOLS))

    assert completion.choices[0].message.tool_calls[0].function.arguments == raw
    assert streamed[0]["arguments"] == raw


def test_status_500_raises_internal_server_error_with_message(stub: StubLLM) -> None:
    stub.set_script([Reply(status=500, content="the GPU caught fire"), Reply(status=500)])

    with pytest.raises(openai.InternalServerError, match="the GPU caught fire") as caught:
        sync_client(stub).chat.completions.create(model="stub", messages=MESSAGES)
    with pytest.raises(openai.InternalServerError):
        collect_stream(stub)

    assert caught.value.status_code == 500
    assert caught.value.body["type"] == "server_error"


def test_delay_longer_than_client_timeout_raises_timeout(stub: StubLLM) -> None:
    stub.set_script([Reply(content="too late", delay_s=3.0), Reply(content="on time")])

    async def run() -> str | None:
        async with async_client(stub, timeout=0.2) as client:
            with pytest.raises(openai.APITimeoutError):
                await client.chat.completions.create(model="stub", messages=MESSAGES)
            completion = await client.chat.completions.create(model="stub", messages=MESSAGES)
            return completion.choices[0].message.content

    assert asyncio.run(run()) == "on time"  # the server stays usable after a client gave up


def test_requests_record_messages_tools_and_options(stub: StubLLM) -> None:
    sync_client(stub).chat.completions.create(model="stub", messages=MESSAGES, tools=TOOLS, temperature=0)
    collect_stream(stub, stream_options={"include_usage": True})

    first, second = stub.requests
    assert first["messages"] == MESSAGES
    assert first["tools"] == TOOLS
    assert first["temperature"] == 0
    assert "stream" not in first or first["stream"] is False
    assert second["stream"] is True


def test_include_usage_sends_a_final_usage_chunk(stub: StubLLM) -> None:
    stub.set_script([Reply(content="Two words")])

    chunks = collect_stream(stub, stream_options={"include_usage": True})

    *body, last = chunks
    assert last.choices == []
    assert (last.usage.prompt_tokens, last.usage.completion_tokens, last.usage.total_tokens) == (9, 2, 11)
    assert all(c.usage is None for c in body)
    assert body[-1].choices[0].finish_reason == "stop"


def test_callable_script_builds_each_reply_from_the_request(stub: StubLLM) -> None:
    def count_messages(request: dict) -> Reply:
        return Reply(tool_calls=[{"name": "zero_memory", "arguments": {"n": len(request["messages"])}}])

    stub.set_script(count_messages)
    client = sync_client(stub)

    lengths = []
    messages = list(MESSAGES)
    for _ in range(3):  # an endless tool loop: the model never stops calling
        message = client.chat.completions.create(model="stub", messages=messages, tools=TOOLS).choices[0].message
        call = message.tool_calls[0]
        lengths.append(json.loads(call.function.arguments)["n"])
        messages += [message.model_dump(exclude_none=True), {"role": "tool", "tool_call_id": call.id, "content": "{}"}]

    assert lengths == [1, 3, 5]


def test_exhausted_queue_falls_back_to_default(stub: StubLLM) -> None:
    stub.set_script([Reply(content="scripted")])
    contents = [
        sync_client(stub).chat.completions.create(model="stub", messages=MESSAGES).choices[0].message.content
        for _ in range(2)
    ]
    with StubLLM(default=Reply(content="fallback")) as custom:
        fallback = sync_client(custom).chat.completions.create(model="stub", messages=MESSAGES)

    assert contents == ["scripted", "OK [1]"]
    assert fallback.choices[0].message.content == "fallback"


def test_models_endpoint_lists_the_stub_model(stub: StubLLM) -> None:
    assert [model.id for model in sync_client(stub).models.list()] == ["stub"]


def test_token_delay_spaces_out_streamed_pieces(stub: StubLLM) -> None:
    stub.set_script([Reply(content="one two three four five", token_delay_s=0.05)])

    begin = time.monotonic()
    collect_stream(stub)

    assert time.monotonic() - begin >= 0.2  # four gaps between five pieces


def test_server_wide_token_delay_applies_to_non_streaming_replies_too() -> None:
    with StubLLM([Reply(content="one two three four five")], token_delay_s=0.05) as slow:
        begin = time.monotonic()
        sync_client(slow).chat.completions.create(model="stub", messages=MESSAGES)

        assert time.monotonic() - begin >= 0.2


def test_invalid_body_gets_an_openai_style_400(stub: StubLLM) -> None:
    response = httpx.post(f"{stub.url}/chat/completions", content=b"not json")

    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_bench_reply_calls_chinchilla_first_then_quotes_passage_one() -> None:
    system = {"role": "system", "content": "Passages:\n[1] Chinchilla trains 20 tokens per parameter.\n[2] Other."}
    first_turn = {"messages": [system, *MESSAGES], "tools": TOOLS}
    tool_turn = {
        "messages": [
            system,
            *MESSAGES,
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "chinchilla_optimal", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": '{"tokens": 140000000000}'},
        ],
        "tools": TOOLS,
    }

    call = bench_reply(first_turn, tool_call=True)
    answer = bench_reply(tool_turn, tool_call=True)

    assert call.tool_calls == [{"name": "chinchilla_optimal", "arguments": {"params": "7B"}}]
    assert answer.tool_calls == []
    assert answer.content == "Chinchilla trains 20 tokens per parameter. [1]"
    assert bench_reply(first_turn).content == answer.content  # without tool_call: answer at once


def test_bench_reply_served_end_to_end_through_the_sdk() -> None:
    with StubLLM(lambda request: bench_reply(request, tool_call=True)) as stub:
        client = sync_client(stub)
        first = client.chat.completions.create(model="stub", messages=MESSAGES, tools=TOOLS).choices[0].message
        call = first.tool_calls[0]
        follow_up = [
            *MESSAGES,
            first.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "{}"},
        ]
        second = client.chat.completions.create(model="stub", messages=follow_up, tools=TOOLS).choices[0].message

    assert call.function.name == "chinchilla_optimal"
    assert json.loads(call.function.arguments) == {"params": "7B"}
    assert second.content == "OK [1]"  # no "[1]" passage in these messages to quote
