"""The real openai SDK's Responses calls, wrapped: `responses.create`, `.stream` and `.parse`, sync and
async, are planned (dated instructions made static, a cache key) and priced once from their usage."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import openai
import pytest
from pydantic import BaseModel

import prefixgate
from prefixgate.sdk import Ledger
from tests.sdk.support_sdk import OPENAI_MODEL, dated_system, fresh_key, running_mock_providers


@pytest.fixture(scope="module")
def mock_url() -> Iterator[str]:
    with running_mock_providers() as url:
        yield url


class Answer(BaseModel):
    text: str


def _args(day: int) -> dict:
    return {"model": OPENAI_MODEL, "instructions": dated_system(day), "input": "Where is my parcel?",
            "max_output_tokens": 200}


def test_create_twice_reads_the_cache_that_the_raw_client_misses(mock_url):
    ledger = Ledger()
    raw = openai.OpenAI(api_key=fresh_key(), base_url=mock_url + "/v1", max_retries=0)
    wrapped = prefixgate.wrap(openai.OpenAI(api_key=fresh_key(), base_url=mock_url + "/v1", max_retries=0),
                              ledger=ledger, route="support")
    raw_second = [raw.responses.create(**_args(day)) for day in (1, 2)][1]
    first, second = (wrapped.responses.create(**_args(day)) for day in (1, 2))
    assert raw_second.usage.input_tokens_details.cached_tokens == 0
    assert second.usage.input_tokens_details.cached_tokens > 1000
    assert type(second) is type(raw_second) is openai.types.responses.Response
    a, b = ledger.records
    assert (a.dialect, a.provider, b.route) == ("responses", "openai", "support")
    assert b.cache_read == second.usage.input_tokens_details.cached_tokens
    assert b.usage.input_total == second.usage.input_tokens and b.output == second.usage.output_tokens
    assert any(line.startswith("rewrite: moved") for line in b.explanation) and b.cost_usd is not None


def test_stream_and_parse_are_planned_and_priced_once(mock_url):
    ledger = Ledger()
    wrapped = prefixgate.wrap(openai.OpenAI(api_key=fresh_key(), base_url=mock_url + "/v1", max_retries=0),
                              ledger=ledger)
    with wrapped.responses.stream(**_args(1)) as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == final.output_text
    parsed = wrapped.responses.parse(**_args(2), text_format=Answer)
    streamed, structured = ledger.records
    assert streamed.stream and streamed.output == final.usage.output_tokens
    assert structured.cache_read == parsed.usage.input_tokens_details.cached_tokens > 1000


def test_async_create_and_stream(mock_url):
    ledger = Ledger()

    async def run() -> tuple:
        client = prefixgate.wrap(openai.AsyncOpenAI(api_key=fresh_key(), base_url=mock_url + "/v1", max_retries=0),
                                 ledger=ledger)
        first = await client.responses.create(**_args(1))
        async with client.responses.stream(**_args(2)) as stream:
            async for _ in stream:
                pass
            second = await stream.get_final_response()
        return first, second

    first, second = asyncio.run(run())
    assert second.usage.input_tokens_details.cached_tokens > 1000
    assert [r.output for r in ledger.records] == [first.usage.output_tokens, second.usage.output_tokens]


def test_other_responses_paths_pass_through_unrecorded(mock_url):
    ledger = Ledger()
    wrapped = prefixgate.wrap(openai.OpenAI(api_key=fresh_key(), base_url=mock_url + "/v1", max_retries=0),
                              ledger=ledger)
    made = wrapped.responses.create(model=OPENAI_MODEL, input="hi")
    assert wrapped.responses.retrieve(made.id).id == made.id
    assert wrapped.responses.input_tokens.count(model=OPENAI_MODEL, input="hi").input_tokens > 0
    wrapped.responses.delete(made.id)
    assert len(ledger.records) == 1
