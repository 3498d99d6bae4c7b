"""The planner's upkeep of the explicit caches it made for a key's requests (an extension: PATCH ttl) is held against
the key's budget and billed to it, but is no request of the key's: it does not count toward the key's requests per
minute, and a key busy up to its limit does not lose the cache its requests read. Before, the extension took one of
the key's requests a minute, and was refused (the cache left to expire) whenever the key had used them all. Through
the gateway to mock-providers, with the google-genai SDK and one clock (the gateway's and the mock's) the test moves."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest

from prefixgate.cache_planner import PlannerState
from prefixgate.gateway.app import create_app
from prefixgate.policies import Policy, builtin_upstreams
from prefixgate.policies.limits import spend_counter
from prefixgate.policies.periods import window
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import settings_for
from tests.gateway.test_explicit_cache_lifetime import CALLER_KEY, GATEWAY_KEY, Clock, ask, kinds, on_gateway
from tests.gateway.test_gateway_explicit_cache import long_gap_history
from tests.support_calendar import midday_zone
from tests.support_services import ServerThread, wait_until

RPM = 2


@pytest.fixture
def stack(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", GATEWAY_KEY)
    monkeypatch.setenv("KEY_ACME", CALLER_KEY)
    clock, state = Clock(), PlannerState()
    long_gap_history(state, "tenant:acme/warranty")
    with ServerThread(mock_app(MockContext(clock=clock))) as mock:
        settings = settings_for(mock.url, tmp_path)
        policy = Policy.from_dict({
            "routes": [{"name": "gemini", "models": ["gemini-*"], "targets": [{"upstream": "gemini"}]}],
            "keys": [{"name": "acme", "key_env": "KEY_ACME", "tenant": "acme", "budget": {"usd": 100, "period": "day"},
                      "rate_limit": {"requests_per_minute": RPM}}],
            "timezone": midday_zone(),
        }, builtin_upstreams(settings))
        app = create_app(settings, policy=policy, planner_state=state)
        with ServerThread(app) as gw:
            proxy = app.state.proxy
            proxy.caches.clock, proxy.caches.tick_s = clock, 1e9     # the test extends the cache itself
            minute = time.time()
            proxy.limits.clock = lambda: minute     # one minute of the key's rate for the whole test
            yield gw, settings, clock, proxy, minute


def test_the_planners_extension_of_a_keys_cache_is_no_request_of_the_keys(stack):
    gw, settings, clock, proxy, minute = stack
    ask(gw, "Is my toaster covered?")
    ask(gw, "And my kettle?")       # the key's two requests of its minute
    (entry,) = proxy.caches.entries.values()
    clock.offset += 3500
    on_gateway(proxy.caches, proxy.caches._extend(entry, clock(), "the test's"))
    wait_until(lambda: kinds(settings, "cache_extend"), 10, "the extension's record")
    (row,) = kinds(settings, "cache_extend")
    assert Decimal(row["cost_usd"]) > 0 and row["key"] == "acme"
    key = proxy.policy.keys[0]
    assert proxy.limits.store._values[f"rpm:acme:{window('minute', minute).id}"][0] == RPM     # its own two
    counter, _, _ = spend_counter(key, minute)
    wait_until(lambda: counter not in proxy.limits.reserved, 5, "the extension's hold settled")
    assert proxy.limits.store._values[counter][0] > 0       # billed to the key's budget
