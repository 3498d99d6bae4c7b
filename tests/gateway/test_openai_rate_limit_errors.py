"""The gateway's own rate-limit 429s reach an OpenAI caller as OpenAI's do. OpenAI's rate-limit guide and error
codes (platform.openai.com/docs/guides/rate-limits, /docs/guides/error-codes): a 429 whose error `type` is the limit
reached (`requests`, `tokens`) and `code` is `rate_limit_exceeded`, with x-ratelimit-limit-*, -remaining-* and
-reset-* headers (the reset a duration: `1s`, `6m0s`); a spent quota is a 429 whose type and code are
`insufficient_quota` (test_budget_refusals_final.py). The real openai SDK reads them."""

from __future__ import annotations

from collections.abc import Iterator

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
KEYS = {"chat-rpm": {"requests_per_minute": 1}, "responses-rpm": {"requests_per_minute": 1},
        "chat-tpm": {"tokens_per_minute": 5}}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory) -> Iterator[str]:
    mp = pytest.MonkeyPatch()
    mp.setenv("OPENAI_API_KEY", "sk-rate-openai-000111")
    try:
        with ServerThread(mock_app(MockContext())) as mock:
            settings = settings_for(mock.url, tmp_path_factory.mktemp("rate"))
            policy = policy_for(settings, {
                "routes": [{"name": "openai", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]}],
                "keys": [{"name": name, "key_sha256": hash_key(f"pg-{name}-key-0001"), "rate_limit": limit}
                         for name, limit in KEYS.items()]})
            app = create_app(settings, policy=policy)
            with ServerThread(app) as gw:
                app.state.proxy.limits.clock = lambda: NOW      # one minute's requests stay in that minute
                yield gw.url
    finally:
        mp.undo()


def ask(url: str, key: str, surface: str) -> object:
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


def test_a_key_over_its_tokens_per_minute_gets_openais_tokens_429(gateway):
    ask(gateway, "chat-tpm", "chat")       # its prompt and answer count against the minute's 5 tokens once settled

    refusals: list[openai.RateLimitError] = []

    def refused() -> bool:
        try:
            ask(gateway, "chat-tpm", "chat")
        except openai.RateLimitError as e:
            refusals.append(e)
        return bool(refusals)
    wait_until(refused, 30, "the tokens-per-minute limit enforced")
    err = refusals[0]
    assert (err.status_code, err.type, err.code) == (429, "tokens", "rate_limit_exceeded")
    headers = err.response.headers
    assert (headers["x-ratelimit-limit-tokens"], headers["x-ratelimit-remaining-tokens"]) == ("5", "0")
    assert headers["x-ratelimit-reset-tokens"] == "50s" and "x-ratelimit-limit-requests" not in headers
