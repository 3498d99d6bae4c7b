"""Claude's or Gemini's 429 reaching an OpenAI-format caller (the openai SDK calling claude-sonnet-5-5 through the
gateway) says which limit it reached in OpenAI's own terms: type `requests` or `tokens`, code `rate_limit_exceeded`
(platform.openai.com/docs/guides/error-codes, 429; /docs/guides/rate-limits). It was `rate_limit_error`, which is no
OpenAI type. What the refusal says is read as its provider documents it: Anthropic's
anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-remaining `0` (docs.claude.com/en/api/rate-limits,
"Response headers"), the Gemini API's QuotaFailure violation's quota metric (requests or input tokens per minute;
ai.google.dev/gemini-api/docs/rate-limits). A refusal that names no limit (Bedrock's ThrottlingException) is
`tokens`. The mock providers answer each provider's documented 429 (`status=429;limit=...`)."""

from __future__ import annotations

import openai
import pytest

from tests.gateway.test_stream_error_types import MSG, fails, stack  # noqa: F401 (a fixture)


def refusal(gw, model: str, api: str, stream: bool) -> openai.RateLimitError:
    client = openai.OpenAI(api_key="caller", base_url=gw.url + "/v1", max_retries=0)
    with pytest.raises(openai.RateLimitError) as exc:
        if api == "chat":
            client.chat.completions.create(model=model, messages=MSG, stream=stream)
        else:
            client.responses.create(model=model, input="Tell me a long story", stream=stream)
    return exc.value


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("provider", "model", "limit"), [
    ("anthropic", "to-claude", "requests"), ("anthropic", "to-claude", "tokens"),
    ("gemini", "to-gemini", "requests"), ("gemini", "to-gemini", "tokens")])
def test_an_upstreams_429_reaches_an_openai_caller_as_the_limit_it_reached(stack, provider, model, limit, api,  # noqa: F811
                                                                           stream):
    gw, ctx, _ = stack
    fails(ctx, provider, f"status=429;retry_after=3;limit={limit}")
    err = refusal(gw, model, api, stream)
    assert (err.status_code, err.type, err.code) == (429, limit, "rate_limit_exceeded")
    headers = err.response.headers
    assert headers["retry-after"] == "3"
    # Anthropic's headers are read, not passed on: the openai SDK reads none of them
    assert not [k for k in headers if k.startswith(("anthropic-ratelimit-", "x-ratelimit-"))]


@pytest.mark.parametrize("stream", [False, True])
def test_a_429_naming_no_limit_reaches_an_openai_caller_as_tokens(stack, stream):  # noqa: F811
    gw, ctx, _ = stack
    fails(ctx, "bedrock", "status=429")
    err = refusal(gw, "to-bedrock", "chat", stream)
    assert (err.status_code, err.type, err.code) == (429, "tokens", "rate_limit_exceeded")
