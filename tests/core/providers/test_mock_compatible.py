"""mock-providers' hosted OpenAI-compatible shapes, with the real `openai` SDK straight at the mock: each
reports usage as its provider documents it, and refuses what the real one refuses."""

from __future__ import annotations

import httpx
import openai
import pytest

from prefixgate.providers.compatible import PROFILES
from tests.core.providers.support_prompts import text_of

SYSTEM = "You answer questions about the warranty policy.\n" + text_of(1500)
# Over Gemini's minimum (2,048; 4,096 from 3.x Flash: https://ai.google.dev/gemini-api/docs/caching).
LONG_SYSTEM = SYSTEM + text_of(3000, " clause")


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


def marked(n: int = 1, system: str = SYSTEM) -> list[dict]:
    """The same prompt with `n` Anthropic-style breakpoints on the system prompt's parts (OpenRouter's form)."""
    parts = [{"type": "text", "text": f"{system} part {i}", "cache_control": {"type": "ephemeral"}} for i in range(n)]
    return [{"role": "system", "content": parts}, {"role": "user", "content": "Covered?"}]


def test_openrouter_claude_caches_only_at_breakpoints_and_bills_writes(mock_server):
    """OpenRouter's Claude models: no breakpoint, no cache (a repeat reads nothing); with one, the first call
    writes (`cache_write_tokens`, in `cost` at 1.25x input) and the repeat reads (0.1x), in a stream's last
    chunk too; a fifth breakpoint is refused as Anthropic refuses it."""
    url, _ = mock_server
    client = openai.OpenAI(base_url=f"{url}/openrouter/v1", api_key="sk-or-claude", max_retries=0)
    model = "anthropic/claude-sonnet-4.6"
    plain = [ask(client, model).usage for _ in range(2)]
    assert [u.prompt_tokens_details.cached_tokens for u in plain] == [0, 0]
    assert [u.prompt_tokens_details.cache_write_tokens for u in plain] == [0, 0]
    write = client.chat.completions.create(model=model, messages=marked()).usage
    chunks = list(client.chat.completions.create(model=model, messages=marked(), stream=True,
                                                 stream_options={"include_usage": True}))
    read = chunks[-1].usage
    written = write.prompt_tokens_details.cache_write_tokens
    assert written > 1000 and write.prompt_tokens_details.cached_tokens == 0
    assert read.prompt_tokens_details.cached_tokens == written and read.prompt_tokens_details.cache_write_tokens == 0
    per_mtok = {"input": 3, "read": 0.30, "write": 3.75, "output": 15}       # OpenRouter's Claude Sonnet 4.6 row

    def expected(u, cached: int, wrote: int) -> float:
        return ((u.prompt_tokens - cached - wrote) * per_mtok["input"] + cached * per_mtok["read"]
                + wrote * per_mtok["write"] + u.completion_tokens * per_mtok["output"]) / 1e6
    assert write.model_extra["cost"] == pytest.approx(expected(write, 0, written), rel=1e-9)
    assert read.model_extra["cost"] == pytest.approx(expected(read, written, 0), rel=1e-9)
    with pytest.raises(openai.BadRequestError, match="4"):
        client.chat.completions.create(model=model, messages=marked(5))


def test_openrouter_gemini_caches_implicitly_or_at_breakpoints(mock_server):
    url, _ = mock_server
    client = openai.OpenAI(base_url=f"{url}/openrouter/v1", api_key="sk-or-gemini", max_retries=0)
    # Implicitly from Google's 4,096-token minimum for 3.x Flash (https://ai.google.dev/gemini-api/docs/caching):
    # not this ~1,500-token prompt, but a longer one (~4,500).
    ask(client, "google/gemini-3.8-flash")
    assert ask(client, "google/gemini-3.8-flash").usage.prompt_tokens_details.cached_tokens == 0
    long = [{"role": "system", "content": LONG_SYSTEM}, {"role": "user", "content": "Covered?"}]
    client.chat.completions.create(model="google/gemini-3.8-flash", messages=long)
    assert client.chat.completions.create(model="google/gemini-3.8-flash", messages=long).usage.prompt_tokens_details.cached_tokens > 4096
    first = client.chat.completions.create(model="google/gemini-3.8-flash", messages=marked(system=LONG_SYSTEM)).usage
    second = client.chat.completions.create(model="google/gemini-3.8-flash", messages=marked(system=LONG_SYSTEM)).usage
    assert first.prompt_tokens_details.cache_write_tokens > 1000
    assert second.prompt_tokens_details.cached_tokens == first.prompt_tokens_details.cache_write_tokens


