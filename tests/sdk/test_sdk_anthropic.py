"""The real anthropic SDK, wrapped, against mock-providers: planning makes a dated prompt cache, streams
are counted once, and types, errors and pass-through calls are the SDK's own."""

from __future__ import annotations

import asyncio

import anthropic
import pytest

import prefixgate
from prefixgate.sdk import Ledger
from tests.sdk.support_sdk import ANTHROPIC_MODEL, dated_system, fresh_key


def clients(url: str) -> tuple[anthropic.Anthropic, anthropic.Anthropic, Ledger]:
    ledger = Ledger()
    raw = anthropic.Anthropic(api_key=fresh_key(), base_url=url, max_retries=0)
    return raw, prefixgate.wrap(raw, ledger=ledger), ledger


def ask(client: anthropic.Anthropic, day: int, question: str = "Where is my parcel?", **kw) -> anthropic.types.Message:
    return client.messages.create(model=ANTHROPIC_MODEL, max_tokens=16, system=dated_system(day),
                                  messages=[{"role": "user", "content": question}], **kw)


def test_dated_system_prompt_caches_only_when_wrapped(mock_url):
    raw, wrapped, ledger = clients(mock_url)
    first, second = ask(wrapped, 1), ask(wrapped, 2)
    assert first.usage.cache_creation_input_tokens > 1000 and first.usage.cache_read_input_tokens == 0
    assert second.usage.cache_read_input_tokens > 1000
    # The same two calls unwrapped (own key, so a cold cache): the date breaks the prefix, nothing is marked.
    raw_other = raw.with_options(api_key=fresh_key())
    assert [ask(raw_other, d).usage.cache_read_input_tokens for d in (1, 2)] == [0, 0]
    records = ledger.records
    assert [r.cache_read for r in records] == [0, second.usage.cache_read_input_tokens]
    assert records[0].cache_writes == {"5m": first.usage.cache_creation_input_tokens}
    assert records[1].uncached_input == second.usage.input_tokens and records[1].output == second.usage.output_tokens
    assert records[1].miss_reason == "" and records[0].miss_reason.startswith("cold")
    assert any(line.startswith("rewrite:") for line in records[1].explanation)
    assert float(records[1].savings_usd) > 0
    # The prefix shape the dashboard's misses view diffs, as the gateway records it (prefixgate.prefix_shape).
    roles = [entry.split(":")[0] for entry in records[1].segments]
    assert roles[0] == "system" and roles[-1] == "user" and int(records[1].segments[0].split(":")[3]) > 1000


def test_wrapped_client_is_the_same_client_type_and_falls_through(mock_url):
    raw, wrapped, _ = clients(mock_url)
    assert type(wrapped) is anthropic.Anthropic
    assert wrapped.api_key == raw.api_key and str(wrapped.base_url) == str(raw.base_url)
    assert type(wrapped.messages) is type(raw.messages)
    assert type(ask(wrapped, 3)) is type(ask(raw, 3)) is anthropic.types.Message
    raw_resp = wrapped.messages.with_raw_response.create(
        model=ANTHROPIC_MODEL, max_tokens=8, messages=[{"role": "user", "content": "hi"}])
    assert raw_resp.http_response.status_code == 200 and type(raw_resp.parse()) is anthropic.types.Message
    # with_options on the wrapped client keeps planning (it copies the wrapped HTTP client).
    assert wrapped.with_options(timeout=5)._client is wrapped._client


