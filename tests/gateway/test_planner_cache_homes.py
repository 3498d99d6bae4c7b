"""An explicit cache the gateway's planner creates lives in one account (a Gemini API key's project; a Vertex
project and location): on a route balancing a model over two such replicas, a later turn the planner sends
against that cache goes to the replica holding it, even when its prompt's usual replica is busy and load would
spread it to the other one, which answers the cache a 403 (real google-genai SDK, the mock)."""

from __future__ import annotations

import pytest
from google import genai
from google.genai import types

from prefixgate.cache_planner import PlannerState
from prefixgate.gateway.app import create_app
from prefixgate.policies import hash_key
from tests.gateway.support_gateway import policy_for, settings_for
from tests.gateway.test_gateway_explicit_cache import SYSTEM, long_gap_history
from tests.support_services import ServerThread

ACME = "pg-planner-homes-acme-0123"
MODEL = "gemini-3.5-flash"


@pytest.fixture
def gateway(monkeypatch, tmp_path):
    from prefixgate.simulation.mock.server import MockContext
    from prefixgate.simulation.mock.server import create_app as mock_app

    monkeypatch.setenv("GEMINI_KEY_A", "AIzaReplicaKeyA00000000000000000")
    monkeypatch.setenv("GEMINI_KEY_B", "AIzaReplicaKeyB00000000000000000")
    state = PlannerState()
    long_gap_history(state, "tenant:acme/warranty")     # the tenant's own learned state
    with ServerThread(mock_app(MockContext())) as mock:
        settings = settings_for(mock.url, tmp_path)
        policy = policy_for(settings, {
            "upstreams": {"gemini-a": {"kind": "gemini", "url": mock.url, "api_key_env": "GEMINI_KEY_A"},
                          "gemini-b": {"kind": "gemini", "url": mock.url, "api_key_env": "GEMINI_KEY_B"}},
            "routes": [{"name": "flash", "models": ["gemini-*"], "targets": [{"replicas": ["gemini-a", "gemini-b"]}]}],
            "keys": [{"name": "acme", "key_sha256": hash_key(ACME), "tenant": "acme"}]})
        app = create_app(settings, policy=policy, planner_state=state)
        with ServerThread(app) as gw:
            yield gw.url, app


def test_a_later_turn_goes_where_the_planners_cache_lives(gateway):
    url, app = gateway
    client = genai.Client(api_key=ACME, http_options=types.HttpOptions(
        base_url=url, api_version="v1beta", headers={"x-prefixgate-route": "warranty"}))
    config = types.GenerateContentConfig(system_instruction=SYSTEM)
    first = client.models.generate_content(model=MODEL, contents="Is my toaster covered?", config=config)
    assert first.usage_metadata.cached_content_token_count > 5000     # the planner created its cache
    proxy = app.state.proxy
    (entry,) = proxy.caches.entries.values()
    home = entry.upstream.name
    proxy.in_flight[home] += 10         # busy: the prompt's usual replica is past the load cap
    try:
        second = client.models.generate_content(model=MODEL, contents="And my kettle?", config=config)
    finally:
        proxy.in_flight[home] -= 10
    assert second.usage_metadata.cached_content_token_count == first.usage_metadata.cached_content_token_count
