"""A request with no output limit whose target's first replica is free (a self-hosted server) and whose chosen
replica charges for output is bounded by what the key's budget has left, as one at a paid first target is.

Admission and `Proxy.bound_at` priced the target at its first replica: free, no answer's length to bound, so the
request was not 'uncapped'. prepare() then chose the paid replica (by the prompt's hash and load), `cover` repriced it
at the model's whole output limit ($3.84 at gpt-5.5: 128,000 tokens at $30/MTok), granted while the $0.50 budget had
any room, and it went with no output limit: one request could overshoot the budget by its whole answer."""

from __future__ import annotations

from decimal import Decimal

import openai
import pytest

from prefixgate.gateway import proxy as proxy_module
from prefixgate.policies.schema import hash_key
from tests.gateway.support_gateway import policy_for, running_gateway, running_upstream, settings_for

DEAR = "gpt-5.5"
DEAR_OUTPUT = Decimal(30)    # gpt-5.5, USD per million output tokens (OpenAI's published price)
SECRET = "pg-replica-bound-0001"


@pytest.fixture(params=["openai", "house"])
def stack(request, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-openai-key-000111")
    # The prompt's hash and the replicas' load pick one: here, the one the test names.
    monkeypatch.setattr(proxy_module, "pick_replica", lambda _hash, replicas, *_: request.param)
    with running_upstream() as up:
        settings = settings_for(up.url, tmp_path)
        policy = policy_for(settings, {
            "upstreams": {"house": {"kind": "openai_compatible", "url": f"{up.url}/v1"}},
            "routes": [{"name": "replicas", "models": ["replicas"], "retry": {"attempts": 1},
                        "targets": [{"replicas": ["house", "openai"], "model": DEAR}]}],
            "keys": [{"name": "open-ended", "key_sha256": hash_key(SECRET), "budget": {"usd": 0.5, "period": "total"}}],
        })
        with running_gateway(settings, policy=policy) as gw:
            yield up, gw, request.param


def test_a_request_sent_to_a_paid_replica_is_bounded_by_the_budget(stack):
    up, gw, picked = stack
    caller = openai.OpenAI(api_key=SECRET, base_url=gw.url + "/v1", max_retries=0)
    caller.chat.completions.create(model="replicas", messages=[{"role": "user", "content": "Which dock first?"}])
    [sent] = up.received
    if picked == "house":       # free: its answer needs no bound
        assert "authorization" not in sent.headers and "max_completion_tokens" not in sent.body, sent
        return
    assert sent.headers.get("authorization") == "Bearer sk-secret-openai-key-000111", sent.headers   # OpenAI's replica
    # $0.50 less a prompt of a few dozen tokens at $5/MTok, at gpt-5.5's $30/MTok output.
    most = int(Decimal("0.50") / DEAR_OUTPUT * 10**6)
    assert most - 100 < sent.body.get("max_completion_tokens", 10**9) <= most, sent.body
