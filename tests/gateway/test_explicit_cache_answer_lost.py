"""An extension (PATCH ttl) or a deletion of an explicit cache whose answer never arrived (a timeout after Google
made the call): Google bills the hours an extension added, and a deleted cache is gone. The gateway used to take
either for a failure: the extension went unbilled in the ledger and its cache unwatched, and a deleted cache was
handed back to the planner, which then sent requests against a cache Google no longer had (a 403 there).
Through the gateway to mock-providers with google-genai and the clock the test moves (test_explicit_cache_lifetime)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from prefixgate.gateway.upstream import UpstreamFailure
from prefixgate.simulation.mock.server import tenant_of
from tests.gateway.test_explicit_cache_lifetime import (
    GATEWAY_KEY,
    STORAGE_PER_MTOK_HOUR,
    ask,
    kinds,
    stack,  # noqa: F401  (a fixture)
    tick,
)


def _answer_lost(caches, method: str) -> None:
    """Google makes each `method` call, but its answer never reaches the gateway."""
    upstream = caches.proxy.upstream
    forward = upstream.forward

    async def lost(target, wire, verb, *args, **kwargs):
        resp = await forward(target, wire, verb, *args, **kwargs)
        if verb == method:
            raise UpstreamFailure(target.name, None, "timed out reading the response", timed_out=True, answered=True)
        return resp

    upstream.forward = lost


def test_an_extension_whose_answer_was_lost_is_billed_and_its_cache_still_watched(stack):  # noqa: F811
    gw, settings, clock, context, caches = stack
    tokens = ask(gw, "Is my toaster covered?").usage_metadata.cached_content_token_count
    (name,) = caches.entries
    created = context.simulator.get_cached_content(name, now=clock(), tenant=tenant_of(GATEWAY_KEY)).expire_time
    for _ in range(5):                      # back every ten minutes
        clock.offset += 600
        ask(gw, "And my kettle?")
        tick(caches)
    _answer_lost(caches, "PATCH")
    clock.offset += 500                     # 100 s before its hour is up: extended
    tick(caches)
    extended = context.simulator.get_cached_content(name, now=clock(), tenant=tenant_of(GATEWAY_KEY)).expire_time
    assert extended == pytest.approx(clock() + 3600, abs=1)        # Google extended it
    (row,) = kinds(settings, "cache_extend")
    added_hours = Decimal(str(extended - created)) / 3600
    assert Decimal(row["cost_usd"]) == pytest.approx(tokens * added_hours * STORAGE_PER_MTOK_HOUR / 1_000_000,
                                                     rel=Decimal("1e-6"))
    assert caches.entries[name].expires == pytest.approx(extended, abs=1)


def test_a_deletion_whose_answer_was_lost_is_credited_and_never_planned_again(stack):  # noqa: F811
    gw, settings, clock, context, caches = stack
    ask(gw, "Is my toaster covered?")
    (name,) = caches.entries
    clock.offset += 60
    ask(gw, "And my kettle?")
    tick(caches)
    _answer_lost(caches, "DELETE")
    clock.offset += 1740                    # idle 29 minutes, 30 left of its hour: deleted
    tick(caches)
    (gone,) = context.simulator.cached_contents.by_tenant()[tenant_of(GATEWAY_KEY)]
    assert gone.deleted_at is not None      # Google deleted it
    (row,) = kinds(settings, "cache_delete")
    assert Decimal(row["cost_usd"]) < 0     # the unused half hour credited
    planned = caches.proxy.planner_state.route("tenant:acme/warranty").explicit
    assert all(held[0] != name for held in planned.values())       # no request is planned against it
    assert ask(gw, "And my blender?").text
