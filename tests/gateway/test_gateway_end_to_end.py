"""The whole path as a user runs it: `prefixgate serve` and `prefixgate mock-providers` as separate processes,
the real openai, anthropic and google-genai SDKs pointed at the gateway by base URL only. The second request
of a repeated prompt reads the (simulated) provider cache, the gateway's headers and ledger account for it,
and bad input comes back in each SDK's own error type."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anthropic
import httpx
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from prefixgate.ledger import read_records
from tests.support_services import wait_until
from tests.support_stack import healthy, running_stack

pytestmark = pytest.mark.slow

KEYS = {"OPENAI_API_KEY": "sk-e2e-openai-0123456789", "ANTHROPIC_API_KEY": "sk-ant-e2e-0123456789",
        "GEMINI_API_KEY": "AIzaEndToEndKey00000000000000"}
SYSTEM = "You are the support assistant of ACME Parcel. Follow the refund policy below exactly.\n" + \
    "Refunds are issued to the original payment method within five business days of approval. " * 90
# Gemini caches nothing under 2,048 tokens (4,096 from 3.x Flash; https://ai.google.dev/gemini-api/docs/caching).
GEMINI_SYSTEM = "\n".join([SYSTEM] * 4)


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    tmp = tmp_path_factory.mktemp("e2e")
    ledger = tmp / "ledger.sqlite"
    with running_stack(tmp, {**KEYS, "PREFIXGATE_LEDGER_PATH": str(ledger)}) as (gw_url, _):
        yield gw_url, ledger


def test_openai_sdk_second_request_reads_the_cache_and_the_headers_say_so(stack) -> None:
    url, _ = stack
    client = openai.OpenAI(api_key="caller", base_url=url + "/v1", max_retries=0)
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Where is my refund?"}]
    first = client.chat.completions.with_raw_response.create(model="gpt-5.4", messages=messages, max_tokens=20)
    second = client.chat.completions.with_raw_response.create(model="gpt-5.4", messages=messages, max_tokens=20)
    cached = second.parse().usage.prompt_tokens_details.cached_tokens
    assert first.parse().usage.prompt_tokens_details.cached_tokens == 0
    assert cached >= 1024 and cached % 128 == 0
    assert int(second.headers["x-prefixgate-cache-read-tokens"]) == cached
    assert float(second.headers["x-prefixgate-savings-usd"]) > 0
    assert float(second.headers["x-prefixgate-cost-usd"]) < float(first.headers["x-prefixgate-cost-usd"])
    assert second.headers["x-prefixgate-plan"]

    stream = client.chat.completions.create(model="gpt-5.4", messages=messages, max_tokens=20, stream=True,
                                            stream_options={"include_usage": True})
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens == cached


def test_anthropic_sdk_gets_checkpoints_placed_for_it_and_reads_them_back(stack) -> None:
    url, _ = stack
    client = anthropic.Anthropic(api_key="caller", base_url=url, max_retries=0)
    args = {"model": "claude-sonnet-4-6", "max_tokens": 20, "system": SYSTEM,
            "messages": [{"role": "user", "content": "Where is my refund?"}]}
    first = client.messages.create(**args)
    # The caller sent no cache_control: the planner placed the checkpoint, so the first request writes.
    assert first.usage.cache_creation_input_tokens > 1000
    # The first answer has arrived, so its entry is readable (Anthropic: once the writing response starts).
    with client.messages.stream(**args) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text
    assert final.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens


def test_gemini_sdk_repeated_prompt_hits_the_implicit_cache(stack) -> None:
    url, _ = stack
    client = genai.Client(api_key="caller", http_options=types.HttpOptions(base_url=url, api_version="v1beta"))
    # Room for the answer beside the model's thinking, which counts against the limit
    config = types.GenerateContentConfig(system_instruction=GEMINI_SYSTEM, max_output_tokens=96)
    client.models.generate_content(model="gemini-3.5-flash", contents="Where is my refund?", config=config)
    second = client.models.generate_content(model="gemini-3.5-flash", contents="Where is my refund?",
                                            config=config)
    assert second.text
    assert second.usage_metadata.cached_content_token_count > 1000
    chunks = list(client.models.generate_content_stream(model="gemini-3.5-flash", contents="And the fee?",
                                                        config=config))
    assert "".join(c.text or "" for c in chunks)
    assert chunks[-1].usage_metadata.cached_content_token_count > 1000


def test_bad_input_gets_each_sdks_own_error_and_the_gateway_keeps_serving(stack) -> None:
    url, _ = stack
    with pytest.raises(openai.BadRequestError) as e:
        openai.OpenAI(api_key="caller", base_url=url + "/v1", max_retries=0).chat.completions.create(
            model="gpt-5.4", messages=[{"role": "user", "content": "hi"}], max_tokens="many")
    assert "max_tokens" in str(e.value)
    with pytest.raises(anthropic.BadRequestError) as e:
        anthropic.Anthropic(api_key="caller", base_url=url, max_retries=0).messages.create(
            model="claude-sonnet-4-6", max_tokens=10, messages=[])
    assert "messages" in str(e.value)
    gemini = genai.Client(api_key="caller", http_options=types.HttpOptions(base_url=url))  # kept: closes when freed
    with pytest.raises(genai_errors.ClientError) as e:
        gemini.models.generate_content(model="gemini-no-such-model", contents="hi")
    assert e.value.code in (400, 404) and "gemini-no-such-model" in str(e.value)
    assert healthy(url)


def test_every_answered_request_is_in_the_ledger_with_its_savings(stack) -> None:
    url, ledger = stack
    client = openai.OpenAI(api_key="caller", base_url=url + "/v1", max_retries=0)
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Ledger check"}]
    before = len(read_records(str(ledger)))
    for _ in range(3):
        client.chat.completions.create(model="gpt-5.4", messages=messages, max_tokens=5)
    wait_until(lambda: len(read_records(str(ledger))) >= before + 3, 10, "three new ledger records")
    records = sorted(read_records(str(ledger)), key=lambda r: r["ts"])[-3:]
    assert [r["route"] for r in records] == [records[0]["route"]] * 3 and records[0]["dialect"] == "openai"
    assert records[-1]["cache_read"] > 1000 and float(records[-1]["savings_usd"]) > 0
    assert float(records[-1]["cost_usd"]) < float(records[-1]["cost_without_cache_usd"])
    assert not any(KEYS["OPENAI_API_KEY"] in str(r) for r in read_records(str(ledger)))


def test_the_older_google_generativeai_sdk_works_unmodified(stack) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # it announces its own deprecation
        import google.generativeai as old_genai
    url, _ = stack
    old_genai.configure(api_key="caller", transport="rest", client_options={"api_endpoint": url})
    model = old_genai.GenerativeModel("gemini-3.5-flash", system_instruction=GEMINI_SYSTEM)
    first = model.generate_content("Where is my refund?")
    assert first.text and first.usage_metadata.prompt_token_count > 1000
    # Its REST transport streams without alt=sse: the gateway answers Gemini's JSON-array stream.
    chunks = list(model.generate_content("And the fee?", stream=True))
    assert len(chunks) > 1 and "".join(c.text for c in chunks)
    assert chunks[-1].usage_metadata.cached_content_token_count > 1000
    assert model.count_tokens("hello").total_tokens > 0


def test_a_gemini_stream_without_alt_sse_is_one_json_array(stack) -> None:
    url, _ = stack
    body = {"systemInstruction": {"parts": [{"text": GEMINI_SYSTEM}]}, "contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}
    r = httpx.post(f"{url}/v1beta/models/gemini-3.5-flash:streamGenerateContent", json=body,
                   headers={"x-goog-api-key": "caller"}, timeout=30)
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    items = r.json()
    assert isinstance(items, list) and len(items) > 1
    assert items[-1]["candidates"][0]["finishReason"] and items[-1]["usageMetadata"]["promptTokenCount"] > 1000
    sse = httpx.post(f"{url}/v1beta/models/gemini-3.5-flash:streamGenerateContent?alt=sse", json=body,
                     headers={"x-goog-api-key": "caller"}, timeout=30)
    assert sse.headers["content-type"].startswith("text/event-stream") and sse.text.startswith("data: ")
