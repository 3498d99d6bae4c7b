"""mock-providers' hosted OpenAI-compatible shapes, with the real `openai` SDK straight at the mock: each
reports usage as its provider documents it, and refuses what the real one refuses."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.core.providers.support_prompts import text_of

SYSTEM = "You answer questions about the warranty policy.\n" + text_of(1500)


def ask(client: openai.OpenAI, model: str, **kw):
    return client.chat.completions.create(model=model, messages=[{"role": "system", "content": SYSTEM},
                                                                 {"role": "user", "content": "Covered?"}], **kw)


def test_deepseek_reports_hit_and_miss(mock_server):
    url, _ = mock_server
    client = openai.OpenAI(base_url=f"{url}/deepseek/v1", api_key="sk-ds-hits", max_retries=0)
    first, second = ask(client, "deepseek-chat").usage, ask(client, "deepseek-chat").usage
    for u in (first, second):
        extra = u.model_extra
        assert extra["prompt_cache_hit_tokens"] + extra["prompt_cache_miss_tokens"] == u.prompt_tokens
        assert u.prompt_tokens_details is None
    assert first.model_extra["prompt_cache_hit_tokens"] == 0 and second.model_extra["prompt_cache_hit_tokens"] > 1000


def test_openrouter_reports_cost_even_in_a_stream_that_did_not_ask(mock_server):
    url, _ = mock_server
    client = openai.OpenAI(base_url=f"{url}/openrouter/v1", api_key="sk-or-stream", max_retries=0)
    whole = ask(client, "openai/gpt-4o-mini").usage
    assert whole.model_extra["cost"] > 0 and whole.prompt_tokens_details.cache_write_tokens == 0
    chunks = list(ask(client, "openai/gpt-4o-mini", stream=True))
    assert chunks[-1].usage is not None and chunks[-1].usage.model_extra["cost"] > 0
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens > 1000


def test_mistral_cached_tokens_are_whole_64_token_blocks_and_fireworks_sends_headers(mock_server):
    url, _ = mock_server
    mistral = openai.OpenAI(base_url=f"{url}/mistral/v1", api_key="sk-mi", max_retries=0)
    ask(mistral, "mistral-medium-latest")
    cached = ask(mistral, "mistral-medium-latest").usage.prompt_tokens_details.cached_tokens
    assert cached > 0 and cached % 64 == 0
    fireworks = openai.OpenAI(base_url=f"{url}/fireworks/v1", api_key="sk-fw", max_retries=0)
    raw = fireworks.chat.completions.with_raw_response.create(
        model="accounts/fireworks/models/llama-v3p3-70b-instruct", messages=[{"role": "user", "content": "hi"}])
    assert raw.headers["fireworks-prompt-tokens"] == str(raw.parse().usage.prompt_tokens)
    assert raw.headers["fireworks-cached-prompt-tokens"] == "0"


def test_what_real_providers_refuse(mock_server):
    url, _ = mock_server
    client = openai.OpenAI(base_url=f"{url}/groq/v1", api_key="sk-gq", max_retries=0)
    with pytest.raises(openai.BadRequestError, match="cache_salt"):
        ask(client, "openai/gpt-oss-120b", extra_body={"cache_salt": "tenant"})
    no_key = httpx.post(f"{url}/xai/v1/chat/completions", json={"model": "grok-4", "messages": []})
    assert no_key.status_code == 401
    with pytest.raises(openai.NotFoundError, match="no compatible provider 'cohere'"):
        ask(openai.OpenAI(base_url=f"{url}/cohere/v1", api_key="k", max_retries=0), "command")
    no_version = httpx.post(f"{url}/azure/openai/deployments/prod/chat/completions", headers={"api-key": "k"},
                            json={"messages": [{"role": "user", "content": "hi"}]})
    assert no_version.status_code == 400 and "API version" in no_version.json()["error"]["message"]
