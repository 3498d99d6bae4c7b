"""Explicit caches shared by replicas through Redis: the cache one replica created is published on its own key
the moment it is adopted, and another replica about to create one for the same route and prefix uses it."""

from __future__ import annotations

import time

from prefixgate.cache_planner import PlannerState, RedisStore, Target
from tests.cache_planner.support_planning import POLICY, plan_body
from tests.gateway.test_gateway_explicit_cache import long_gap_history

MODEL = "gemini-3.5-flash"
BODY = {"systemInstruction": {"parts": [{"text": POLICY * 6}]},
        "contents": [{"role": "user", "parts": [{"text": "Where is order 7?"}]}]}


def replicas(redis_url: str) -> tuple[PlannerState, PlannerState]:
    """Two replicas' planner state on one Redis, each with the route's long-gap history."""
    a, b = (PlannerState(store=RedisStore(redis_url, prefix="pgtest:")) for _ in range(2))
    for state in (a, b):
        long_gap_history(state, "r")
    return a, b


def test_a_replica_uses_the_cache_another_replica_created(redis_url):
    a, b = replicas(redis_url)
    now = time.time()
    _, first = plan_body("gemini", BODY, Target("gemini", MODEL), a, now=now, model=MODEL)
    assert first.cache_create is not None
    first.adopt_cached_content("cachedContents/abc", now + 3600)
    out, second = plan_body("gemini", BODY, Target("gemini", MODEL), b, now=now + 5, model=MODEL)
    assert second.cache_create is None and out["cachedContent"] == "cachedContents/abc"
    assert "systemInstruction" not in out
    assert any("created by another replica" in line for line in second.explanation)
    assert b.route("r").explicit[second.prefix_hash] == ("cachedContents/abc", now + 3600)


def test_an_expiring_shared_cache_is_not_reused_and_none_without_redis(redis_url):
    a, b = replicas(redis_url)
    now = time.time()
    _, first = plan_body("gemini", BODY, Target("gemini", MODEL), a, now=now, model=MODEL)
    first.adopt_cached_content("cachedContents/old", now + 30)      # lapses within the minute
    _, second = plan_body("gemini", BODY, Target("gemini", MODEL), b, now=now, model=MODEL)
    assert second.cache_create is not None
    alone = PlannerState()
    long_gap_history(alone, "r")
    assert alone.shared_explicit("r", first.prefix_hash) is None
