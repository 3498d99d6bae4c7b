"""An upstream account out of quota (OpenAI's 429 `insufficient_quota`) is not sent the request again: the gateway
fails over to the route's next target, or tells the caller at once, in a refusal its SDK does not retry either.
It used to retry the same upstream (route retries) and answer a retryable rate limit: one openai SDK call sent the
upstream the request 6 times. A plain rate limit is still retried."""

from __future__ import annotations

import openai
import pytest
from starlette.responses import JSONResponse

from tests.gateway.support_gateway import chat_stub_stack

# OpenAI's answer to an account out of credit (its error codes guide: "429 - You exceeded your current quota").
OUT_OF_QUOTA = {"message": "You exceeded your current quota, please check your plan and billing details.",
                "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}
RATE_LIMITED = {"message": "Rate limit reached for gpt-5.4-mini", "type": "requests", "param": None,
                "code": "rate_limit_exceeded"}
ASKED: list[str] = []      # the model of every request the upstream was sent


async def answer(request) -> JSONResponse:
    model = (await request.json())["model"]
    ASKED.append(model)
    if model == "gpt-5.4":
        return JSONResponse({"error": OUT_OF_QUOTA}, 429)
    if model == "gpt-5.4-nano":
        return JSONResponse({"error": RATE_LIMITED}, 429)
    return JSONResponse({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
                         "choices": [{"index": 0, "finish_reason": "stop",
                                      "message": {"role": "assistant", "content": "Order 7 shipped."}}],
                         "usage": {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16}})


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    retry = {"attempts": 3, "backoff_s": 0.01, "max_backoff_s": 0.01}
    with chat_stub_stack(tmp_path_factory.mktemp("quota"), answer, {"routes": [
            {"name": "one", "models": ["gpt-5.4", "gpt-5.4-nano"], "retry": retry, "targets": [{"upstream": "openai"}]},
            # The next target stands in for another account (here the same stub, asked for another model).
            {"name": "two", "models": ["gpt-5.4-mini"], "retry": retry,
             "targets": [{"upstream": "openai", "model": "gpt-5.4"}, {"upstream": "openai", "model": "gpt-5.4-mini"}]},
    ]}) as (gw, _, _):
        yield gw


def ask(gw, model: str, max_retries: int = 2):
    ASKED.clear()
    client = openai.OpenAI(api_key="caller", base_url=gw.url + "/v1", max_retries=max_retries)
    return client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Where is order 7?"}])


def test_an_upstream_out_of_quota_is_asked_once_per_sdk_call(gateway):
    with pytest.raises(openai.RateLimitError) as err:
        ask(gateway, "gpt-5.4")        # the SDK's default 2 retries, the route's 3 attempts
    assert ASKED == ["gpt-5.4"]
    assert err.value.code == err.value.type == "insufficient_quota"
    assert err.value.response.headers["x-should-retry"] == "false"


def test_an_upstream_out_of_quota_fails_over_to_the_next_target(gateway):
    reply = ask(gateway, "gpt-5.4-mini")
    assert reply.choices[0].message.content == "Order 7 shipped."
    assert ASKED == ["gpt-5.4", "gpt-5.4-mini"]


def test_an_upstream_rate_limit_is_still_retried(gateway):
    with pytest.raises(openai.RateLimitError) as err:
        ask(gateway, "gpt-5.4-nano", max_retries=0)
    assert ASKED == ["gpt-5.4-nano"] * 3
    assert err.value.code == "rate_limit_exceeded" and "x-should-retry" not in err.value.response.headers