def test_each_provider_caches_with_its_own_minimum_and_step(mock_server):
    # DeepSeek caches whole 64-token prefix units with no fixed minimum (https://api-docs.deepseek.com/guides/kv_cache),
    # where OpenAI's stand-in would start at 1,024 in 128-token steps.
    url, _ = mock_server
    short = [{"role": "system", "content": text_of(300, " rule")}, {"role": "user", "content": "Covered?"}]
    client = openai.OpenAI(base_url=f"{url}/deepseek/v1", api_key="sk-ds-steps", max_retries=0)
    client.chat.completions.create(model="deepseek-chat", messages=short)
    usage = client.chat.completions.create(model="deepseek-chat", messages=short).usage
    hit = usage.model_extra["prompt_cache_hit_tokens"]
    assert hit > 0 and hit % 64 == 0 and usage.prompt_tokens - hit < 64


# A model of each profile's rows (Together has none; any name goes), as the mock is reached per provider.
STREAMED = [("openrouter", "openai/gpt-4o-mini"), ("deepseek", "deepseek-chat"), ("xai", "grok-4"),
            ("mistral", "mistral-medium-latest"), ("groq", "openai/gpt-oss-120b"),
            ("together", "meta-llama/Llama-3.3-70B-Instruct-Turbo"),
            ("fireworks", "accounts/fireworks/models/llama-v3p3-70b-instruct"), ("azure", "prod-4o")]


def test_every_profile_has_a_streamed_usage_case():
    assert {p for p, _ in STREAMED} == set(PROFILES)


@pytest.mark.parametrize("provider, model", STREAMED, ids=[p for p, _ in STREAMED])
def test_streamed_usage_comes_in_the_final_chunk_as_each_provider_words_it(mock_server, provider, model):
    """With `stream_options.include_usage`, the last chunk (no choices) carries the usage in the provider's own
    words, and its prompt count matches the unstreamed answer's; without it only OpenRouter still sends one."""
    url, _ = mock_server
    if provider == "azure":
        client = openai.AzureOpenAI(azure_endpoint=f"{url}/azure", api_key="k-stream", api_version="2024-10-21", max_retries=0)
    else:
        client = openai.OpenAI(base_url=f"{url}/{provider}/v1", api_key=f"sk-{provider}-stream", max_retries=0)
    whole = ask(client, model).usage
    chunks = list(ask(client, model, stream=True, stream_options={"include_usage": True}))
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    assert all(c.usage is None for c in chunks[:-1])
    assert last.usage.prompt_tokens == whole.prompt_tokens and last.usage.completion_tokens > 0
    if provider == "deepseek":
        extra = last.usage.model_extra
        assert extra["prompt_cache_hit_tokens"] + extra["prompt_cache_miss_tokens"] == last.usage.prompt_tokens
        assert extra["prompt_cache_hit_tokens"] > 1000
    else:
        assert last.usage.prompt_tokens_details.cached_tokens > 1000
    if provider == "openrouter":
        assert last.usage.model_extra["cost"] > 0
    if provider == "groq":
        assert {"queue_time", "prompt_time", "completion_time", "total_time"} <= set(last.usage.model_extra)
    unasked = list(ask(client, model, stream=True))
    assert (unasked[-1].usage is not None) == (provider == "openrouter")
