"""Answers whose body was built in memory: what an application's unit tests give a wrapped client through
`httpx.MockTransport` (or respx), `httpx.Response(200, json=...)`. httpx reads such a body when the response is
made, so the SDK never pulls it through the transport's stream; the wrapper still records its usage, once, for the
real openai and anthropic clients, sync and async, streamed or not. A body that arrives as a stream (as from the
network) is still tapped as it is read: lazily, once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator

import anthropic
import httpx
import httpx2
import openai
import pytest

import prefixgate
from prefixgate.sdk import Ledger

GPT, CLAUDE = "gpt-5.4-mini", "claude-sonnet-5-5"
ASK_GPT = dict(model=GPT, messages=[{"role": "user", "content": "Where is my parcel?"}])
ASK_CLAUDE = dict(model=CLAUDE, max_tokens=32, messages=[{"role": "user", "content": "Where is my parcel?"}])

# The providers' documented usage shapes, with numbers typed here: 1,200 prompt tokens of which 1,000 read from
# cache, 20 out (OpenAI: `prompt_tokens` includes the cached ones); Anthropic: 200 uncached, 1,000 read, 20 out.
GPT_USAGE = {"prompt_tokens": 1200, "completion_tokens": 20, "total_tokens": 1220,
             "prompt_tokens_details": {"cached_tokens": 1000}}
CHAT = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": GPT,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "On its way."}, "finish_reason": "stop"}],
        "usage": GPT_USAGE}
CHUNK = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": GPT,
         "choices": [{"index": 0, "delta": {"content": "On its way."}, "finish_reason": "stop"}]}
CHAT_SSE = (f"data: {json.dumps(CHUNK)}\n\n" f"data: {json.dumps({**CHUNK, 'choices': [], 'usage': GPT_USAGE})}\n\n"
            "data: [DONE]\n\n").encode()
CLAUDE_USAGE = {"input_tokens": 200, "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 0, "output_tokens": 20}
MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "model": CLAUDE,
           "content": [{"type": "text", "text": "On its way."}], "stop_reason": "end_turn", "stop_sequence": None,
           "usage": CLAUDE_USAGE}
CLAUDE_EVENTS = [
    ("message_start", {"type": "message_start", "message": {**MESSAGE, "content": [], "stop_reason": None,
                                                            "usage": {**CLAUDE_USAGE, "output_tokens": 1}}}),
    ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ("content_block_delta", {"type": "content_block_delta", "index": 0,
                             "delta": {"type": "text_delta", "text": "On its way."}}),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                       "usage": {"output_tokens": 20}}),
    ("message_stop", {"type": "message_stop"}),
]
CLAUDE_SSE = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in CLAUDE_EVENTS).encode()

Handler = Callable[[httpx.Request], httpx.Response]


def in_memory(body: dict | bytes, sse: bool = False, family=httpx) -> Handler:  # noqa: ANN001 -- httpx or httpx2
    """A MockTransport handler answering `body` built in memory, as unit tests write it (the anthropic SDK takes
    httpx2's clients, the openai SDK httpx's)."""
    def handler(request: httpx.Request) -> httpx.Response:
        if sse:
            return family.Response(200, headers={"content-type": "text/event-stream"}, content=body)
        return family.Response(200, json=body)
    return handler


def assert_recorded_once(ledger: Ledger, uncached: int) -> None:
    [rec] = ledger.records
    assert (rec.status, rec.uncached_input, rec.cache_read, rec.output) == (200, uncached, 1000, 20), rec
    assert rec.error == "" and rec.cost_usd is not None


def openai_client(handler: Handler, ledger: Ledger, *, is_async: bool = False) -> openai.OpenAI | openai.AsyncOpenAI:
    if is_async:
        raw = openai.AsyncOpenAI(api_key="sk-test", base_url="http://provider.test/v1", max_retries=0,
                                 http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler)))
    else:
        raw = openai.OpenAI(api_key="sk-test", base_url="http://provider.test/v1", max_retries=0,
                            http_client=httpx.Client(transport=httpx.MockTransport(handler)))
    return prefixgate.wrap(raw, ledger=ledger)


def anthropic_client(handler: Handler, ledger: Ledger, *, is_async: bool = False) -> anthropic.Anthropic | anthropic.AsyncAnthropic:
    if is_async:
        raw = anthropic.AsyncAnthropic(api_key="sk-ant-test", base_url="http://provider.test", max_retries=0,
                                       http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)))
    else:
        raw = anthropic.Anthropic(api_key="sk-ant-test", base_url="http://provider.test", max_retries=0,
                                  http_client=httpx2.Client(transport=httpx2.MockTransport(handler)))
    return prefixgate.wrap(raw, ledger=ledger)


def test_openai_sync_in_memory_answers_are_recorded():
    ledger = Ledger()
    answer = openai_client(in_memory(CHAT), ledger).chat.completions.create(**ASK_GPT)
    assert answer.choices[0].message.content == "On its way." and answer.usage.prompt_tokens == 1200
    assert_recorded_once(ledger, 200)

    ledger = Ledger()
    chunks = list(openai_client(in_memory(CHAT_SSE, sse=True), ledger).chat.completions.create(**ASK_GPT, stream=True))
    # The caller did not ask for the usage chunk (the wrapper did, to price the stream): withheld, as from the network.
    assert [c.choices[0].delta.content for c in chunks] == ["On its way."] and all(c.usage is None for c in chunks)
    assert_recorded_once(ledger, 200)


def test_openai_async_in_memory_answers_are_recorded():
    async def run() -> tuple[Ledger, Ledger]:
        plain, streamed = Ledger(), Ledger()
        answer = await openai_client(in_memory(CHAT), plain, is_async=True).chat.completions.create(**ASK_GPT)
        assert answer.usage.completion_tokens == 20
        stream = await openai_client(in_memory(CHAT_SSE, sse=True), streamed, is_async=True).chat.completions.create(
            **ASK_GPT, stream=True, stream_options={"include_usage": True})
        chunks = [c async for c in stream]
        assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens == 1200     # asked for: passed on
        return plain, streamed

    for ledger in asyncio.run(run()):
        assert_recorded_once(ledger, 200)


@pytest.mark.parametrize("is_async", [False, True])
def test_anthropic_in_memory_answers_are_recorded(is_async):
    plain, streamed = Ledger(), Ledger()

    async def run() -> None:
        answer = await anthropic_client(in_memory(MESSAGE, family=httpx2), plain, is_async=True).messages.create(**ASK_CLAUDE)
        assert answer.usage.cache_read_input_tokens == 1000
        async with anthropic_client(in_memory(CLAUDE_SSE, sse=True, family=httpx2), streamed, is_async=True).messages.stream(
                **ASK_CLAUDE) as events:
            assert (await events.get_final_message()).usage.output_tokens == 20

    if is_async:
        asyncio.run(run())
    else:
        answer = anthropic_client(in_memory(MESSAGE, family=httpx2), plain).messages.create(**ASK_CLAUDE)
        assert answer.content[0].text == "On its way."
        with anthropic_client(in_memory(CLAUDE_SSE, sse=True, family=httpx2), streamed).messages.stream(**ASK_CLAUDE) as events:
            assert events.get_final_message().usage.output_tokens == 20
    assert_recorded_once(plain, 200)
    assert_recorded_once(streamed, 200)


def test_a_body_that_arrives_as_a_stream_is_read_lazily_and_recorded_once():
    """As from the network: the transport hands the body over event by event. The SDK's first chunk comes before
    the transport's last event was pulled (nothing buffers the stream), and the stream is recorded once."""
    events = [f"data: {json.dumps(CHUNK)}\n\n".encode()] * 3 + \
             [f"data: {json.dumps({**CHUNK, 'choices': [], 'usage': GPT_USAGE})}\n\n".encode(), b"data: [DONE]\n\n"]
    pulled: list[int] = []

    def body() -> Iterator[bytes]:
        for i, event in enumerate(events):
            pulled.append(i)
            yield event

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    ledger = Ledger()
    stream = openai_client(handler, ledger).chat.completions.create(**ASK_GPT, stream=True)
    first = next(iter(stream))
    assert first.choices[0].delta.content == "On its way." and len(pulled) < len(events) and ledger.records == []
    rest = list(stream)
    assert len(rest) == 2 and pulled == list(range(len(events)))
    assert_recorded_once(ledger, 200)
