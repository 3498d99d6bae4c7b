"""A caller's create (or extension) that Google answered 200, but whose answer cannot be booked: its `usageMetadata`
in a shape no one foresaw. Google made the cache (or extended it) and bills it, so the caller gets Google's answer
and the cache, and the call is booked once, at the worst case it held, on a row that says why. It used to raise in
its booking: the caller got a 500 for a cache that exists, its hold was released and nothing was booked. Driven with
google-genai against mock-providers."""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal

import httpx
import pytest
from starlette.responses import JSONResponse

from prefixgate.ledger import read_records
from prefixgate.policies.limits import nanodollars
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.test_cache_create_in_doubt import (
    ACME,
    CONTRACT,
    GATEWAY_KEY,
    MODEL,
    RIVAL,
    client,
    replica,
    spent,
)
from tests.support_services import ServerThread, wait_until

ACME_HEADERS = {"x-goog-api-key": ACME}


def rewritten(app, method: str, path: str, change: Callable[[dict], object]):
    """mock-providers, but its answer to a `method` on a path starting with `path` as `change` leaves it."""
    async def wrapped(scope, receive, send):
        if not (scope["type"] == "http" and scope["method"] == method and scope["path"].startswith(path)):
            return await app(scope, receive, send)
        sent: list[dict] = []

        async def keep(message):
            sent.append(message)
        await app(scope, receive, keep)
        answer = json.loads(b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body"))
        change(answer)
        status = next(m["status"] for m in sent if m["type"] == "http.response.start")
        return await JSONResponse(answer, status)(scope, receive, send)
    return wrapped


@pytest.mark.parametrize("method", ["POST", "PATCH"])
@pytest.mark.parametrize("usage", ["4.2k tokens", {"totalTokenCount": "4.2k"}])
def test_an_answered_call_whose_usage_cannot_be_read_is_answered_and_booked_at_what_it_held(monkeypatch, tmp_path,
                                                                                               method, usage):
    monkeypatch.setenv("GEMINI_API_KEY", GATEWAY_KEY)
    monkeypatch.setenv("KEY_ACME", ACME)
    monkeypatch.setenv("KEY_RIVAL", RIVAL)
    with ServerThread(rewritten(mock_app(MockContext()), method, "/v1beta/cachedContents", lambda answer: answer.update(usageMetadata=usage))) as mock:
        app, ledger = replica(mock.url, tmp_path, timeout_s=10)
        with ServerThread(app) as gw:
            proxy = app.state.proxy
            held = []
            spend = proxy.limits.settle

            async def settle(key, reservation, tokens, cost_usd):     # what each call held, as it is settled
                held.append(reservation.nano)
                return await spend(key, reservation, tokens, cost_usd)
            monkeypatch.setattr(proxy.limits, "settle", settle)
            created = httpx.post(f"{gw.url}/v1beta/cachedContents", headers=ACME_HEADERS, timeout=30, json={
                "model": f"models/{MODEL}", "ttl": "3600s", "contents": [{"role": "user", "parts": [{"text": CONTRACT}]}]})
            assert created.status_code == 200, created.text     # the SDK refuses this answer itself: httpx reads it
            name = created.json()["name"]
            if method == "PATCH":
                wait_until(lambda: len(read_records(ledger)) == 1, 15, "the create's record")
                patched = httpx.patch(f"{gw.url}/v1beta/{name}", params={"updateMask": "ttl"}, headers=ACME_HEADERS,
                                      json={"ttl": "7200s"}, timeout=30)
                assert patched.status_code == 200, patched.text
            wait_until(lambda: len(read_records(ledger)) == (2 if method == "PATCH" else 1), 15, "the call's record")
            charged = spent(proxy)
            assert httpx.get(f"{gw.url}/v1beta/{name}", headers=ACME_HEADERS, timeout=30).status_code == 200  # acme's
            rival = client(gw.url, RIVAL)
            assert name not in [c.name for c in rival.caches.list()]
    row = max(read_records(ledger), key=lambda r: r["ts"])
    assert "could not be booked" in " ".join(row["explanation"]), row["explanation"]
    assert nanodollars(Decimal(row["cost_usd"])) == held[-1] > 0
    assert charged == sum(nanodollars(Decimal(r["cost_usd"])) for r in read_records(ledger))


def test_an_extension_of_a_cache_whose_tokens_cannot_be_read_at_all_is_answered_and_booked(monkeypatch, tmp_path):
    # Google shows the cache's usageMetadata unreadably in its GET too: the extension held nothing (its tokens unknown),
    # and its answer cannot be booked either. The caller still gets Google's answer, and the row says why it is empty.
    monkeypatch.setenv("GEMINI_API_KEY", GATEWAY_KEY)
    monkeypatch.setenv("KEY_ACME", ACME)
    monkeypatch.setenv("KEY_RIVAL", RIVAL)

    def unreadable(answer: dict) -> None:
        answer.update(usageMetadata="4.2k tokens")
    mock = rewritten(rewritten(mock_app(MockContext()), "PATCH", "/v1beta/cachedContents/", unreadable),
                     "GET", "/v1beta/cachedContents/", unreadable)
    with ServerThread(mock) as upstream:
        app, ledger = replica(upstream.url, tmp_path, timeout_s=10)
        with ServerThread(app) as gw:
            created = httpx.post(f"{gw.url}/v1beta/cachedContents", headers=ACME_HEADERS, timeout=30, json={
                "model": f"models/{MODEL}", "ttl": "3600s", "contents": [{"role": "user", "parts": [{"text": CONTRACT}]}]})
            name = created.json()["name"]
            wait_until(lambda: len(read_records(ledger)) == 1, 15, "the create's record")
            patched = httpx.patch(f"{gw.url}/v1beta/{name}", params={"updateMask": "ttl"}, headers=ACME_HEADERS,
                                  json={"ttl": "7200s"}, timeout=30)
            assert patched.status_code == 200, patched.text
            wait_until(lambda: len(read_records(ledger)) == 2, 15, "the extension's record")
    row = max(read_records(ledger), key=lambda r: r["ts"])
    assert "could not be booked" in " ".join(row["explanation"]), row["explanation"]
