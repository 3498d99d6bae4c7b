"""`prefixgate.client(...)`: real SDK clients configured for a running gateway (the real gateway app under
uvicorn, its upstreams pointed at mock-providers)."""

from __future__ import annotations

import asyncio

import anthropic
import openai
import pytest
from google import genai
from google.genai import types

import prefixgate
from prefixgate.ledger import read_records
from tests.gateway.support_gateway import running_gateway, settings_for
from tests.sdk.support_sdk import (
    ANTHROPIC_MODEL,
    GEMINI_MODEL,
    OPENAI_MODEL,
    dated_system,
    fresh_key,
)
from tests.support_services import wait_until


@pytest.fixture(scope="module")
def gateway(mock_url, tmp_path_factory):
    settings = settings_for(mock_url, tmp_path_factory.mktemp("gw"))
    with running_gateway(settings) as server:
        yield server, settings


def test_each_provider_client_talks_to_the_gateway(gateway):
    server, settings = gateway
    oa = prefixgate.client("openai", base_url=server.url, api_key=fresh_key(), route="support", tenant="acme")
    an = prefixgate.client("anthropic", base_url=server.url + "/", api_key=fresh_key(), max_retries=0)
    ge = prefixgate.client("gemini", base_url=server.url, api_key=fresh_key("AIza"))
    assert (type(oa), type(an), type(ge)) == (openai.OpenAI, anthropic.Anthropic, genai.Client)
    assert str(oa.base_url) == server.url + "/v1/" and oa.default_headers["x-prefixgate-route"] == "support"
    assert oa.default_headers["x-prefixgate-tenant"] == "acme"
    system = dated_system(1)
    chat = oa.chat.completions.with_raw_response.create(
        model=OPENAI_MODEL, max_tokens=8, messages=[{"role": "system", "content": system}, {"role": "user", "content": "hi"}])
    assert chat.headers["x-prefixgate-plan"].startswith("mode=") and chat.parse().choices[0].message.content
    message = an.messages.create(model=ANTHROPIC_MODEL, max_tokens=8, system=system,
                                 messages=[{"role": "user", "content": "hi"}])
    assert type(message) is anthropic.types.Message
    reply = ge.models.generate_content(model=GEMINI_MODEL, contents="hi",
                                       config=types.GenerateContentConfig(system_instruction=system, max_output_tokens=96))
    assert reply.text
    wait_until(lambda: len(read_records(settings.ledger_path)) >= 3, 10, "gateway ledger written")
    assert {r["dialect"] for r in read_records(settings.ledger_path)} == {"openai", "anthropic", "gemini"}


def test_async_client_for_the_gateway(gateway):
    server, _ = gateway

    async def run() -> str:
        client = prefixgate.client("anthropic", base_url=server.url, api_key=fresh_key(), async_client=True)
        assert type(client) is anthropic.AsyncAnthropic
        message = await client.messages.create(model=ANTHROPIC_MODEL, max_tokens=8, messages=[{"role": "user", "content": "hi"}])
        return message.content[0].text

    assert asyncio.run(run())


def test_bad_arguments_get_clear_errors(monkeypatch):
    for name in ("PREFIXGATE_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match="provider must be one of"):
        prefixgate.client("mistral", base_url="http://localhost:8080", api_key="k")
    with pytest.raises(ValueError, match="http"):
        prefixgate.client("openai", base_url="localhost:8080", api_key="k")
    with pytest.raises(ValueError, match="needs an API key"):
        prefixgate.client("openai", base_url="http://localhost:8080")
    with pytest.raises(ValueError, match="route"):
        prefixgate.client("openai", base_url="http://localhost:8080", api_key="k", route=" ")
    monkeypatch.setenv("PREFIXGATE_API_KEY", "from-env")
    assert prefixgate.client("openai", base_url="http://localhost:8080/v1").api_key == "from-env"
