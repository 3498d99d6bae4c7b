"""A Gemini thinking model's thoughts are billed as output (ai.google.dev/gemini-api/docs/pricing: Gemini 2.5 Flash
$0.30 input, $2.50 output "including thinking tokens" per million), so the gateway's ledger prices
`thoughtsTokenCount` with `candidatesTokenCount`, streamed or not, and a caller in another format is told of them
as output tokens."""

from __future__ import annotations

from decimal import Decimal

import openai
import pytest
from google import genai
from google.genai import types

from prefixgate.ledger import read_records
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import running_gateway, settings_for
from tests.support_services import ServerThread, wait_until

# USD per million tokens, gemini-3.5-flash (shared/reference/provider-caching.md line 230, section 3.4)
INPUT, OUTPUT = Decimal("1.50"), Decimal("9.00")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("GEMINI_API_KEY", "gk-thoughts-0123456789abcdef")
    with ServerThread(mock_app(MockContext()), log_level="critical") as mock:
        settings = settings_for(mock.url, tmp_path_factory.mktemp("thoughts"))
        with running_gateway(settings) as gw:
            yield gw.url, settings
    mp.undo()


def _record(settings, count: int) -> dict:
    wait_until(lambda: len(read_records(settings.ledger_path)) >= count, 10, "a ledger record")
    return read_records(settings.ledger_path)[count - 1]


def test_thoughts_are_priced_as_output(stack):
    url, settings = stack
    client = genai.Client(api_key="pg-thoughts", http_options=types.HttpOptions(base_url=url, api_version="v1beta"))
    usage = client.models.generate_content(model="gemini-3.5-flash", contents="Why is the sky blue?").usage_metadata
    assert usage.thoughts_token_count > 0
    rec = _record(settings, 1)
    assert rec["output"] == usage.candidates_token_count + usage.thoughts_token_count
    expected = (usage.prompt_token_count * INPUT + rec["output"] * OUTPUT) / 1_000_000
    assert Decimal(rec["cost_usd"]) == expected
    streamed = list(client.models.generate_content_stream(model="gemini-3.5-flash", contents="And at sunset?"))
    last = streamed[-1].usage_metadata
    assert _record(settings, 2)["output"] == last.candidates_token_count + last.thoughts_token_count


def test_a_chat_caller_is_told_of_the_thoughts_as_completion_tokens(stack):
    url, _ = stack
    client = openai.OpenAI(api_key="pg-thoughts", base_url=url + "/v1", max_retries=0)
    reply = client.chat.completions.create(model="gemini-3.5-flash", messages=[{"role": "user", "content": "Why?"}])
    answer = len(reply.choices[0].message.content.split())       # at least a token a word
    assert reply.usage.completion_tokens >= answer + 64            # the mock's model thinks 64 tokens


def test_a_chat_caller_reads_the_thoughts_as_its_reasoning_tokens(stack):
    url, _ = stack
    client = openai.OpenAI(api_key="pg-thoughts", base_url=url + "/v1", max_retries=0)
    ask = {"model": "gemini-3.5-flash", "messages": [{"role": "user", "content": "Why?"}]}
    reply = client.chat.completions.create(**ask)
    assert reply.usage.completion_tokens_details.reasoning_tokens == 64     # the mock's model thinks 64 tokens
    chunks = list(client.chat.completions.create(**ask, stream=True, stream_options={"include_usage": True}))
    assert chunks[-1].usage.completion_tokens_details.reasoning_tokens == 64
