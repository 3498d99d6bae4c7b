"""The real google-genai SDK, wrapped: generate_content (sync, streamed, async) is planned and priced,
`caches.*` goes through with the caller's credentials, and errors are the SDK's own."""

from __future__ import annotations

import asyncio
import gc
import time
from types import SimpleNamespace

import pytest
from google import genai
from google.genai import errors, types

import prefixgate
from prefixgate.sdk import Ledger, exchange
from tests.sdk.support_sdk import GEMINI_MODEL, POLICY, dated_system, fresh_key


def clients(url: str) -> tuple[genai.Client, genai.Client, Ledger]:
    ledger = Ledger()
    options = types.HttpOptions(base_url=url, retry_options=types.HttpRetryOptions(attempts=1))
    raw = genai.Client(api_key=fresh_key("AIza"), http_options=options)
    return raw, prefixgate.wrap(raw, ledger=ledger), ledger


def gemini_system(day: int) -> str:
    # Gemini caches nothing under 2,048 tokens (4,096 from 3.x Flash; https://ai.google.dev/gemini-api/docs/caching).
    return f"{dated_system(day)}\n{POLICY * 3}"


def config(day: int, **kw) -> types.GenerateContentConfig:
    # Room for the answer beside the model's thinking, which counts against the limit
    return types.GenerateContentConfig(system_instruction=gemini_system(day), max_output_tokens=96, **kw)


def test_generate_content_is_planned_and_priced(mock_url):
    raw, wrapped, ledger = clients(mock_url)
    assert type(wrapped) is genai.Client and type(wrapped.models) is type(raw.models)
    assert wrapped.models._api_client is wrapped._api_client is not raw._api_client
    first = wrapped.models.generate_content(model=GEMINI_MODEL, contents="Where is my parcel?", config=config(1))
    second = wrapped.models.generate_content(model=GEMINI_MODEL, contents="Where is my parcel?", config=config(2))
    plain = raw.models.generate_content(model=GEMINI_MODEL, contents="Where is my parcel?", config=config(3))
    assert type(first) is type(plain) is types.GenerateContentResponse and first.text
    assert (second.usage_metadata.cached_content_token_count or 0) > 1000
    a, b = ledger.records
    assert (a.provider, a.model, a.cache_read) == ("gemini", GEMINI_MODEL, 0)
    assert b.cache_read == second.usage_metadata.cached_content_token_count
    assert b.usage.input_total == second.usage_metadata.prompt_token_count
    # The original client is untouched: it still sends the date where the caller put it (so, unlike the
    # wrapped client's second request, it reads nothing from the cache), and records nothing more.
    assert (plain.usage_metadata.cached_content_token_count or 0) == 0
    assert len(ledger.records) == 2


def test_stream_and_async_are_counted_once(mock_url):
    _, wrapped, ledger = clients(mock_url)
    chunks = list(wrapped.models.generate_content_stream(model=GEMINI_MODEL, contents="Where?", config=config(1)))
    assert chunks and all(type(c) is types.GenerateContentResponse for c in chunks)

    async def run() -> tuple:
        reply = await wrapped.aio.models.generate_content(model=GEMINI_MODEL, contents="Where?", config=config(2))
        streamed = [c async for c in await wrapped.aio.models.generate_content_stream(
            model=GEMINI_MODEL, contents="Where?", config=config(3))]
        return reply, streamed

    reply, streamed = asyncio.run(run())
    assert reply.text and streamed
    records = ledger.records
    assert [r.stream for r in records] == [True, False, True]
    assert records[0].usage.input_total == chunks[-1].usage_metadata.prompt_token_count
    assert records[1].cache_read > 1000 and records[2].cache_read > 1000


def test_caches_go_through_with_the_callers_key_and_into_the_trace(mock_url, tmp_path):
    raw, wrapped, ledger = clients(mock_url)
    cache = wrapped.caches.create(model=GEMINI_MODEL, config=types.CreateCachedContentConfig(
        system_instruction=gemini_system(1), ttl="600s"))
    assert cache.name.startswith("cachedContents/")
    # The cache lives in the caller's workspace: the unwrapped client (same key) sees it.
    assert raw.caches.get(name=cache.name).name == cache.name
    reply = wrapped.models.generate_content(model=GEMINI_MODEL, contents="Where?",
                                            config=types.GenerateContentConfig(cached_content=cache.name))
    assert (reply.usage_metadata.cached_content_token_count or 0) > 1000
    wrapped.caches.delete(name=cache.name)
    assert ledger.to_trace(tmp_path / "t.jsonl") == 3
    endpoints = [line.split('"endpoint":"')[1].split('"')[0] if '"endpoint"' in line else "generate"
                 for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert endpoints == ["cachedContents.create", "generate", "cachedContents.delete"]


def test_errors_reach_the_caller_unchanged(mock_url):
    raw, wrapped, ledger = clients(mock_url)
    fault = types.HttpOptions(headers={"x-mock-fault": "status=429;retry_after=1"})
    caught = []
    for client in (raw, wrapped):
        with pytest.raises(errors.ClientError) as info:
            client.models.generate_content(model=GEMINI_MODEL, contents="Hi", config=config(1, http_options=fault))
        caught.append(info.value)
    assert caught[0].code == caught[1].code == 429 and caught[0].status == caught[1].status
    assert [r.status for r in ledger.records] == [429]


def test_explicit_cache_is_created_through_the_wrapped_client_when_gaps_are_long(mock_url, monkeypatch):
    # Seven minutes between calls: Gemini's implicit cache has always lapsed, so storage pays for itself.
    # (The clock starts now: the mock stamps the cache's expireTime with the real time.)
    clock = iter(range(int(time.time()), int(time.time()) + 10**6, 420))
    monkeypatch.setattr(exchange, "time", SimpleNamespace(time=lambda: float(next(clock)), perf_counter=time.perf_counter))
    raw, wrapped, ledger = clients(mock_url)
    tools = [types.Tool(function_declarations=[types.FunctionDeclaration(name="lookup_order", description="Find an order")])]
    settings = types.GenerateContentConfig(system_instruction=POLICY * 6, tools=tools, max_output_tokens=8)
    replies = [wrapped.models.generate_content(model="gemini-3.8-flash", contents=f"Where is order {i}?", config=settings)
               for i in range(8)]
    created = [r for r in ledger.records if r.cache_writes.get("explicit")]
    assert len(created) == 1 and float(created[0].savings_usd) < 0     # creating costs; reads pay it back
    # The cache was made with the caller's own key: the unwrapped client lists it.
    assert [c.name for c in raw.caches.list()] == [created[0].explanation[0].split()[4]]
    after = [r for r in ledger.records if r.ts > created[0].ts and not r.cache_writes.get("explicit")]
    assert after and all(r.cache_read > 4000 for r in after)
    assert all(r.usage_metadata.cached_content_token_count == rec.cache_read
               for r, rec in zip(replies[-len(after):], after, strict=True))


def test_a_client_wrapped_where_it_is_made_keeps_working(mock_url):
    # docs/sdk.md's `prefixgate.wrap(anthropic.Anthropic())`, with google-genai: the original Client, referenced by
    # nothing else, was collected and closed the httpx client the wrapper sends through, so the first call raised
    # RuntimeError "Cannot send a request, as the client has been closed".
    ledger = Ledger()
    models = prefixgate.wrap(genai.Client(api_key=fresh_key("AIza"), http_options={"base_url": mock_url}),
                             ledger=ledger).models
    gc.collect()
    assert models.generate_content(model=GEMINI_MODEL, contents="Where is my parcel?", config=config(1)).text
    assert len(ledger.records) == 1