def test_stream_works_and_its_usage_is_counted_once(mock_url):
    raw, wrapped, ledger = clients(mock_url)
    ask(wrapped, 1)
    with wrapped.messages.stream(model=ANTHROPIC_MODEL, max_tokens=16, system=dated_system(2),
                                 messages=[{"role": "user", "content": "Where is my parcel?"}]) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text and final.content[0].text == text
    events = list(wrapped.messages.create(model=ANTHROPIC_MODEL, max_tokens=16, system=dated_system(3), stream=True,
                                          messages=[{"role": "user", "content": "Where is my parcel?"}]))
    raw_events = list(raw.messages.create(model=ANTHROPIC_MODEL, max_tokens=16, system=dated_system(3), stream=True,
                                          messages=[{"role": "user", "content": "Where is my parcel?"}]))
    # The reply text is seeded by the prompt (the planned one differs), so compare the event shapes.
    assert {type(e) for e in events} == {type(e) for e in raw_events}
    assert (type(events[0]), type(events[-1])) == (type(raw_events[0]), type(raw_events[-1]))
    records = ledger.records
    assert len(records) == 3 and [r.stream for r in records] == [False, True, True]
    streamed = records[1]
    # message_start and message_delta both carry usage; the record holds the final numbers once.
    assert (streamed.uncached_input, streamed.cache_read, streamed.output) == (
        final.usage.input_tokens, final.usage.cache_read_input_tokens, final.usage.output_tokens)
    assert streamed.cache_read > 1000 and streamed.ttft_ms is not None and streamed.error == ""
    assert ledger.summary()["requests"] == 3


def test_stream_closed_early_is_recorded_once_with_what_was_read(mock_url):
    _, wrapped, ledger = clients(mock_url)
    stream = wrapped.messages.create(model=ANTHROPIC_MODEL, max_tokens=64, stream=True,
                                     messages=[{"role": "user", "content": "Tell me a long story"}])
    next(iter(stream))
    stream.close()
    stream.close()
    (rec,) = ledger.records
    assert rec.status == 200 and rec.uncached_input > 0 and "closed before it ended" in rec.error


def test_sdk_errors_reach_the_caller_unchanged(mock_url):
    raw, wrapped, ledger = clients(mock_url)
    fault = {"x-mock-fault": "status=429;retry_after=1"}
    errors = []
    for client in (raw, wrapped):
        with pytest.raises(anthropic.RateLimitError) as info:
            ask(client, 1, extra_headers=fault)
        errors.append(info.value)
    assert errors[0].status_code == errors[1].status_code == 429
    assert errors[0].body == errors[1].body and errors[1].response.headers["retry-after"] == "1"
    # An invalid body is not planned: the provider's own 400 comes back.
    with pytest.raises(anthropic.BadRequestError):
        wrapped.messages.create(model=ANTHROPIC_MODEL, max_tokens=8, messages=[{"role": "robot", "content": "hi"}])
    statuses = [r.status for r in ledger.records]
    assert statuses == [429, 400]
    assert ledger.summary()["errors"] == 2 and ledger.summary()["cost_usd"] == 0


def test_count_tokens_passes_through_unrecorded(mock_url):
    raw, wrapped, ledger = clients(mock_url)
    kwargs = dict(model=ANTHROPIC_MODEL, system=dated_system(1), messages=[{"role": "user", "content": "hi"}])
    assert wrapped.messages.count_tokens(**kwargs).input_tokens == raw.messages.count_tokens(**kwargs).input_tokens > 1000
    assert ledger.records == []


def test_async_client_plans_streams_and_raises_like_the_sdk(mock_url):
    ledger = Ledger()

    async def run() -> tuple:
        raw = anthropic.AsyncAnthropic(api_key=fresh_key(), base_url=mock_url, max_retries=0)
        wrapped = prefixgate.wrap(raw, ledger=ledger)
        assert type(wrapped) is anthropic.AsyncAnthropic
        kwargs = dict(model=ANTHROPIC_MODEL, max_tokens=16, messages=[{"role": "user", "content": "Where?"}])
        results = await asyncio.gather(*(wrapped.messages.create(system=dated_system(d), **kwargs) for d in (1,)))
        second = await wrapped.messages.create(system=dated_system(2), **kwargs)
        async with wrapped.messages.stream(system=dated_system(3), **kwargs) as stream:
            text = "".join([t async for t in stream.text_stream])
        with pytest.raises(anthropic.RateLimitError):
            await wrapped.messages.create(system=dated_system(4), extra_headers={"x-mock-fault": "status=429"}, **kwargs)
        return results[0], second, text

    first, second, text = asyncio.run(run())
    assert type(first) is anthropic.types.Message and second.usage.cache_read_input_tokens > 1000 and text
    assert [r.status for r in ledger.records] == [200, 200, 200, 429]
    assert ledger.records[2].stream and ledger.records[2].cache_read > 1000
