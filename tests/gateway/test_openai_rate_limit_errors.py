"""The gateway's own rate-limit 429s reach an OpenAI caller as OpenAI's do, and a Claude caller as Anthropic's do.
OpenAI's rate-limit guide and error codes (platform.openai.com/docs/guides/rate-limits, /docs/guides/error-codes): a
429 whose error `type` is the limit reached (`requests`, `tokens`) and `code` is `rate_limit_exceeded`, with
x-ratelimit-limit-*, -remaining-* and -reset-* headers (the reset a duration: `1s`, `6m0s`); a spent quota is a 429
whose type and code are `insufficient_quota` (test_budget_refusals_final.py). Anthropic's rate-limits page
(docs.claude.com/en/api/rate-limits, "Response headers"): retry-after and anthropic-ratelimit-requests-* or -tokens-*
(limit, remaining, and the reset as an RFC 3339 time). The real openai and anthropic SDKs read them."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import openai
import pytest

from prefixgate.gateway.app import create_app
from prefixgate.policies.schema import hash_key
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, settings_for
from tests.support_services import ServerThread, wait_until

pytestmark = pytest.mark.slow

NOW = 1_800_000_010         # the gateway's clock: 10 s into a minute, 50 s before the minute's limits reset
RESET = "2027-01-15T08:01:00Z"      # that minute's end (1_800_000_060), in RFC 3339
KEYS = {"chat-rpm": {"rate_limit": {"requests_per_minute": 1}}, "responses-rpm": {"rate_limit": {"requests_per_minute": 1}},
        "chat-tpm": {"rate_limit": {"tokens_per_minute": 5}}, "claude-rpm": {"rate_limit": {"requests_per_minute": 1}},
        "claude-tpm": {"rate_limit": {"tokens_per_minute": 5}},
        "chat-minute-budget": {"budget": {"usd": 0.0002, "period": "minute"}}}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory) -> Iterator[str]:
    mp = pytest.MonkeyPatch()
    mp.setenv("OPENAI_API_KEY", "sk-rate-openai-000111")
    mp.setenv("ANTHROPIC_API_KEY", "sk-ant-rate-000111")
    try:
        with ServerThread(mock_app(MockContext())) as mock:
            settings = settings_for(mock.url, tmp_path_factory.mktemp("rate"))
            policy = policy_for(settings, {
                "routes": [{"name": "openai", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]},
                           {"name": "claude", "models": ["claude-*"], "targets": [{"upstream": "anthropic"}]}],
                "keys": [{"name": name, "key_sha256": hash_key(f"pg-{name}-key-0001"), **limits}
                         for name, limits in KEYS.items()]})
            app = create_app(settings, policy=policy)
            with ServerThread(app) as gw:
                app.state.proxy.limits.clock = lambda: NOW      # one minute's requests stay in that minute
                yield gw.url
    finally:
        mp.undo()


def ask(url: str, key: str, surface: str) -> object:
    if surface == "claude":
        return anthropic.Anthropic(base_url=url, api_key=f"pg-{key}-key-0001", max_retries=0).messages.create(
            model="claude-sonnet-5-5", max_tokens=20, messages=[{"role": "user", "content": "Where is order 7?"}])
    client = openai.OpenAI(base_url=url + "/v1", api_key=f"pg-{key}-key-0001", max_retries=0)
    if surface == "responses":
        return client.responses.create(model="gpt-5.4-mini", input="Where is order 7?", max_output_tokens=20)
    return client.chat.completions.create(model="gpt-5.4-mini", max_completion_tokens=20,
                                          messages=[{"role": "user", "content": "Where is order 7?"}])


@pytest.mark.parametrize("surface", ["chat", "responses"])
def test_a_key_over_its_requests_per_minute_gets_openais_requests_429(gateway, surface):
    ask(gateway, f"{surface}-rpm", surface)
    with pytest.raises(openai.RateLimitError) as err:
        ask(gateway, f"{surface}-rpm", surface)
    assert (err.value.status_code, err.value.type, err.value.code) == (429, "requests", "rate_limit_exceeded")
    headers = err.value.response.headers
    assert (headers["x-ratelimit-limit-requests"], headers["x-ratelimit-remaining-requests"]) == ("1", "0")
    assert headers["x-ratelimit-reset-requests"] == "50s" and headers["retry-after"] == "50"
    assert "x-should-retry" not in headers      # a rate limit is retried, unlike a spent quota


def refusal(url: str, key: str, surface: str, says: str = "") -> openai.RateLimitError | anthropic.RateLimitError:
    """The first 429 `key` gets (what it asked for before counts once it has settled), saying `says`."""
    refusals: list[openai.RateLimitError | anthropic.RateLimitError] = []

    def refused() -> bool:
        try:
            ask(url, key, surface)
        except (openai.RateLimitError, anthropic.RateLimitError) as e:
            refusals.append(e)
        return bool(refusals) and says in refusals[-1].message
    wait_until(refused, 30, f"{key}'s limit enforced")
    return refusals[-1]


def test_a_key_over_its_tokens_per_minute_gets_openais_tokens_429(gateway):
    ask(gateway, "chat-tpm", "chat")       # its prompt and answer count against the minute's 5 tokens once settled
    err = refusal(gateway, "chat-tpm", "chat")
    assert (err.status_code, err.type, err.code) == (429, "tokens", "rate_limit_exceeded")
    headers = err.response.headers
    assert (headers["x-ratelimit-limit-tokens"], headers["x-ratelimit-remaining-tokens"]) == ("5", "0")
    assert headers["x-ratelimit-reset-tokens"] == "50s" and "x-ratelimit-limit-requests" not in headers


@pytest.mark.parametrize(("key", "family", "limit"), [("claude-rpm", "requests", "1"), ("claude-tpm", "tokens", "5")])
def test_a_claude_caller_over_a_keys_limit_gets_anthropics_rate_limit_headers(gateway, key, family, limit):
    ask(gateway, key, "claude")
    err = refusal(gateway, key, "claude")
    assert err.status_code == 429 and err.body["error"]["type"] == "rate_limit_error"
    headers = err.response.headers
    assert {k: headers.get(k) for k in (f"anthropic-ratelimit-{family}-limit", f"anthropic-ratelimit-{family}-remaining",
                                        f"anthropic-ratelimit-{family}-reset", "retry-after")} == {
        f"anthropic-ratelimit-{family}-limit": limit, f"anthropic-ratelimit-{family}-remaining": "0",
        f"anthropic-ratelimit-{family}-reset": RESET, "retry-after": "50"}
    assert not [k for k in headers if k.startswith("x-ratelimit-")]


def test_a_minute_budget_spent_is_openais_tokens_429_retried_not_out_of_quota(gateway):
    """A budget that comes back within the minute is waited out, as a held one is (test_budget_uncapped.py): a 429 of
    OpenAI type `tokens`, never `insufficient_quota` (a spent credit or monthly spend, which callers give up on)."""
    err = refusal(gateway, "chat-minute-budget", "chat", says="has spent its budget")
    assert (err.status_code, err.type, err.code) == (429, "tokens", "rate_limit_exceeded")
    assert err.response.headers["retry-after"] == "50" and "x-should-retry" not in err.response.headers
