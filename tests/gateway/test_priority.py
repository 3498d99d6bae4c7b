"""Priority classes: a key's or route's `priority` reaches a self-hosted engine as vLLM's `priority` integer
(lower first), never a hosted provider; the engine's own API takes the same field."""

from __future__ import annotations

import httpx
import pytest

from prefixgate.errors import RequestError
from prefixgate.ledger import read_records
from prefixgate.local_backend.protocol import parse_request
from prefixgate.policies import PolicyError, hash_key
from tests.gateway.support_gateway import policy_for, running_gateway, running_upstream, settings_for

URGENT, PLAIN = "pg-urgent-key-0001", "pg-plain-key-0002"


def test_the_class_goes_to_self_hosted_engines_as_vllm_priority_and_never_to_hosted_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-priority")
    with running_upstream() as up:
        settings = settings_for(up.url, tmp_path)
        policy = policy_for(settings, {
            "upstreams": {"fleet": {"kind": "openai_compatible", "url": f"{up.url}/v1"}},
            "routes": [{"name": "self", "models": ["llama-*"], "targets": [{"upstream": "fleet"}], "priority": "low"},
                       {"name": "hosted", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]}],
            "keys": [{"name": "urgent", "key_sha256": hash_key(URGENT), "priority": "high"},
                     {"name": "plain", "key_sha256": hash_key(PLAIN)}]})
        with running_gateway(settings, policy=policy) as gw:
            def ask(key: str, model: str) -> dict:
                r = httpx.post(gw.url + "/v1/chat/completions", headers={"authorization": f"Bearer {key}"},
                               json={"model": model, "messages": [{"role": "user", "content": "hi"}]}, timeout=30)
                assert r.status_code == 200, r.text
                return up.received[-1].body
            assert ask(PLAIN, "llama-3")["priority"] == 1     # the route's class: low
            assert ask(URGENT, "llama-3")["priority"] == -1   # the key's overrides it: high
            assert "priority" not in ask(URGENT, "gpt-5.4-mini")  # a hosted upstream has no such field
    notes = [line for r in read_records(settings.ledger_path) for line in r["explanation"]]
    assert "priority: low (engine priority 1)" in notes and "priority: high (engine priority -1)" in notes


def test_an_unknown_class_is_a_policy_error_naming_it(tmp_path):
    settings = settings_for("http://127.0.0.1:9", tmp_path)
    with pytest.raises(PolicyError, match=r"routes.0.priority: must be one of high, normal, low, got 'urgent'"):
        policy_for(settings, {"routes": [{"name": "r", "models": ["*"], "targets": [{"upstream": "openai"}],
                                          "priority": "urgent"}]})


def test_the_engine_api_takes_an_integer_priority_only():
    body = {"model": "m", "prompt": "hi", "priority": -1}
    assert parse_request(body, chat=False, model_name="m").priority == -1
    with pytest.raises(RequestError, match="priority: must be an integer"):
        parse_request({**body, "priority": "high"}, chat=False, model_name="m")
