"""An explicit cache whose creation got no answer in time: Google may have created it all the same (here, after
the gateway gave up), and bills its writing and its storage for as long as it lives. The gateway must find it,
book it and delete it; it used to record it as never created, leaving it unbilled in the ledger and alive
upstream for its whole TTL. Driven with google-genai against mock-providers."""

from __future__ import annotations

import pytest
from google import genai
from google.genai import types

from prefixgate.cache_planner import PlannerState
from prefixgate.gateway.app import create_app
from prefixgate.ledger import read_records
from prefixgate.policies import Policy, builtin_upstreams
from prefixgate.simulation.mock.faults import FaultPlan
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import settings_for
from tests.gateway.test_gateway_explicit_cache import SYSTEM, long_gap_history
from tests.support_services import ServerThread, wait_until

GATEWAY_KEY = "AIzaGatewayKey000000000000000"
CALLER_KEY = "pg-acme-caller-key-77c1e0d2b9"


@pytest.mark.parametrize("fault", [
    "latency=1.5",      # the creation takes 1.5 s, the route waits 0.5 s: the gateway gives up, the mock creates it after
    "cut_answer=1",     # created, and its answer cut off halfway: the gateway read no name, yet it was made
])
def test_a_cache_whose_creation_got_no_answer_is_found_billed_and_deleted(tmp_path, monkeypatch, fault):
    monkeypatch.setenv("GEMINI_API_KEY", GATEWAY_KEY)
    monkeypatch.setenv("KEY_ACME", CALLER_KEY)
    faults = FaultPlan.from_config({"faults": [{"fault": fault, "provider": "gemini",
                                                "path": "/v1beta/cachedContents", "times": 1}]})
    state = PlannerState()
    long_gap_history(state, "tenant:acme/warranty")
    with ServerThread(mock_app(MockContext(faults=faults))) as mock:
        upstream = genai.Client(api_key=GATEWAY_KEY, http_options=types.HttpOptions(base_url=mock.url,
                                                                                    api_version="v1beta"))
        settings = settings_for(mock.url, tmp_path)
        policy = Policy.from_dict({
            "routes": [{"name": "gemini", "models": ["gemini-*"], "retry": {"attempts": 1, "timeout_s": 0.5},
                        "targets": [{"upstream": "gemini"}]}],
            "keys": [{"name": "acme", "key_env": "KEY_ACME", "tenant": "acme"}],
        }, builtin_upstreams(settings))
        app = create_app(settings, policy=policy, planner_state=state)
        with ServerThread(app) as gw:
            app.state.proxy.caches.tick_s = 0.4
            client = genai.Client(api_key=CALLER_KEY, http_options=types.HttpOptions(
                base_url=gw.url, api_version="v1beta", headers={"x-prefixgate-route": "warranty"}))
            answer = client.models.generate_content(model="gemini-3.5-flash", contents="Is my toaster covered?",
                                                    config=types.GenerateContentConfig(system_instruction=SYSTEM))
            assert answer.text      # answered without the cache
            wait_until(lambda: any(r["kind"] == "cache_create" for r in read_records(settings.ledger_path)), 15,
                       "the cache's own record")
            # Deleted upstream: the gateway's account holds no cache (google-genai's caches.list).
            assert list(upstream.caches.list()) == []
    made = next(r for r in read_records(settings.ledger_path) if r["kind"] == "cache_create")
    assert made["cache_writes"]["explicit"] > 1000      # the system prompt's tokens, written into the cache
    assert made["key"] == "acme" and made["target"] == "gemini"
    # Writing it bills its tokens at the input rate ($1.50/MTok for gemini-3.5-flash, provider-caching.md), and its
    # storage the seconds it lived: a few seconds' worth, next to nothing.
    writing = made["cache_writes"]["explicit"] * 1.50 / 1e6
    assert writing <= float(made["cost_usd"]) < writing * 1.01
