"""Acceptance: the real openai, anthropic and google-genai SDKs, pointed at the gateway by base URL only,
work sync and streaming, see usage with cached tokens, and get the x-prefixgate-* headers; the upstream
receives the gateway's provider keys and the caller's cache markers."""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest
from google import genai
from google.genai import types

from prefixgate.ledger import read_records
from tests.gateway.support_gateway import USAGE, running_gateway, running_upstream, settings_for

KEYS = {"OPENAI_API_KEY": "sk-gw-openai-0123456789", "ANTHROPIC_API_KEY": "sk-ant-gw-0123456789",
        "GEMINI_API_KEY": "AIzaGatewayKey000000000000000"}
SYSTEM = "You are a careful assistant for ACME support. " * 60
ALIASES = {"routes": [
    {"name": "claude-via-openai-sdk", "models": ["smart"], "targets": [{"upstream": "anthropic", "model": "claude-sonnet-5"}]},
    {"name": "gpt-via-anthropic-sdk", "models": ["fast"], "targets": [{"upstream": "openai", "model": "gpt-5.4"}]},
    {"name": "gemini-via-openai-sdk", "models": ["flash"], "targets": [{"upstream": "gemini", "model": "gemini-3.5-flash"}]},
    {"name": "openai", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]},
    {"name": "anthropic", "models": ["claude-*"], "targets": [{"upstream": "anthropic"}]},
    {"name": "gemini", "models": ["gemini-*"], "targets": [{"upstream": "gemini"}]},
]}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    for k, v in KEYS.items():
        mp.setenv(k, v)
    tmp = tmp_path_factory.mktemp("sdk")
    with running_upstream() as up:
        settings = settings_for(up.url, tmp)
        from tests.gateway.support_gateway import policy_for

        with running_gateway(settings, policy=policy_for(settings, ALIASES)) as gw:
            yield up, gw, settings
    mp.undo()


@pytest.fixture
def up(stack):
    stack[0].reset()
    return stack[0]


def oa_client(gw) -> openai.OpenAI:
    return openai.OpenAI(api_key="caller-key", base_url=gw.url + "/v1", max_retries=0)


def an_client(gw) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="caller-key", base_url=gw.url, max_retries=0)


def ge_client(gw, version: str = "v1beta") -> genai.Client:
    return genai.Client(api_key="caller-key", http_options=types.HttpOptions(base_url=gw.url, api_version=version))


def test_openai_sdk_sync_sees_cached_tokens_and_headers(stack, up):
    _, gw, _ = stack
    raw = oa_client(gw).chat.completions.with_raw_response.create(
        model="gpt-5.4", messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hi"}],
        prompt_cache_key="tenant-7")
    resp = raw.parse()
    assert resp.choices[0].message.content == "Hello, world"
    assert resp.usage.prompt_tokens_details.cached_tokens == USAGE.cache_read
    assert raw.headers["x-prefixgate-cache-read-tokens"] == str(USAGE.cache_read)
    # gpt-5.4 per MTok (https://developers.openai.com/api/docs/models/gpt-5.4): (40 uncached + 64 written, billed
    # as input) x $2.50 + 1920 cached x $0.25 + 5 out x $15; a cached token saves $2.50 - $0.25.
    assert raw.headers["x-prefixgate-cost-usd"] == "0.000815"
    assert float(raw.headers["x-prefixgate-savings-usd"]) == pytest.approx(1920 * 2.25 / 1e6)
    assert raw.headers["x-prefixgate-plan"].startswith("mode=rewrite")
    sent = up.received[-1]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEYS['OPENAI_API_KEY']}"
    assert sent.body["prompt_cache_key"] == "tenant-7"


