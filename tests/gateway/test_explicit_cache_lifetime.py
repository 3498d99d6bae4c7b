"""Explicit caches over time, through the gateway to mock-providers with the real google-genai SDK and one clock
(the gateway's and the mock's) that the test moves: a cache whose session keeps coming back is extended before
it expires (PATCH ttl, which the mock honours), one left idle is deleted (DELETE), and each is a ledger record
priced per token-hour at the model's published storage price."""

from __future__ import annotations

import asyncio
import time
from decimal import Decimal

import pytest
from google import genai
from google.genai import types

from prefixgate.cache_planner import PlannerState
from prefixgate.gateway.app import create_app
from prefixgate.ledger import read_records
from prefixgate.policies import Policy, builtin_upstreams
from prefixgate.policies.limits import spend_counter
from prefixgate.providers.cached_contents import rfc3339
from prefixgate.simulation.mock.server import MockContext, tenant_of
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import settings_for
from tests.gateway.test_gateway_explicit_cache import SYSTEM, long_gap_history
from tests.support_calendar import midday_zone
from tests.support_services import ServerThread, wait_until

MODEL = "gemini-3.5-flash"
GATEWAY_KEY = "AIzaGatewayKey000000000000000"
# Gemini Flash-tier explicit cache storage: $1.00 per million tokens per hour (ai.google.dev pricing, G2).
STORAGE_PER_MTOK_HOUR = Decimal("1.00")


class Clock:
    """The wall clock plus an offset the test moves (the gateway and the mock read the same one)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


CALLER_KEY = "pg-acme-caller-key-4e7b1c9d2a"


@pytest.fixture
def stack(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", GATEWAY_KEY)
    monkeypatch.setenv("KEY_ACME", CALLER_KEY)
    clock = Clock()
    context = MockContext(clock=clock)
    state = PlannerState()
    long_gap_history(state, "tenant:acme/warranty")
    with ServerThread(mock_app(context)) as mock:
        settings = settings_for(mock.url, tmp_path)
        policy = Policy.from_dict({
            "routes": [{"name": "gemini", "models": ["gemini-*"], "targets": [{"upstream": "gemini"}]}],
            "keys": [{"name": "acme", "key_env": "KEY_ACME", "tenant": "acme", "budget": {"usd": 100, "period": "day"}}],
            "timezone": midday_zone(),      # the day's counter spent below is the one the gateway reads after
        }, builtin_upstreams(settings))
        app = create_app(settings, policy=policy, planner_state=state)
        with ServerThread(app) as gw:
            caches = app.state.proxy.caches
            caches.clock, caches.tick_s = clock, 1e9     # the test runs each tick itself
            yield gw, settings, clock, context, caches


def ask(gw, question: str) -> types.GenerateContentResponse:
    client = genai.Client(api_key=CALLER_KEY, http_options=types.HttpOptions(
        base_url=gw.url, api_version="v1beta", headers={"x-prefixgate-route": "warranty"}))
    return client.models.generate_content(model=MODEL, contents=question,
                                          config=types.GenerateContentConfig(system_instruction=SYSTEM))


def on_gateway(caches, work) -> None:
    """Run `work` (a coroutine) on the gateway's own event loop."""
    asyncio.run_coroutine_threadsafe(work, caches._task.get_loop()).result(20)


def tick(caches) -> None:
    """One pass of the gateway's watch over its caches."""
    on_gateway(caches, caches.tick())


def kinds(settings, kind: str) -> list[dict]:
    return [r for r in read_records(settings.ledger_path) if r["kind"] == kind]


def test_a_cache_its_session_keeps_using_is_extended_before_it_expires(stack):
    gw, settings, clock, context, caches = stack
    first = ask(gw, "Is my toaster covered?")
    (name,) = caches.entries
    tokens = first.usage_metadata.cached_content_token_count
    created = context.simulator.get_cached_content(name, now=clock(), tenant=tenant_of(GATEWAY_KEY)).expire_time
    for _ in range(5):                      # back every ten minutes
        clock.offset += 600
        assert ask(gw, "And my kettle?").usage_metadata.cached_content_token_count == tokens
        tick(caches)
    assert not kinds(settings, "cache_delete")      # in use: kept
    clock.offset += 500                     # 100 s before its hour is up, idle 500 s: extended
    tick(caches)
    extended = context.simulator.get_cached_content(name, now=clock(), tenant=tenant_of(GATEWAY_KEY)).expire_time
    assert extended == pytest.approx(clock() + 3600, abs=1)
    (row,) = kinds(settings, "cache_extend")
    added_hours = Decimal(str(extended - created)) / 3600
    assert Decimal(row["cost_usd"]) == pytest.approx(tokens * added_hours * STORAGE_PER_MTOK_HOUR / 1_000_000, rel=Decimal("1e-6"))
    clock.offset += 400                     # past the first hour: the request still reads the cache
    assert ask(gw, "And my blender?").usage_metadata.cached_content_token_count == tokens


