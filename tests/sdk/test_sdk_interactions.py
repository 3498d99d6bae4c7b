"""The real google-genai SDK's `client.interactions`, wrapped: created whole or streamed, continued with
`previous_interaction_id`, it is planned (the instruction's changing line moves out, so the cache reads it)
and priced once per call."""

from __future__ import annotations

import asyncio
from decimal import Decimal

from google import genai
from google.genai import types

import prefixgate
from prefixgate.sdk import Ledger
from tests.sdk.support_sdk import dated_system, fresh_key

MODEL = "gemini-3.8-flash"
MINIMUM = 4096          # 3.x Flash and newer (ai.google.dev caching page)
# gemini-3.8-flash, USD per million tokens: input, cached input, output (introductory, through 2026-12-31).
INPUT, CACHED, OUTPUT = Decimal("0.75"), Decimal("0.075"), Decimal("3.75")
LONG = "\n".join([dated_system(1)] * 5)       # about 5,700 tokens, its second line a timestamp


def test_interactions_are_planned_priced_and_read_the_cache(mock_url):
    ledger = Ledger()
    raw = genai.Client(api_key=fresh_key("AIza"), http_options=types.HttpOptions(base_url=mock_url))
    wrapped = prefixgate.wrap(raw, ledger=ledger)     # `raw` held: the copy sends through its connections
    first = wrapped.interactions.create(model=MODEL, system_instruction=LONG.replace("-01T", "-02T"), input="Hi")
    second = wrapped.interactions.create(model=MODEL, system_instruction=LONG.replace("-01T", "-03T"), input="Again",
                                         previous_interaction_id=first.id)
    events = list(wrapped.interactions.create(model=MODEL, system_instruction=LONG.replace("-01T", "-04T"),
                                              input="Stream", stream=True))
    final = events[-1].interaction
    # The timestamp moved out of the instruction: the later calls read it from the implicit cache.
    assert second.usage.total_cached_tokens >= MINIMUM and final.usage.total_cached_tokens >= MINIMUM
    records = ledger.records
    assert [(r.dialect, r.model, r.stream) for r in records] == [("interactions", MODEL, False),
                                                                ("interactions", MODEL, False),
                                                                ("interactions", MODEL, True)]
    for rec, usage in zip(records, (first.usage, second.usage, final.usage), strict=True):
        assert rec.cache_read == usage.total_cached_tokens
        assert rec.usage.input_total == usage.total_input_tokens
        expected = (rec.uncached_input * INPUT + rec.cache_read * CACHED + rec.output * OUTPUT) / 1_000_000
        assert Decimal(rec.cost_usd) == expected


def test_async_interactions_are_recorded_once(mock_url):
    ledger = Ledger()
    raw = genai.Client(api_key=fresh_key("AIza"), http_options=types.HttpOptions(base_url=mock_url))
    wrapped = prefixgate.wrap(raw, ledger=ledger)

    async def run():
        return await wrapped.aio.interactions.create(model=MODEL, input="Hi")

    answer = asyncio.run(run())
    (rec,) = ledger.records
    # Thoughts are billed as output (ai.google.dev/gemini-api/docs/thinking)
    usage = answer.usage
    assert (rec.dialect, rec.model) == ("interactions", MODEL)
    assert rec.output == usage.total_output_tokens + usage.total_thought_tokens and usage.total_thought_tokens
