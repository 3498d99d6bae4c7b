"""A spent budget is refused once, not retried: the real openai, anthropic and boto3 clients, with their default
retries, send a refused request to the gateway exactly once (each used to send it 3 times, and the anthropic SDK
slept out a monthly budget's Retry-After of days before its retries). A rate limit stays a refusal they retry.

Counted where the requests arrive: the gateway's app, wrapped to count each HTTP request it is sent."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field

import anthropic
import boto3
import openai
import pytest
from google import genai
from google.genai import types
from google.oauth2.credentials import Credentials

from prefixgate.config import Settings
from prefixgate.errors import RequestError
from prefixgate.gateway.app import create_app
from prefixgate.gateway.state import MemoryCounters
from prefixgate.policies import Limits, Policy, builtin_upstreams
from prefixgate.policies.schema import hash_key
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, settings_for
from tests.support_services import ServerThread

pytestmark = pytest.mark.slow

SPENT, PACED = "pg-spent-budget-key-0001", "pg-paced-rate-key-0002"
AWS_KEY, AWS_SECRET = "AKIDGATEWAYBEDROCK", "gateway/bedrock+secret"
BEDROCK_MODEL = "us.anthropic.claude-sonnet-5-5"
CONVERSE = {"modelId": BEDROCK_MODEL, "messages": [{"role": "user", "content": [{"text": "Where is order 7?"}]}],
            "inferenceConfig": {"maxTokens": 20}}
NOW = 1_800_000_010         # the gateway's clock: 10 s into a minute


@dataclass
class Stack:
    url: str
    arrived: list[str] = field(default_factory=list)    # the path of every request the gateway was sent

    def count(self, app):
        async def counted(scope, receive, send):
            if scope["type"] == "http":
                self.arrived.append(scope["path"])
            await app(scope, receive, send)
        return counted


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Iterator[Stack]:
    mp = pytest.MonkeyPatch()
    mp.setenv("OPENAI_API_KEY", "sk-budget-openai-000111")
    mp.setenv("ANTHROPIC_API_KEY", "sk-ant-budget-000222")
    mp.setenv("GEMINI_API_KEY", "AIzaBudgetGeminiKey0000000333")
    mp.setenv("AWS_ACCESS_KEY_ID", AWS_KEY)
    mp.setenv("AWS_SECRET_ACCESS_KEY", AWS_SECRET)
    mp.setenv("AWS_REGION", "us-east-1")
    for name in ("AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK", "AWS_PROFILE"):
        mp.delenv(name, raising=False)
    try:
        with ServerThread(mock_app(MockContext())) as mock:
            settings = settings_for(mock.url, tmp_path_factory.mktemp("refusals"), bedrock_base_url=mock.url)
            policy = policy_for(settings, {
                "routes": [{"name": "openai", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]},
                           {"name": "anthropic", "models": ["claude-*"], "targets": [{"upstream": "anthropic"}]},
                           {"name": "gemini", "models": ["gemini-*"], "targets": [{"upstream": "gemini"}]},
                           {"name": "bedrock", "models": ["*.anthropic.*"], "targets": [{"upstream": "bedrock"}]}],
                # A zero budget has been spent from the start (spent >= budget); `total` never resets, so the
                # refusal carries no Retry-After that an SDK could read as "do not retry".
                "keys": [{"name": "spent", "key_sha256": hash_key(SPENT), "budget": {"usd": 0, "period": "total"}},
                         {"name": "paced", "key_sha256": hash_key(PACED), "rate_limit": {"requests_per_minute": 1}}]})
            out, app = Stack(""), create_app(settings, policy=policy)
            with ServerThread(out.count(app)) as gateway:
                # The gateway's limits read a clock that stays at one instant: a minute's requests never reach
                # the next minute, however slow the SDKs' retries or the machine.
                app.state.proxy.limits.clock = lambda: NOW
                out.url = gateway.url
                yield out
    finally:
        mp.undo()


def bedrock(url: str, key: str):
    """boto3's bedrock-runtime client with its default retries (standard mode: 3 attempts in all), sending the
    gateway key as a bearer token (boto3 sends AWS_BEARER_TOKEN_BEDROCK over HTTPS only)."""
    client = boto3.client("bedrock-runtime", region_name="us-east-1", endpoint_url=url, aws_access_key_id=AWS_KEY,
                          aws_secret_access_key=AWS_SECRET)
    client.meta.events.register("before-send.bedrock-runtime.*",
                                lambda request, **_: request.headers.__setitem__("Authorization", f"Bearer {key}"))
    return client


def test_openai_sdk_sends_a_spent_budget_once(stack):
    client = openai.OpenAI(base_url=stack.url + "/v1", api_key=SPENT)     # max_retries 2, the default
    stack.arrived.clear()
    with pytest.raises(openai.RateLimitError) as err:
        client.chat.completions.create(model="gpt-5.4", messages=[{"role": "user", "content": "Hi"}])
    assert stack.arrived == ["/v1/chat/completions"]
    # OpenAI's own out-of-quota answer: a 429 whose type and code are insufficient_quota.
    assert err.value.status_code == 429 and err.value.code == "insufficient_quota"
    assert err.value.type == "insufficient_quota" and "spent its budget" in err.value.message


def test_anthropic_sdk_sends_a_spent_budget_once(stack):
    client = anthropic.Anthropic(base_url=stack.url, api_key=SPENT)
    stack.arrived.clear()
    with pytest.raises(anthropic.RateLimitError) as err:
        client.messages.create(model="claude-sonnet-5-5", max_tokens=20, messages=[{"role": "user", "content": "Hi"}])
    assert stack.arrived == ["/v1/messages"]
    assert err.value.status_code == 429 and err.value.body["error"]["type"] == "rate_limit_error"


def test_boto3_sends_a_spent_budget_once_and_raises_service_quota_exceeded(stack):
    client = bedrock(stack.url, SPENT)
    stack.arrived.clear()
    with pytest.raises(client.exceptions.ServiceQuotaExceededException) as err:
        client.converse(**CONVERSE)
    assert stack.arrived == [f"/model/{BEDROCK_MODEL}/converse"]
    # bedrock-runtime's service model: ServiceQuotaExceededException is a 400, and not retryable.
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_google_genai_gets_googles_resource_exhausted(stack):
    client = genai.Client(api_key=SPENT, http_options=types.HttpOptions(base_url=stack.url))
    stack.arrived.clear()
    with pytest.raises(genai.errors.ClientError) as err:
        client.models.generate_content(model="gemini-3.5-flash", contents="Hi")
    assert stack.arrived == ["/v1/models/gemini-3.5-flash:generateContent"]      # google-genai 3.6 calls v1
    assert err.value.code == 429 and err.value.status == "RESOURCE_EXHAUSTED"


@pytest.mark.parametrize("surface", ["gemini", "vertex"])
def test_google_genai_with_retry_options_sends_a_spent_budget_again_as_it_does_googles_own(stack, surface):
    # Google answers a spent allowance with RESOURCE_EXHAUSTED, HTTP 429 (google.rpc.Code: PERMISSION_DENIED "must not
    # be used for rejections caused by exhausting some resource"; the most specific code applies), and google-genai's
    # retry_options retry every 429 by its status alone (reading neither RetryInfo nor x-should-retry), Google's own
    # per-day quota refusals alike: there is no shape true to Google's docs that it would not send again. Each resend
    # is refused at admission again, before any upstream call (docs/gateway.md).
    options = types.HttpOptions(base_url=stack.url, retry_options=types.HttpRetryOptions(
        attempts=3, initial_delay=0.01, max_delay=0.02))
    client = (genai.Client(api_key=SPENT, http_options=options) if surface == "gemini" else
              genai.Client(vertexai=True, project="acme-project", location="us-east5", credentials=Credentials(SPENT),
                           http_options=options))
    stack.arrived.clear()
    with pytest.raises(genai.errors.ClientError) as err:
        client.models.generate_content(model="gemini-3.5-flash", contents="Hi")
    assert len(stack.arrived) == 3 and len(set(stack.arrived)) == 1
    assert err.value.code == 429 and err.value.status == "RESOURCE_EXHAUSTED" and "spent its budget" in err.value.message


def test_a_rate_limit_refusal_is_still_retried(stack):
    # The key's one request a minute is spent by the first call; boto3 retries the refusals (ThrottlingException),
    # all within that minute (the gateway's clock stands still).
    client = bedrock(stack.url, PACED)
    client.converse(**CONVERSE)
    stack.arrived.clear()
    with pytest.raises(client.exceptions.ThrottlingException) as err:
        client.converse(**CONVERSE)
    assert len(stack.arrived) == 3
    headers = err.value.response["ResponseMetadata"]["HTTPHeaders"]
    assert int(headers["retry-after"]) == 50 and "x-should-retry" not in headers     # the rest of the minute


def _day_budget():
    return Policy.from_dict({"routes": [{"name": "a", "models": ["m"], "targets": [{"upstream": "openai"}]}],
                             "keys": [{"name": "team", "key_sha256": hash_key("team-key-0001"),
                                       "budget": {"usd": 0, "period": "day"}}]}, builtin_upstreams(Settings())).keys[0]


@pytest.mark.parametrize("now,kind,wait", [
    (86_400 * 20_000 + 43_200, "quota", 43_200),        # noon: refused until midnight, half a day away
    (86_400 * 20_001 - 30, "rate_limit", 30),           # 30 s before midnight: worth waiting for, like a rate limit
])
def test_a_spent_budget_is_a_rate_limit_only_when_its_window_resets_within_a_minute(now, kind, wait):
    limits = Limits(MemoryCounters(), clock=lambda: now)
    with pytest.raises(RequestError) as err:
        asyncio.run(limits.admit(_day_budget()))
    assert (err.value.status, err.value.kind, err.value.retry_after) == (429, kind, wait)