def test_a_cache_left_idle_is_deleted_and_its_unused_storage_credited(stack):
    gw, settings, clock, context, caches = stack
    first = ask(gw, "Is my toaster covered?")
    (name,) = caches.entries
    tokens = first.usage_metadata.cached_content_token_count
    clock.offset += 60
    ask(gw, "And my kettle?")
    tick(caches)
    assert caches.entries                   # a minute idle: not unused yet
    clock.offset += 1740                    # idle 29 minutes, 30 left of the hour it was created for
    tick(caches)
    assert not caches.entries
    with pytest.raises(Exception, match="not found"):
        context.simulator.get_cached_content(name, now=clock(), tenant=tenant_of(GATEWAY_KEY))
    wait_until(lambda: kinds(settings, "cache_delete"), 5, "the deletion's record")
    (row,) = kinds(settings, "cache_delete")
    (gone,) = context.simulator.cached_contents.by_tenant()[tenant_of(GATEWAY_KEY)]
    left_hours = Decimal(str(gone.expire_time - gone.deleted_at)) / 3600      # about half an hour, by the mock
    assert Decimal(row["cost_usd"]) == pytest.approx(-tokens * left_hours * STORAGE_PER_MTOK_HOUR / 1_000_000,
                                                     rel=Decimal("1e-4"))
    # The planner no longer sends requests against it: the next one is answered (a new cache or none).
    assert ask(gw, "And my blender?").text


def test_a_key_past_its_budget_pays_no_extension(stack):
    gw, settings, clock, context, caches = stack
    ask(gw, "Is my toaster covered?")
    (name,) = caches.entries
    created = context.simulator.get_cached_content(name, now=clock(), tenant=tenant_of(GATEWAY_KEY)).expire_time
    for _ in range(5):
        clock.offset += 600
        ask(gw, "And my kettle?")
    proxy = caches.proxy
    key = next(k for k in proxy.policy.keys if k.name == "acme")
    counter, ttl, _ = spend_counter(key, time.time())
    on_gateway(caches, proxy.limits.store.add(counter, 10**12, ttl))     # its $100 for the day spent
    clock.offset += 500
    tick(caches)
    assert not kinds(settings, "cache_extend") and not caches.entries
    assert context.simulator.get_cached_content(name, now=clock(), tenant=tenant_of(GATEWAY_KEY)).expire_time == created


def test_an_extension_that_adds_no_time_holds_nothing_of_the_key_budget(stack):
    gw, settings, clock, context, caches = stack
    ask(gw, "Is my toaster covered?")
    (entry,) = caches.entries.values()
    for _ in range(5):
        clock.offset += 600
        ask(gw, "And my kettle?")

    async def same_expiry(entry, method, body):     # the provider answers the PATCH with the expiry it had
        return {"expireTime": rfc3339(entry.expires)}

    caches._call = same_expiry
    clock.offset += 500
    tick(caches)
    (row,) = kinds(settings, "cache_extend")
    assert Decimal(row["cost_usd"]) == 0
    # Its reservation is given back, not kept in `reserved` for good (one more per extension and window).
    assert caches.proxy.limits.reserved == {}


def test_a_cache_being_deleted_is_withdrawn_from_the_planner_before_the_delete_goes_out():
    """The DELETE is a round trip: a request planned while it is out must not be sent against the cache being
    deleted (it would name a cache that is gone by the time it lands). A DELETE that fails gives the cache back."""
    from types import SimpleNamespace

    from prefixgate.gateway.explicit_caches import Entry, ExplicitCaches
    from prefixgate.gateway.upstream import UpstreamFailure
    from prefixgate.providers.rules import load_catalog

    state = PlannerState()
    state.route("tenant:acme/warranty").remember_explicit("p1", "cachedContents/c1", time.time() + 1800)
    seen_while_deleting = []

    class Upstream:
        fail = False

        async def forward(self, *args: object) -> SimpleNamespace:
            # What a request planned now would find for the prefix.
            seen_while_deleting.append(state.route("tenant:acme/warranty").explicit.get("p1"))
            if self.fail:
                raise UpstreamFailure("gemini", 503, "unavailable")
            return SimpleNamespace(body=b"{}")

    proxy = SimpleNamespace(catalog=load_catalog(None), settings=SimpleNamespace(redis_url=""), planner_state=state,
                            upstream=Upstream(), ledger=SimpleNamespace(append=lambda rec: None),
                            metrics=SimpleNamespace(observe=lambda rec: None), limits=SimpleNamespace(release=lambda held: None))
    caches = ExplicitCaches(proxy)  # type: ignore[arg-type]
    upstream = SimpleNamespace(name="gemini", provider="", kind="gemini")
    entry = Entry("cachedContents/c1", upstream, SimpleNamespace(explicit_cache_path="cachedContents", name="gemini"),  # type: ignore[arg-type]
                  MODEL, None, None, "gemini", "tenant:acme/warranty", "p1", 10_000, None, time.time() + 1800, time.time())
    caches.entries[entry.name] = entry
    proxy.upstream.fail = True
    asyncio.run(caches._delete(entry, time.time(), "idle"))
    assert state.route("tenant:acme/warranty").explicit["p1"][0] == "cachedContents/c1"     # given back
    caches.entries[entry.name] = entry
    proxy.upstream.fail = False
    asyncio.run(caches._delete(entry, time.time(), "idle"))
    assert seen_while_deleting == [None, None] and "p1" not in state.route("tenant:acme/warranty").explicit
    assert not caches.entries
