"""The real openai, anthropic and google-genai SDKs, pointed at mock-providers by base URL, unmodified."""

from __future__ import annotations

import uuid

import anthropic
import httpx
import httpx2
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from prefixgate.simulation.mock.faults import FaultPlan
from prefixgate.simulation.mock.server import MockContext, create_app
from prefixgate.tokens import count_tokens
from tests.core.providers.support_prompts import text_of
from tests.support_services import ServerThread

pytestmark = pytest.mark.slow
SYSTEM = text_of(2000)
# Gemini 3.5 Flash caches from 4,096 tokens (https://ai.google.dev/gemini-api/docs/caching).
GEMINI_DOC = text_of(5000)
Q = count_tokens("Why?") + 3


def key() -> str:
    return "sk-test-" + uuid.uuid4().hex  # a fresh key is a fresh workspace: a cold cache


# ---- Anthropic ------------------------------------------------------------------------------------

@pytest.fixture
def claude(mock_server):
    url, _ = mock_server
    return anthropic.Anthropic(api_key=key(), base_url=url, max_retries=0)


def _claude_args(**extra):
    return {"model": "claude-sonnet-4-6", "max_tokens": 40,
            "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": "Why?"}], **extra}


def test_anthropic_messages_report_cache_write_then_read(claude):
    first = claude.messages.create(**_claude_args())
    assert first.usage.cache_creation_input_tokens == 2000
    assert first.usage.cache_creation.ephemeral_5m_input_tokens == 2000
    assert first.usage.cache_read_input_tokens == 0 and first.usage.input_tokens == Q
    second = claude.messages.create(**_claude_args())
    assert second.usage.cache_read_input_tokens == 2000 and second.usage.cache_creation_input_tokens == 0
    assert second.content[0].text == first.content[0].text      # deterministic reply
    assert second.usage.output_tokens <= 40
    assert second.stop_reason in ("end_turn", "max_tokens")


def test_anthropic_1h_write_is_reported_in_its_own_field(claude):
    args = _claude_args()
    args["system"][0]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    usage = claude.messages.create(**args).usage
    assert usage.cache_creation.ephemeral_1h_input_tokens == 2000
    assert usage.cache_creation.ephemeral_5m_input_tokens == 0


def test_anthropic_streaming_usage_is_cumulative_and_matches_non_streaming(claude):
    plain = claude.messages.create(**_claude_args())
    events = list(claude.messages.create(**_claude_args(), stream=True))
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds.index("content_block_start") < kinds.index("content_block_delta") < kinds.index("content_block_stop")
    start, delta = events[0].message.usage, events[-2].usage
    assert start.cache_read_input_tokens == 2000
    # message_delta.usage carries the final totals; adding it to message_start would double count.
    assert delta.output_tokens == plain.usage.output_tokens
    assert delta.cache_read_input_tokens == 2000 and delta.input_tokens == Q
    with claude.messages.stream(**_claude_args()) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == plain.content[0].text
    assert final.usage.output_tokens == plain.usage.output_tokens
    assert final.usage.cache_read_input_tokens == 2000


def test_anthropic_count_tokens_and_max_tokens(claude):
    counted = claude.messages.count_tokens(model="claude-sonnet-4-6", system=SYSTEM,
                                           messages=[{"role": "user", "content": "Why?"}])
    assert counted.input_tokens == 2000 + Q
    short = claude.messages.create(**_claude_args(max_tokens=3))
    assert short.usage.output_tokens <= 3 and short.stop_reason == "max_tokens"
    warm = claude.messages.create(**_claude_args(max_tokens=0))
    assert warm.content == [] and warm.stop_reason == "max_tokens"


@pytest.mark.parametrize(("fault", "error"), [
    ("status=429;retry_after=2", anthropic.RateLimitError),
    ("status=500", anthropic.InternalServerError),
    ("status=529", anthropic.OverloadedError),
])
def test_anthropic_faults_raise_the_sdk_exception(claude, fault, error):
    with pytest.raises(error) as e:
        claude.with_options(default_headers={"x-mock-fault": fault}).messages.create(**_claude_args())
    if "retry_after" in fault:
        assert e.value.response.headers["retry-after"] == "2"
    assert e.value.body["type"] == "error"


def test_anthropic_invalid_cache_use_is_a_bad_request(claude):
    blocks = [{"type": "text", "text": f"p{i}", "cache_control": {"type": "ephemeral"}} for i in range(5)]
    with pytest.raises(anthropic.BadRequestError, match="A maximum of 4 blocks with cache_control"):
        claude.messages.create(model="claude-sonnet-4-6", max_tokens=5, messages=[{"role": "user", "content": blocks}])
    with pytest.raises(anthropic.NotFoundError):
        claude.messages.create(**_claude_args(model="claude-unknown-1"))


def test_anthropic_dropped_stream_fails_the_iteration(claude):
    client = claude.with_options(default_headers={"x-mock-fault": "drop_stream_after=2"})
    seen = []
    # The anthropic SDK does not wrap a connection cut mid-stream: the transport's protocol error surfaces.
    with pytest.raises(httpx2.RemoteProtocolError):
        for event in client.messages.create(**_claude_args(), stream=True):
            seen.append(event.type)
    assert seen == ["message_start", "content_block_start"]


