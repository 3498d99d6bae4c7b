"""mock-providers' 429 (`status=429`) is each provider's own, as its documentation shows it, read with the real SDKs.
It was `rate_limit_error` with retry-after alone for every provider: an OpenAI caller saw no OpenAI type and no
x-ratelimit-* headers, a Claude caller no anthropic-ratelimit-*, a Gemini caller no RetryInfo.

- OpenAI, platform.openai.com/docs/guides/rate-limits ("Rate limits in headers": x-ratelimit-limit-requests/-tokens,
  x-ratelimit-remaining-*, x-ratelimit-reset-* as `1s`, `6m0s`) and /docs/guides/error-codes (429, code
  rate_limit_exceeded); the error's type names the limit (`requests`, `tokens`); retry-after-ms is what openai-python
  reads first.
- Anthropic, docs.claude.com/en/api/rate-limits ("Response headers": retry-after, anthropic-ratelimit-requests-*,
  -tokens-*, -input-tokens-*, -output-tokens-* with limit, remaining and an RFC 3339 reset) and /en/api/errors (429
  rate_limit_error).
- Gemini API, ai.google.dev/gemini-api/docs/rate-limits: 429 RESOURCE_EXHAUSTED, QuotaFailure and RetryInfo.
- Bedrock, bedrock-runtime's API reference: 429 ThrottlingException.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import anthropic
import boto3
import botocore.exceptions
import openai
import pytest
from botocore.config import Config
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from prefixgate.simulation.mock.faults import FaultPlan
from prefixgate.simulation.mock.server import MockContext, create_app
from tests.gateway.test_gateway_bedrock import KEY, SECRET, aws_env  # noqa: F401 (a fixture)
from tests.support_services import ServerThread

pytestmark = pytest.mark.slow
NOW = 1_800_000_000     # the mock's clock: 2027-01-15T08:00:00Z
RPC = "type.googleapis.com/google.rpc."


@pytest.fixture(scope="module")
def mock() -> Iterator[str]:
    with ServerThread(create_app(MockContext(clock=lambda: NOW)), log_level="critical") as server:
        yield server.url


def gpt(url: str, fault: str) -> openai.RateLimitError:
    client = openai.OpenAI(api_key="sk-" + uuid.uuid4().hex, base_url=url + "/v1", max_retries=0,
                           default_headers={"x-mock-fault": fault})
    with pytest.raises(openai.RateLimitError) as err:
        client.chat.completions.create(model="gpt-5.4", messages=[{"role": "user", "content": "Hi"}])
    return err.value


def test_openais_429_names_the_limit_reached_with_its_headers(mock):
    err = gpt(mock, "status=429;retry_after=1.5")
    assert (err.status_code, err.type, err.code) == (429, "requests", "rate_limit_exceeded")
    assert "on requests per min (RPM): Limit 500" in err.message and "gpt-5.4" in err.message
    headers = err.response.headers
    assert {k: headers.get(k) for k in (
        "x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests",
        "x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens",
        "retry-after", "retry-after-ms")} == {
        "x-ratelimit-limit-requests": "500", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1.5s",
        "x-ratelimit-limit-tokens": "30000", "x-ratelimit-remaining-tokens": "30000", "x-ratelimit-reset-tokens": "0s",
        "retry-after": "2", "retry-after-ms": "1500"}


def test_openais_tokens_429_on_the_responses_api(mock):
    client = openai.OpenAI(api_key="sk-" + uuid.uuid4().hex, base_url=mock + "/v1", max_retries=0)
    with pytest.raises(openai.RateLimitError) as err:
        client.responses.create(model="gpt-5.4", input="Hi", extra_headers={"x-mock-fault": "status=429;limit=tokens"})
    assert (err.value.type, err.value.code) == ("tokens", "rate_limit_exceeded")
    headers = err.value.response.headers
    assert (headers["x-ratelimit-remaining-tokens"], headers["x-ratelimit-reset-tokens"]) == ("0", "1s")
    assert headers["x-ratelimit-remaining-requests"] == "500"
    assert "retry-after" not in headers and "retry-after-ms" not in headers     # none asked for


@pytest.mark.parametrize(("fault", "exhausted"), [("status=429;retry_after=7", ("requests",)),
                                                  ("status=429;retry_after=7;limit=tokens", ("tokens", "input-tokens"))])
def test_anthropics_429_carries_its_rate_limit_headers(mock, fault, exhausted):
    client = anthropic.Anthropic(api_key="sk-ant-" + uuid.uuid4().hex, base_url=mock, max_retries=0)
    with pytest.raises(anthropic.RateLimitError) as err:
        client.messages.create(model="claude-sonnet-5-5", max_tokens=20, messages=[{"role": "user", "content": "Hi"}],
                               extra_headers={"x-mock-fault": fault})
    assert err.value.body["error"]["type"] == "rate_limit_error"
    headers = err.value.response.headers
    assert headers["retry-after"] == "7"
    sizes = {"requests": "50", "tokens": "30000", "input-tokens": "30000", "output-tokens": "8000"}
    for family, size in sizes.items():
        hit = family in exhausted
        assert headers[f"anthropic-ratelimit-{family}-limit"] == size
        assert headers[f"anthropic-ratelimit-{family}-remaining"] == ("0" if hit else size)
        assert headers[f"anthropic-ratelimit-{family}-reset"] == ("2027-01-15T08:00:07Z" if hit else "2027-01-15T08:00:00Z")


# The free tier's quotas a minute, as Gemini API users quote their 429s (metric, quotaId, limit)
@pytest.mark.parametrize(("limit", "metric", "quota_id", "size"), [
    ("requests", "generate_content_free_tier_requests", "GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "10"),
    ("tokens", "generate_content_free_tier_input_token_count", "GenerateContentInputTokensPerModelPerMinute-FreeTier",
     "250000")])
def test_the_gemini_apis_429_carries_quota_failure_and_retry_info(mock, limit, metric, quota_id, size):
    client = genai.Client(api_key=f"AIza-{uuid.uuid4().hex}", http_options=types.HttpOptions(
        base_url=mock, headers={"x-mock-fault": f"status=429;retry_after=3;limit={limit}"}))
    with pytest.raises(genai_errors.ClientError) as err:
        client.models.generate_content(model="gemini-3.5-flash", contents="Hi")
    assert (err.value.code, err.value.status) == (429, "RESOURCE_EXHAUSTED")
    kinds = {d["@type"]: d for d in err.value.details["error"]["details"]}
    assert kinds[RPC + "RetryInfo"]["retryDelay"] == "3s"
    violation = kinds[RPC + "QuotaFailure"]["violations"][0]
    assert violation["quotaDimensions"]["model"] == "gemini-3.5-flash"
    assert (violation["quotaMetric"], violation["quotaId"], violation["quotaValue"]) == (
        f"generativelanguage.googleapis.com/{metric}", quota_id, size)
    assert f"metric: generativelanguage.googleapis.com/{metric}, limit: {size}, model: gemini-3.5-flash" in err.value.message


@pytest.mark.usefixtures("aws_env")
def test_bedrocks_429_is_a_throttling_exception():
    plan = FaultPlan.from_config({"faults": [{"fault": "status=429;retry_after=2", "provider": "bedrock"}]})
    with ServerThread(create_app(MockContext(faults=plan)), log_level="critical") as server:
        runtime = boto3.client("bedrock-runtime", region_name="us-east-1", endpoint_url=server.url,
                               aws_access_key_id=KEY, aws_secret_access_key=SECRET,
                               config=Config(retries={"max_attempts": 1}))
        with pytest.raises(botocore.exceptions.ClientError) as err:
            runtime.converse(modelId="us.anthropic.claude-sonnet-5-5",
                             messages=[{"role": "user", "content": [{"text": "Hi"}]}])
    assert err.value.response["Error"]["Code"] == "ThrottlingException"
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 429
