"""The real openai SDK, wrapped: chat completions are planned and priced, a stream's usage is read even
when the caller did not ask for it (without showing it to them), and types and errors are the SDK's."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import openai
import pytest

import prefixgate
from prefixgate.sdk import Ledger
from tests.sdk.support_sdk import OPENAI_MODEL, dated_system, fresh_key


def clients(url: str) -> tuple[openai.OpenAI, openai.OpenAI, Ledger]:
    ledger = Ledger()
    raw = openai.OpenAI(api_key=fresh_key(), base_url=url + "/v1", max_retries=0)
    return raw, prefixgate.wrap(raw, ledger=ledger, route="support", tenant="acme"), ledger


def messages(day: int) -> list[dict]:
    return [{"role": "system", "content": dated_system(day)}, {"role": "user", "content": "Where is my parcel?"}]


def test_chat_completion_is_planned_priced_and_typed_like_the_sdk(mock_url):
    raw, wrapped, ledger = clients(mock_url)
    assert type(wrapped) is openai.OpenAI
    first = wrapped.chat.completions.create(model=OPENAI_MODEL, messages=messages(1), max_tokens=16)
    second = wrapped.chat.completions.create(model=OPENAI_MODEL, messages=messages(2), max_tokens=16)
    plain = raw.chat.completions.create(model=OPENAI_MODEL, messages=messages(3), max_tokens=16)
    assert type(first) is type(plain) is openai.types.chat.ChatCompletion
    assert second.usage.prompt_tokens_details.cached_tokens > 1000
    a, b = ledger.records
    assert (a.route, a.tenant, a.provider, a.model) == ("support", "acme", "openai", OPENAI_MODEL)
    assert b.cache_read == second.usage.prompt_tokens_details.cached_tokens
    # OpenAI's prompt_tokens includes cached tokens; the record splits them (the classic double count).
    assert b.usage.input_total == second.usage.prompt_tokens and b.uncached_input < 100
    assert b.output == second.usage.completion_tokens
    # gpt-5.4's list prices (https://developers.openai.com/api/docs/models/gpt-5.4): $2.50 input, $0.25 cached
    # input, $15 output.
    assert Decimal(b.cost_usd) == (b.uncached_input * Decimal("2.50") + b.cache_read * Decimal("0.25")
                                   + b.output * Decimal("15")) / 1_000_000


def test_stream_usage_is_read_but_not_shown_unless_asked(mock_url):
    raw, wrapped, ledger = clients(mock_url)
    kwargs = dict(model=OPENAI_MODEL, messages=messages(1), max_tokens=16, stream=True)
    wrapped_chunks = list(wrapped.chat.completions.create(**kwargs))
    raw_chunks = list(raw.chat.completions.create(**kwargs))
    # The caller did not ask for usage: no chunk without choices reaches them, as unwrapped.
    assert all(c.choices for c in wrapped_chunks) and all(c.choices for c in raw_chunks)
    assert all(c.usage is None for c in wrapped_chunks)
    assert type(wrapped_chunks[0]) is type(raw_chunks[0])
    asked = list(wrapped.chat.completions.create(stream_options={"include_usage": True}, **{**kwargs, "messages": messages(2)}))
    assert asked[-1].usage is not None and asked[-1].choices == []
    first, second = ledger.records
    assert first.stream and first.output > 0 and first.usage.input_total > 1000
    assert second.cache_read == asked[-1].usage.prompt_tokens_details.cached_tokens > 1000
    assert ledger.summary()["requests"] == 2


def test_errors_and_other_endpoints_pass_through(mock_url):
    raw, wrapped, ledger = clients(mock_url)
    with pytest.raises(openai.RateLimitError) as info:
        wrapped.chat.completions.create(model=OPENAI_MODEL, messages=messages(1),
                                        extra_headers={"x-mock-fault": "status=429;retry_after=1"})
    assert info.value.status_code == 429
    with pytest.raises(openai.NotFoundError):
        wrapped.chat.completions.create(model="gpt-nonexistent", messages=messages(1))
    assert [m.id for m in wrapped.models.list()] == [m.id for m in raw.models.list()]
    assert [r.status for r in ledger.records] == [429, 404]
    assert "no price" not in " ".join(ledger.records[1].explanation) and ledger.records[1].cost_usd is None


def test_async_openai_client(mock_url):
    ledger = Ledger()

    async def run() -> list:
        wrapped = prefixgate.wrap(openai.AsyncOpenAI(api_key=fresh_key(), base_url=mock_url + "/v1", max_retries=0),
                                  ledger=ledger)
        assert type(wrapped) is openai.AsyncOpenAI
        await wrapped.chat.completions.create(model=OPENAI_MODEL, messages=messages(1), max_tokens=8)
        stream = await wrapped.chat.completions.create(model=OPENAI_MODEL, messages=messages(2), max_tokens=8, stream=True)
        return [c async for c in stream]

    chunks = asyncio.run(run())
    assert chunks and all(c.choices for c in chunks)
    first, second = ledger.records
    assert second.stream and second.cache_read > 1000 and first.cache_read == 0