def test_anthropic_auth_headers_are_required(mock_server):
    url, _ = mock_server
    r = httpx.post(f"{url}/v1/messages", json=_claude_args(), headers={"anthropic-version": "2023-06-01"})
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
    r = httpx.post(f"{url}/v1/messages", json=_claude_args(), headers={"x-api-key": "k"})
    assert r.status_code == 400 and "anthropic-version" in r.json()["error"]["message"]
    models = httpx.get(f"{url}/v1/models", headers={"x-api-key": "k", "anthropic-version": "2023-06-01"}).json()
    assert "claude-sonnet-4-6" in [m["id"] for m in models["data"]]


# ---- OpenAI ---------------------------------------------------------------------------------------

@pytest.fixture
def gpt(mock_server):
    url, _ = mock_server
    return openai.OpenAI(api_key=key(), base_url=f"{url}/v1", max_retries=0)


def _gpt_args(**extra):
    return {"model": "gpt-5.4", "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Why?"}],
            **extra}


def test_openai_chat_reports_cached_tokens_on_a_repeated_prompt(gpt):
    first = gpt.chat.completions.create(**_gpt_args())
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    second = gpt.chat.completions.create(**_gpt_args())
    # Cached tokens are included in prompt_tokens, in 128-token steps.
    assert second.usage.prompt_tokens == first.usage.prompt_tokens
    assert second.usage.prompt_tokens_details.cached_tokens == 1920
    assert second.choices[0].message.content == first.choices[0].message.content
    assert second.usage.total_tokens == second.usage.prompt_tokens + second.usage.completion_tokens


def test_openai_stream_ends_with_one_usage_chunk_before_done(gpt):
    plain = gpt.chat.completions.create(**_gpt_args())
    chunks = list(gpt.chat.completions.create(**_gpt_args(), stream=True, stream_options={"include_usage": True}))
    assert all(c.usage is None for c in chunks[:-1])
    last = chunks[-1]
    assert last.choices == [] and last.usage.prompt_tokens_details.cached_tokens == 1920
    assert last.usage.completion_tokens == plain.usage.completion_tokens
    assert "".join(c.choices[0].delta.content or "" for c in chunks[:-1]) == plain.choices[0].message.content
    without = list(gpt.chat.completions.create(**_gpt_args(), stream=True))
    assert all(c.usage is None for c in without)


def test_openai_gpt_5_6_plus_reports_cache_write_tokens(gpt):
    first = gpt.chat.completions.create(**_gpt_args(model="gpt-6-sol"))
    assert first.usage.prompt_tokens_details.cache_write_tokens > 2000
    second = gpt.chat.completions.create(**_gpt_args(model="gpt-6-sol"))
    assert second.usage.prompt_tokens_details.cached_tokens == first.usage.prompt_tokens_details.cache_write_tokens


@pytest.mark.parametrize(("fault", "error", "status"), [
    ("status=429;retry_after=1", openai.RateLimitError, 429),
    ("status=500", openai.InternalServerError, 500),
    ("status=529", openai.InternalServerError, 529),
])
def test_openai_faults_raise_the_sdk_exception(gpt, fault, error, status):
    with pytest.raises(error) as e:
        gpt.chat.completions.create(**_gpt_args(), extra_headers={"x-mock-fault": fault})
    assert e.value.status_code == status


def test_openai_dropped_stream_loses_the_usage_chunk(gpt):
    chunks = []
    with pytest.raises(openai.APIConnectionError):  # the openai SDK wraps the cut connection
        for chunk in gpt.chat.completions.create(**_gpt_args(), stream=True, stream_options={"include_usage": True},
                                                 extra_headers={"x-mock-fault": "drop_stream_after=3"}):
            chunks.append(chunk)
    assert len(chunks) == 3 and all(c.usage is None for c in chunks)


def test_openai_latency_fault_delays_the_answer(gpt):
    import time

    started = time.monotonic()
    gpt.chat.completions.create(**_gpt_args(), extra_headers={"x-mock-fault": "latency=0.3"})
    assert time.monotonic() - started >= 0.3


def test_openai_standing_fault_rule_from_config():
    # A server of this test's own: a standing rule counts every matching request it sees.
    plan = FaultPlan.from_config({"faults": [
        {"fault": "status=503", "path": "/v1/chat/completions", "model": "gpt-5.4-mini", "every": 2, "times": 1}]})
    args = {"model": "gpt-5.4-mini", "messages": [{"role": "user", "content": "hi"}]}
    with ServerThread(create_app(MockContext(faults=plan)), log_level="critical") as server:
        gpt = openai.OpenAI(api_key=key(), base_url=f"{server.url}/v1", max_retries=0)
        gpt.chat.completions.create(**args)
        with pytest.raises(openai.InternalServerError):
            gpt.chat.completions.create(**args)      # every 2nd request, once
        gpt.chat.completions.create(**args)
        gpt.chat.completions.create(**args)