def test_openai_sdk_stream_with_usage(stack, up):
    _, gw, _ = stack
    stream = oa_client(gw).chat.completions.create(
        model="gpt-5.4", messages=[{"role": "user", "content": "Hi"}], stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello, world"
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens == USAGE.cache_read


def test_openai_stream_without_usage_request_is_still_billed(stack, up):
    """The gateway always asks upstream for usage; a caller that did not ask does not get the extra chunk."""
    _, gw, settings = stack
    stream = oa_client(gw).chat.completions.create(model="gpt-5.4-mini", messages=[{"role": "user", "content": "Hi"}],
                                                   stream=True)
    chunks = list(stream)
    assert all(c.usage is None for c in chunks)
    assert up.received[-1].body["stream_options"] == {"include_usage": True}
    rid = stream.response.headers["x-prefixgate-request-id"]
    from tests.support_services import wait_until

    wait_until(lambda: any(r["id"] == rid for r in read_records(settings.ledger_path)), 5, "ledger record written")
    rec = next(r for r in read_records(settings.ledger_path) if r["id"] == rid)
    assert rec["cache_read"] == USAGE.cache_read and rec["stream"] and float(rec["cost_usd"]) > 0


def test_anthropic_sdk_sync_and_stream(stack, up):
    _, gw, _ = stack
    client = an_client(gw)
    system = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    raw = client.messages.with_raw_response.create(model="claude-sonnet-5", max_tokens=32, system=system,
                                                   messages=[{"role": "user", "content": "Hi"}],
                                                   extra_headers={"anthropic-beta": "extended-cache-ttl-2025-04-11"})
    msg = raw.parse()
    assert msg.content[0].text == "Hello, world"
    assert msg.usage.cache_read_input_tokens == USAGE.cache_read
    assert raw.headers["x-prefixgate-cache-read-tokens"] == str(USAGE.cache_read)
    sent = up.received[-1]
    assert sent.headers["x-api-key"] == KEYS["ANTHROPIC_API_KEY"]
    assert sent.headers["anthropic-beta"] == "extended-cache-ttl-2025-04-11"
    assert sent.body["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    with client.messages.stream(model="claude-sonnet-5", max_tokens=32,
                                messages=[{"role": "user", "content": "stream"}]) as stream:
        final = stream.get_final_message()
    assert "".join(b.text for b in final.content) == "Hello, world"
    assert final.usage.cache_read_input_tokens == USAGE.cache_read
    assert client.messages.count_tokens(model="claude-sonnet-5",
                                        messages=[{"role": "user", "content": "x"}]).input_tokens == 42
    # Anthropic refuses any request without `anthropic-version` (https://docs.claude.com/en/api/versioning), and a
    # beta field without its `anthropic-beta`: the count goes with the caller's, as a model request does.
    counted = up.received[-1]
    assert counted.path == "/v1/messages/count_tokens"
    assert counted.headers["anthropic-version"] == client.default_headers["anthropic-version"]     # the SDK's own
    client.beta.messages.count_tokens(model="claude-sonnet-5", messages=[{"role": "user", "content": "x"}],
                                      betas=["context-management-2025-06-27"])
    assert "context-management-2025-06-27" in up.received[-1].headers["anthropic-beta"].split(",")
    # Without a version of the caller's (a plain HTTP client), the format's own.
    httpx.post(f"{gw.url}/v1/messages/count_tokens", headers={"x-api-key": "caller-key"}, timeout=10,
               json={"model": "claude-sonnet-5", "messages": [{"role": "user", "content": "x"}]})
    assert up.received[-1].headers["anthropic-version"] == "2023-06-01"


@pytest.mark.parametrize("version", ["v1beta", "v1"])
def test_gemini_sdk_sync_and_stream(stack, up, version):
    _, gw, _ = stack
    client = ge_client(gw, version)
    resp = client.models.generate_content(model="gemini-3.5-flash", contents="Hi",
                                          config=types.GenerateContentConfig(system_instruction=SYSTEM))
    assert resp.text == "Hello, world"
    assert resp.usage_metadata.cached_content_token_count == USAGE.cache_read
    assert resp.sdk_http_response.headers["x-prefixgate-cache-read-tokens"] == str(USAGE.cache_read)
    assert up.received[-1].headers["x-goog-api-key"] == KEYS["GEMINI_API_KEY"]
    chunks = list(client.models.generate_content_stream(model="gemini-3.5-flash", contents="Hi"))
    assert "".join(c.text or "" for c in chunks) == "Hello, world"
    assert chunks[-1].usage_metadata.cached_content_token_count == USAGE.cache_read
    assert up.received[-1].path.endswith(":streamGenerateContent")


def test_openai_sdk_to_anthropic_keeps_breakpoints_as_cache_control(stack, up):
    _, gw, _ = stack
    resp = oa_client(gw).chat.completions.create(model="smart", messages=[
        {"role": "system", "content": [{"type": "text", "text": SYSTEM, "prompt_cache_breakpoint": {"mode": "explicit"}}]},
        {"role": "user", "content": "Hi"}])
    assert resp.usage.prompt_tokens_details.cached_tokens == USAGE.cache_read
    assert resp.choices[0].message.content == "Hello, world"
    sent = up.received[-1]
    assert sent.path == "/v1/messages" and sent.body["model"] == "claude-sonnet-5"
    # OpenAI's 30-minute breakpoint becomes the shortest Anthropic TTL that lasts as long: 1h.
    assert sent.body["system"] == [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral", "ttl": "1h"}}]


def test_openai_sdk_cache_key_to_anthropic_becomes_automatic_caching(stack, up):
    _, gw, _ = stack
    stream = oa_client(gw).chat.completions.create(model="smart", messages=[{"role": "user", "content": "Hi"}],
                                                   prompt_cache_key="team-a", stream=True,
                                                   stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens == USAGE.cache_read
    assert up.received[-1].body["cache_control"] == {"type": "ephemeral"}


def test_anthropic_sdk_to_openai_keeps_cache_control_as_breakpoints(stack, up):
    _, gw, _ = stack
    client = an_client(gw)
    msg = client.messages.create(model="fast", max_tokens=20,
                                 system=[{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
                                 messages=[{"role": "user", "content": "Hi"}])
    assert msg.usage.cache_read_input_tokens == USAGE.cache_read
    assert msg.content[0].text == "Hello, world"
    sent = up.received[-1]
    assert sent.body["messages"][0] == {"role": "system", "content": [
        {"type": "text", "text": SYSTEM, "prompt_cache_breakpoint": {"mode": "explicit"}}]}
    with client.messages.stream(model="fast", max_tokens=20, messages=[{"role": "user", "content": "s"}]) as stream:
        final = stream.get_final_message()
    assert final.content[0].text == "Hello, world"
    assert final.usage.cache_read_input_tokens == USAGE.cache_read


def test_openai_sdk_to_gemini_stream(stack, up):
    _, gw, _ = stack
    chunks = list(oa_client(gw).chat.completions.create(model="flash", messages=[{"role": "user", "content": "Hi"}],
                                                        stream=True, stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello, world"
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens == USAGE.cache_read
    assert up.received[-1].path == "/v1beta/models/gemini-3.5-flash:streamGenerateContent"


def test_models_list_and_metrics(stack, up):
    _, gw, _ = stack
    ids = [m.id for m in oa_client(gw).models.list()]
    assert {"smart", "fast", "flash"} <= set(ids)
    oa_client(gw).chat.completions.create(model="gpt-5.4", messages=[{"role": "user", "content": "Hi"}])
    import httpx

    text = httpx.get(gw.url + "/metrics").text
    assert 'prefixgate_tokens_total{kind="cache_read",model="gpt-5.4",route="openai",target="openai"}' in text
    assert "prefixgate_cache_hit_ratio" in text and "prefixgate_overhead_seconds_bucket" in text
