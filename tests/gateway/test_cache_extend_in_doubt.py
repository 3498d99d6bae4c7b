"""A caller's extension of its explicit cache (`cachedContents.patch`, a new `ttl`) whose answer never came: Google
may have extended it all the same, and bills the storage it bought. It used to be released with nothing booked (the
caller got a 504, the budget never saw the hours Google went on billing). The gateway now reads the cache again and
books what it shows. Driven with google-genai against mock-providers."""

from __future__ import annotations

from decimal import Decimal

import pytest
from google.genai import errors, types

from prefixgate.gateway import cache_scope
from prefixgate.ledger import read_records
from prefixgate.policies.limits import nanodollars
from tests.gateway import test_cache_create_in_doubt as created_in_doubt
from tests.support_services import wait_until

ACME, CONTRACT, MODEL = created_in_doubt.ACME, created_in_doubt.CONTRACT, created_in_doubt.MODEL
STORAGE_PER_HOUR, client, spent, stack = (created_in_doubt.STORAGE_PER_HOUR, created_in_doubt.client,
                                          created_in_doubt.spent, created_in_doubt.stack)

# The PATCH (the one call under a cache's name the mock's faults reach): Google takes 1.5 s to answer it, where the
# gateway waits 0.5 s.
SLOW_PATCH = [{"fault": "latency=1.5", "provider": "gemini", "path": "/v1beta/cachedContents/", "times": 1}]


def test_an_extension_whose_answer_never_came_is_read_again_and_booked(monkeypatch, tmp_path):
    monkeypatch.setattr(cache_scope, "LOOKUP_S", 0.5)
    with stack(monkeypatch, tmp_path, SLOW_PATCH) as (url, proxy, upstream, ledger):
        acme = client(url, ACME)
        made = acme.caches.create(model=MODEL, config=types.CreateCachedContentConfig(contents=[CONTRACT], ttl="3600s"))
        wait_until(lambda: len(read_records(ledger)) == 1, 15, "the create's record")
        with pytest.raises(errors.APIError) as lost:
            acme.caches.update(name=made.name, config=types.UpdateCachedContentConfig(ttl="7200s"))
        assert lost.value.code == 504
        wait_until(lambda: len(read_records(ledger)) == 2, 15, "the extension's record")
        extended = upstream.caches.get(name=made.name)      # as Google holds it: extended after the gateway gave up
        charged = spent(proxy)
    created, patch = sorted(read_records(ledger), key=lambda r: r["ts"])
    # The hours it bought, from the old expiry to the new, at gemini-3.5-flash's $1.00 per MTok-hour.
    hours = Decimal(str(extended.expire_time.timestamp() - made.expire_time.timestamp())) / 3600
    assert hours > 1
    tokens = made.usage_metadata.total_token_count
    assert Decimal(patch["cost_usd"]) == pytest.approx(tokens * STORAGE_PER_HOUR * hours / 10**6, rel=Decimal("1e-6"))
    assert "answer never came" in " ".join(patch["explanation"])
    assert charged == nanodollars(Decimal(created["cost_usd"])) + nanodollars(Decimal(patch["cost_usd"]))