def test_openai_auth_and_bad_request_shapes(mock_server, gpt):
    url, _ = mock_server
    r = httpx.post(f"{url}/v1/chat/completions", json=_gpt_args())
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
    with pytest.raises(openai.BadRequestError) as e:
        gpt.chat.completions.create(model="gpt-5.4", messages=[])
    assert e.value.body["param"] == "messages"
    assert "gpt-5.4" in [m.id for m in gpt.models.list()]


# ---- Gemini ---------------------------------------------------------------------------------------

@pytest.fixture
def gemini(mock_server):
    url, _ = mock_server
    options = types.HttpOptions(base_url=url, retry_options=types.HttpRetryOptions(attempts=1))
    return genai.Client(api_key=key(), http_options=options)


def test_gemini_generate_reports_implicit_cache_hits(gemini):
    first = gemini.models.generate_content(model="gemini-3.5-flash", contents=GEMINI_DOC)
    assert first.usage_metadata.prompt_token_count == 5000
    assert not first.usage_metadata.cached_content_token_count
    second = gemini.models.generate_content(model="gemini-3.5-flash", contents=GEMINI_DOC)
    assert second.usage_metadata.cached_content_token_count == 5000
    assert second.text == first.text


def test_gemini_stream_carries_final_usage(gemini):
    plain = gemini.models.generate_content(model="gemini-3.5-flash", contents="Tell me")
    chunks = list(gemini.models.generate_content_stream(model="gemini-3.5-flash", contents="Tell me"))
    assert "".join(c.text or "" for c in chunks) == plain.text
    assert chunks[-1].usage_metadata.candidates_token_count == plain.usage_metadata.candidates_token_count
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP


def test_gemini_cached_contents_lifecycle(gemini):
    cache = gemini.caches.create(model="gemini-3.5-flash", config=types.CreateCachedContentConfig(
        contents=[types.Content(role="user", parts=[types.Part(text=GEMINI_DOC)])],
        system_instruction="Be terse.", ttl="600s", display_name="docs"))
    assert cache.name.startswith("cachedContents/") and cache.display_name == "docs"
    tokens = cache.usage_metadata.total_token_count
    assert tokens == 5000 + count_tokens("Be terse.")
    assert gemini.caches.get(name=cache.name).name == cache.name
    assert cache.name in [c.name for c in gemini.caches.list()]

    answer = gemini.models.generate_content(model="gemini-3.5-flash", contents="Summarise.",
                                            config=types.GenerateContentConfig(cached_content=cache.name))
    meta = answer.usage_metadata
    assert meta.cached_content_token_count == tokens
    assert meta.prompt_token_count == tokens + count_tokens("Summarise.")

    with pytest.raises(genai_errors.ClientError) as e:
        gemini.models.generate_content(model="gemini-3.5-flash", contents="x", config=types.GenerateContentConfig(
            cached_content=cache.name, system_instruction="again"))
    assert e.value.code == 400 and "should not be set in the request when using cached content" in e.value.message

    updated = gemini.caches.update(name=cache.name, config=types.UpdateCachedContentConfig(ttl="7200s"))
    assert updated.expire_time > cache.expire_time
    gemini.caches.delete(name=cache.name)
    with pytest.raises(genai_errors.ClientError) as e:
        gemini.caches.get(name=cache.name)
    assert e.value.code == 403


def test_gemini_too_small_cache_and_count_tokens(gemini):
    with pytest.raises(genai_errors.ClientError, match="Cached content is too small"):
        gemini.caches.create(model="gemini-3.5-flash", config=types.CreateCachedContentConfig(
            contents=[types.Content(role="user", parts=[types.Part(text="tiny")])]))
    assert gemini.models.count_tokens(model="gemini-3.5-flash", contents=GEMINI_DOC).total_tokens == 5000


@pytest.mark.parametrize(("fault", "error", "code"), [
    ("status=429", genai_errors.ClientError, 429),
    ("status=500", genai_errors.ServerError, 500),
    ("status=503", genai_errors.ServerError, 503),
])
def test_gemini_faults_raise_the_sdk_exception(gemini, fault, error, code):
    config = types.GenerateContentConfig(http_options=types.HttpOptions(headers={"x-mock-fault": fault}))
    with pytest.raises(error) as e:
        gemini.models.generate_content(model="gemini-3.5-flash", contents="hi", config=config)
    assert e.value.code == code


def test_gemini_auth_and_unknown_model(mock_server, gemini):
    url, _ = mock_server
    r = httpx.post(f"{url}/v1beta/models/gemini-3.5-flash:generateContent", json={"contents": [{"parts": [{"text": "x"}]}]})
    assert r.status_code == 403 and r.json()["error"]["status"] == "PERMISSION_DENIED"
    r = httpx.post(f"{url}/v1beta/models/gemini-3.5-flash:generateContent?key=k", json={"contents": [{"parts": [{"text": "x"}]}]})
    assert r.status_code == 200
    with pytest.raises(genai_errors.ClientError) as e:
        gemini.models.generate_content(model="gemini-0-nope", contents="hi")
    assert e.value.code == 404
