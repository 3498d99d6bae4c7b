"""A caller's create (or extension) in doubt whose search fails in a way no one foresaw (Google's list answering
`{"cachedContents": 5}`: not a list) is booked at its worst case on an "in doubt" row, its hold settled at that
cost. It used to kill the search task: no row, and the hold renewed until the gateway stopped."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest
from google.genai import errors, types
from starlette.responses import JSONResponse

from prefixgate.gateway import cache_scope
from prefixgate.ledger import read_records
from prefixgate.policies.limits import nanodollars, spend_counter
from prefixgate.simulation.mock.faults import FaultPlan
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.test_cache_answer_unbookable import rewritten
from tests.gateway.test_cache_create_in_doubt import (
    ACME,
    CONTRACT,
    GATEWAY_KEY,
    MODEL,
    RIVAL,
    booked,
    client,
    create,
    replica,
    spent,
    stack,
)
from tests.gateway.test_cache_extend_in_doubt import SLOW_PATCH
from tests.support_services import ServerThread, wait_until


def list_answers_garbage(app):
    """mock-providers, but its cachedContents list answers an object whose `cachedContents` is a number."""
    async def wrapped(scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "GET" and scope["path"] == "/v1beta/cachedContents":
            return await JSONResponse({"cachedContents": 5})(scope, receive, send)
        return await app(scope, receive, send)
    return wrapped


def list_answers_usage(app, usage: object):
    """mock-providers, but its cachedContents list shows each cache's `usageMetadata` as `usage`."""
    return rewritten(app, "GET", "/v1beta/cachedContents", lambda listed: [
        cache.update(usageMetadata=usage) for cache in listed.get("cachedContents") or []])


@pytest.mark.parametrize("usage", ["4.2k tokens", {"totalTokenCount": "4.2k"}])
def test_a_cache_found_whose_answer_cannot_be_booked_is_booked_in_doubt_once(monkeypatch, tmp_path, usage):
    # The create times out and Google makes the cache; the search finds it, but the list shows its usageMetadata in a
    # shape no one foresaw. Its booking raised: no row, the hold renewed until the gateway stopped, the budget never
    # charged. Now it is booked at the worst case the create held, on one row that says it is in doubt.
    monkeypatch.setenv("GEMINI_API_KEY", GATEWAY_KEY)
    monkeypatch.setenv("KEY_ACME", ACME)
    monkeypatch.setenv("KEY_RIVAL", RIVAL)
    slow = [{"fault": "latency=1.5", "provider": "gemini", "path": "/v1beta/cachedContents", "times": 1}]
    faults = FaultPlan.from_config({"faults": slow})
    with ServerThread(list_answers_usage(mock_app(MockContext(faults=faults)), usage)) as mock:
        app, ledger = replica(mock.url, tmp_path)
        with ServerThread(app) as gw:
            proxy = app.state.proxy
            proxy.caches.tick_s = 0.4
            counter, _, _ = spend_counter(proxy.policy.keys[0], time.time())
            create(gw.url)
            held = proxy.limits.reserved[counter]
            row = booked(ledger)
            charged = spent(proxy)
            wait_until(lambda: not proxy.caches._finding, 15, "the search's end")
    [only] = read_records(ledger)
    assert only == row and "in doubt" in " ".join(row["explanation"]) and "could not be booked" in " ".join(row["explanation"])
    assert charged == nanodollars(Decimal(row["cost_usd"])) == held > 0


def test_a_create_whose_search_fails_unforeseen_is_booked_in_doubt(monkeypatch, tmp_path):
    monkeypatch.setenv("GEMINI_API_KEY", GATEWAY_KEY)
    monkeypatch.setenv("KEY_ACME", ACME)
    monkeypatch.setenv("KEY_RIVAL", RIVAL)
    slow = [{"fault": "latency=1.5", "provider": "gemini", "path": "/v1beta/cachedContents", "times": 1}]
    with ServerThread(list_answers_garbage(mock_app(MockContext(faults=FaultPlan.from_config({"faults": slow}))))) as mock:
        app, ledger = replica(mock.url, tmp_path)
        with ServerThread(app) as gw:
            app.state.proxy.caches.tick_s = 0.4
            create(gw.url)
            row = booked(ledger)
            charged = spent(app.state.proxy)
    [only] = read_records(ledger)
    assert only == row and "in doubt" in " ".join(row["explanation"])
    assert charged == nanodollars(Decimal(row["cost_usd"])) > 0


def test_an_extension_whose_reading_again_fails_unforeseen_is_booked_in_doubt(monkeypatch, tmp_path):
    async def broken(upstream, forward):
        raise KeyError("expireTime")

    monkeypatch.setattr(cache_scope, "LOOKUP_S", 0.5)
    monkeypatch.setattr(cache_scope, "_read_again", broken)
    with stack(monkeypatch, tmp_path, SLOW_PATCH) as (url, proxy, upstream, ledger):
        acme = client(url, ACME)
        made = acme.caches.create(model=MODEL, config=types.CreateCachedContentConfig(contents=[CONTRACT], ttl="3600s"))
        wait_until(lambda: len(read_records(ledger)) == 1, 15, "the create's record")
        with pytest.raises(errors.APIError):
            acme.caches.update(name=made.name, config=types.UpdateCachedContentConfig(ttl="7200s"))
        wait_until(lambda: len(read_records(ledger)) == 2, 15, "the extension's record")
        charged = spent(proxy)
    created, patch = sorted(read_records(ledger), key=lambda r: r["ts"])
    assert "in doubt" in " ".join(patch["explanation"]) and Decimal(patch["cost_usd"]) > 0
    assert charged == nanodollars(Decimal(created["cost_usd"])) + nanodollars(Decimal(patch["cost_usd"]))
