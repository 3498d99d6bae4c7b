"""Creating or extending billed provider state (a Gemini explicit cache, its TTL) passes the same admission as a
model request: the key's route for the model named, its rate limit, and a budget not already spent."""

from __future__ import annotations

import time

import httpx
import pytest

from prefixgate.ledger import read_records
from prefixgate.policies.schema import hash_key
from tests.gateway.support_gateway import policy_for, running_gateway, running_upstream, settings_for

CLAUDE_ONLY, SPENT, OPEN = "pg-claude-only-0001", "pg-spent-0002", "pg-gemini-0003"
CACHE = {"model": "models/gemini-3.5-flash", "ttl": "300s",
         "contents": [{"role": "user", "parts": [{"text": "The shipping manual. " * 50}]}]}


@pytest.fixture
def stack(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "AIzaAdmissionState0000000000000000000")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-admission-state-0004")
    with running_upstream() as up:
        settings = settings_for(up.url, tmp_path)
        policy = policy_for(settings, {
            "routes": [{"name": "claude", "models": ["claude-*"], "targets": [{"upstream": "anthropic"}]},
                       {"name": "gemini", "models": ["gemini-*"], "targets": [{"upstream": "gemini"}]}],
            "keys": [{"name": "claude-only", "key_sha256": hash_key(CLAUDE_ONLY), "routes": ["claude"]},
                     {"name": "spent", "key_sha256": hash_key(SPENT), "budget": {"usd": 0.000001, "period": "total"}},
                     {"name": "open", "key_sha256": hash_key(OPEN)}]})
        with running_gateway(settings, policy=policy) as gw:
            yield up, gw.url, settings.ledger_path


def key(k: str) -> dict[str, str]:
    return {"x-goog-api-key": k}


def test_a_key_without_the_models_route_cannot_create_a_cache(stack):
    up, url, _ = stack
    answer = httpx.post(url + "/v1beta/cachedContents", json=CACHE, headers=key(CLAUDE_ONLY))
    assert answer.status_code == 403 and answer.json()["error"]["status"] == "PERMISSION_DENIED", answer.text
    assert not up.received
    created = httpx.post(url + "/v1beta/cachedContents", json=CACHE, headers=key(OPEN))
    assert created.status_code == 200, created.text


def test_a_key_over_its_budget_cannot_create_or_extend_a_cache(stack):
    up, url, ledger = stack
    # Its own output limit: admitted though it costs more than the budget (one request may overshoot it); with none,
    # what the budget has left pays for no minimal answer, and it would be refused.
    chat = {"contents": [{"role": "user", "parts": [{"text": "Where is my parcel?"}]}],
            "generationConfig": {"maxOutputTokens": 20}}
    first = httpx.post(url + "/v1beta/models/gemini-3.5-flash:generateContent", json=chat, headers=key(SPENT))
    assert first.status_code == 200, first.text
    deadline = time.monotonic() + 10
    while not read_records(ledger) and time.monotonic() < deadline:
        time.sleep(0.05)
    seen = len(up.received)
    for method, path, body in (("POST", "/v1beta/cachedContents", CACHE),
                               ("PATCH", "/v1beta/cachedContents/abc", {"ttl": "3600s"})):
        answer = httpx.request(method, url + path, json=body, headers=key(SPENT))
        assert answer.status_code == 429 and answer.json()["error"]["status"] == "RESOURCE_EXHAUSTED", answer.text
    assert len(up.received) == seen
