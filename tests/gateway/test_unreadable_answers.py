"""An answer whose shape its format does not document (a compatible server's token counts as strings, a choice
that is no object, a body that is no JSON object): the upstream answered and billed it, so it is recorded and the
key's budget settled, and the caller gets the answer as sent or an error in its own shape, never a gateway 500."""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest
from starlette.responses import JSONResponse, Response, StreamingResponse

from prefixgate.ledger import read_records
from prefixgate.policies.schema import hash_key
from tests.gateway.support_gateway import chat_stub_stack
from tests.support_services import wait_until

CALLER = "pg-unreadable-caller-0001"
ANSWERS: list[object] = []
HELLO = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-5.4",
         "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello"}, "finish_reason": "stop"}]}


async def answer(request) -> Response:
    found = ANSWERS.pop(0)
    if isinstance(found, bytes):    # a stream's events
        return StreamingResponse(iter([found]), media_type="text/event-stream")
    return JSONResponse(found)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with chat_stub_stack(tmp_path_factory.mktemp("unreadable"), answer, {
            "routes": [{"name": "gpt", "models": ["gpt-5.4"], "targets": [{"upstream": "openai"}]},
                       {"name": "cached", "models": ["gpt-5.4-mini"], "targets": [{"upstream": "openai"}],
                        "response_cache": {"mode": "on"}},
                       {"name": "to-gpt", "models": ["claude-via-gpt"],
                        "targets": [{"upstream": "openai", "model": "gpt-5.4"}]}],
            "keys": [{"name": "app", "key_sha256": hash_key(CALLER), "budget": {"usd": 100, "period": "day"}}]}) as (gw, settings, app):
        yield gw, settings, app.state.proxy


def settled(settings, proxy, rid: str) -> dict:
    """The request's record, once its budget reservation is settled."""
    wait_until(lambda: any(r["id"] == rid for r in read_records(settings.ledger_path)) and not proxy.limits.reserved,
               10, "record written and reservation settled")
    return next(r for r in read_records(settings.ledger_path) if r["id"] == rid)


def test_usage_it_cannot_read_passes_the_answer_on_unpriced(stack):
    gw, settings, proxy = stack
    ANSWERS.append({**HELLO, "usage": {"prompt_tokens": "7", "completion_tokens": 2, "total_tokens": 9}})
    raw = openai.OpenAI(api_key=CALLER, base_url=gw.url + "/v1", max_retries=0).chat.completions.with_raw_response.create(
        model="gpt-5.4", messages=[{"role": "user", "content": "Hi"}])
    assert raw.parse().choices[0].message.content == "Hello"
    rec = settled(settings, proxy, raw.headers["x-prefixgate-request-id"])
    assert rec["status"] == 200 and rec["cost_usd"] is None
    assert any(line.startswith("usage: the answer reports usage the gateway cannot read") for line in rec["explanation"])


@pytest.mark.parametrize("body", [{**HELLO, "choices": [None]}, ["not", "an", "object"]])
def test_an_answer_it_cannot_translate_is_a_502_in_the_callers_shape_billed_at_the_estimate(stack, body):
    gw, settings, proxy = stack
    ANSWERS.append(body)
    with pytest.raises(anthropic.APIStatusError) as exc:
        anthropic.Anthropic(api_key=CALLER, base_url=gw.url, max_retries=0).messages.create(
            model="claude-via-gpt", max_tokens=30, messages=[{"role": "user", "content": "Hi"}])
    assert exc.value.status_code == 502 and exc.value.body["error"]["type"] == "api_error"
    rec = settled(settings, proxy, exc.value.response.headers["x-prefixgate-request-id"])
    assert rec["status"] == 502 and rec["output"] == 30 and rec["cost_usd"] is not None
    assert any(line.startswith("usage estimated") for line in rec["explanation"])


def test_stream_usage_it_cannot_read_relays_the_stream_unpriced(stack):
    gw, settings, proxy = stack
    head = '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-5.4","choices":'
    ANSWERS.append("".join(f"data: {head}{rest}\n\n" for rest in (
        '[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}',
        '[{"index":0,"delta":{},"finish_reason":"stop"}]}',
        '[],"usage":{"prompt_tokens":"7","completion_tokens":"2","total_tokens":"9"}}')).encode() + b"data: [DONE]\n\n")
    stream = openai.OpenAI(api_key=CALLER, base_url=gw.url + "/v1", max_retries=0).chat.completions.create(
        model="gpt-5.4", messages=[{"role": "user", "content": "Hi"}], stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "Hello"
    rec = settled(settings, proxy, stream.response.headers["x-prefixgate-request-id"])
    assert rec["status"] == 200 and rec["cost_usd"] is None
    assert any(line.startswith("usage: the answer reports usage the gateway cannot read") for line in rec["explanation"])


@pytest.mark.parametrize("model, sdk", [("gpt-5.4", "openai"), ("claude-via-gpt", "anthropic")])
@pytest.mark.parametrize("code, message, refused", [
    (502, "Provider returned error", {"openai": openai.InternalServerError, "anthropic": anthropic.InternalServerError}),
    (429, "Rate limit exceeded", {"openai": openai.RateLimitError, "anthropic": anthropic.RateLimitError})])
def test_an_error_in_a_200_body_is_that_error_to_the_caller(stack, model, sdk, code, message, refused):
    """OpenRouter: once the model began, an error is 'emitted in the response body' of a 200, its `code` the HTTP
    status it stands for (its errors page): a rate limit is the caller SDK's rate-limit error, which it retries."""
    gw, settings, proxy = stack
    ANSWERS.append({"error": {"code": code, "message": message, "metadata": {"provider_name": "X"}}})
    with pytest.raises(refused[sdk]) as exc:
        if sdk == "openai":
            openai.OpenAI(api_key=CALLER, base_url=gw.url + "/v1", max_retries=0).chat.completions.create(
                model=model, messages=[{"role": "user", "content": "Hi"}])
        else:
            anthropic.Anthropic(api_key=CALLER, base_url=gw.url, max_retries=0).messages.create(
                model=model, max_tokens=30, messages=[{"role": "user", "content": "Hi"}])
    assert exc.value.status_code == code and message in str(exc.value)
    rec = settled(settings, proxy, exc.value.response.headers["x-prefixgate-request-id"])
    assert rec["status"] == code and rec["uncached_input"] > 0 and rec["output"] == 0


def test_an_answer_the_response_cache_cannot_read_is_passed_on_and_never_stored(stack):
    gw, settings, proxy = stack
    odd = {**HELLO, "model": "gpt-5.4-mini", "choices": [None], "usage": {"prompt_tokens": 5, "completion_tokens": 2}}
    ANSWERS.extend([odd, odd])
    for _ in range(2):      # the repeat goes upstream again: nothing was stored to replay
        resp = httpx.post(gw.url + "/v1/chat/completions", headers={"authorization": f"Bearer {CALLER}"},
                          json={"model": "gpt-5.4-mini", "temperature": 0, "messages": [{"role": "user", "content": "Hi"}]})
        assert resp.status_code == 200 and resp.json()["choices"] == [None]
        assert settled(settings, proxy, resp.headers["x-prefixgate-request-id"])["status"] == 200
    assert not ANSWERS
