"""Gemini: implicit caching, cachedContents lifetimes and storage, and the cached-content 400."""

from __future__ import annotations

from decimal import Decimal

import pytest

from prefixgate.errors import RequestError
from prefixgate.providers.cached_contents import parse_rfc3339
from prefixgate.providers.pricing import storage_cost
from prefixgate.simulation.simulator import Simulator
from prefixgate.tokens import count_tokens
from prefixgate.usage import Usage
from tests.core.providers.support_prompts import text_of

MODEL = "gemini-3.5-flash"


def contents(*texts: str) -> list[dict]:
    return [{"role": "user", "parts": [{"text": t} for t in texts]}]


def test_implicit_cache_reads_the_longest_part_prefix_above_the_minimum():
    sim = Simulator()
    doc = text_of(5000)
    assert sim.respond("gemini", {"contents": contents(doc, " first")}, now=0, model=MODEL).usage == Usage(5001)
    second = sim.respond("gemini", {"contents": contents(doc, " second")}, now=10, model=MODEL).usage
    assert second == Usage(uncached_input=1, cache_read=5000)
    # 3.5 Flash caches from 4,096 tokens (https://ai.google.dev/gemini-api/docs/caching): not 3,000, which
    # gemini-2.5-flash (2,048) would have cached.
    short = text_of(3000)
    for t in (100, 101):
        assert sim.respond("gemini", {"contents": contents(short)}, now=t, model=MODEL).usage.cache_read == 0


def test_explicit_cache_reads_its_tokens_and_bills_storage_until_deleted():
    sim = Simulator()
    body = {"model": "models/gemini-3.5-flash", "contents": contents(text_of(10_000)), "ttl": "7200s"}
    cache = sim.create_cached_content(body, now=1_000)
    assert cache.tokens == 10_000 and cache.expire_time == 1_000 + 7200
    usage = sim.respond("gemini", {"contents": contents(" question"), "cachedContent": cache.name}, now=1_100,
                        model=MODEL).usage
    assert usage == Usage(uncached_input=1, cache_read=10_000)
    sim.delete_cached_content(cache.name, now=1_000 + 3600)
    # Golden: 10,000 tokens for exactly one hour at $1.00 per MTok-hour = $0.01.
    assert cache.token_hours() == Decimal(10_000)
    assert storage_cost("gemini", MODEL, cache.token_hours()).total == Decimal("0.01")
    with pytest.raises(RequestError) as e:
        sim.respond("gemini", {"contents": contents("q"), "cachedContent": cache.name}, now=5_000, model=MODEL)
    assert e.value.status == 403


def test_a_cache_left_alone_bills_storage_until_it_expires_and_ttl_updates_move_expiry():
    sim = Simulator()
    cache = sim.create_cached_content({"model": "gemini-3.1-pro-preview", "contents": contents(text_of(5000))}, now=0)
    assert cache.expire_time == 3600                      # default TTL: one hour
    sim.update_cached_content(cache.name, {"ttl": "7200s"}, now=1800)
    assert cache.expire_time == 1800 + 7200
    assert cache.token_hours() == Decimal(5000) * Decimal(9000) / Decimal(3600)
    # 3.1 Pro Preview storage is $4.50 per MTok-hour (providers.toml's source, docs.apiyi.com):
    # 12,500 token-hours -> $0.05625.
    assert storage_cost("gemini", "gemini-3.1-pro-preview", cache.token_hours()).total == Decimal("0.05625")
    with pytest.raises(RequestError, match="only ttl or expireTime"):
        sim.update_cached_content(cache.name, {"contents": []}, now=1900)
    sim.update_cached_content(cache.name, {"expireTime": "1970-01-01T05:00:00.000000001Z"}, now=1900)
    assert cache.expire_time == parse_rfc3339("1970-01-01T05:00:00Z", "t")


def test_cached_content_with_system_instruction_tools_or_tool_config_is_a_400():
    sim = Simulator()
    cache = sim.create_cached_content({"model": MODEL, "contents": contents(text_of(5000))}, now=0)
    for extra in ({"systemInstruction": {"parts": [{"text": "x"}]}}, {"tools": [{"functionDeclarations": []}]},
                  {"toolConfig": {"functionCallingConfig": {"mode": "AUTO"}}}):
        with pytest.raises(RequestError) as e:
            sim.respond("gemini", {"contents": contents("q"), "cachedContent": cache.name, **extra}, now=1, model=MODEL)
        assert e.value.status == 400
        assert e.value.message == ("Tool config, tools and system instruction should not be set in the request "
                                   "when using cached content.")


def test_cached_content_is_model_and_tenant_scoped():
    sim = Simulator()
    cache = sim.create_cached_content({"model": MODEL, "contents": contents(text_of(5000))}, now=0, tenant="a")
    with pytest.raises(RequestError, match="has to be the same"):
        sim.respond("gemini", {"contents": contents("q"), "cachedContent": cache.name}, now=1, model="gemini-3.8-flash",
                    tenant="a")
    with pytest.raises(RequestError) as e:
        sim.respond("gemini", {"contents": contents("q"), "cachedContent": cache.name}, now=1, model=MODEL, tenant="b")
    assert e.value.status == 403
    assert [c.name for c in sim.list_cached_contents(now=1, tenant="a")] == [cache.name]
    assert sim.list_cached_contents(now=1, tenant="b") == []


@pytest.mark.parametrize(("body", "message"), [
    ({"model": MODEL, "contents": contents("tiny")}, "Cached content is too small"),
    ({"model": MODEL, "contents": contents(text_of(5000)), "ttl": "1h"}, "expected a duration"),
    ({"model": MODEL, "contents": contents(text_of(5000)), "ttl": "60s", "expireTime": "2030-01-01T00:00:00Z"},
     "either ttl or expireTime"),
    ({"contents": contents(text_of(5000))}, "model: field required"),
    ({"model": "gemini-0", "contents": contents(text_of(5000))}, "not a known gemini model"),
])
def test_cached_content_create_errors(body: dict, message: str):
    with pytest.raises(RequestError, match=message):
        Simulator().create_cached_content(body, now=0)


def test_count_tokens_includes_the_cached_content():
    sim = Simulator()
    cache = sim.create_cached_content({"model": MODEL, "contents": contents(text_of(5000))}, now=0)
    body = {"contents": contents(" question"), "cachedContent": cache.name}
    assert sim.count_tokens("gemini", body, model=MODEL, now=1) == 5001


def test_implicit_cache_matches_the_shared_token_prefix_inside_one_part():
    # Gemini's implicit cache matches tokens, not parts: two prompts whose one part shares a long leading text
    # read that text, up to where their tokens part.
    sim = Simulator()
    lead = "Read the policy below before you answer. " + " ".join(f"Rule {i} applies to every order." for i in range(600))
    first = sim.respond("gemini", {"contents": contents(lead + "\n\nWhich rule covers refunds?")}, now=0, model=MODEL)
    assert first.usage.cache_read == 0
    second = sim.respond("gemini", {"contents": contents(lead + "\n\nWho approves exceptions?")}, now=10, model=MODEL)
    assert count_tokens(lead) - 2 <= second.usage.cache_read <= count_tokens(lead) + 2
    assert second.usage.input_total == count_tokens(lead + "\n\nWho approves exceptions?")
    # Below the model's minimum nothing is read, and the cache is per model.
    short = "Short shared lead. " * 20
    for t, q in ((20, "a?"), (21, "b?")):
        assert sim.respond("gemini", {"contents": contents(short + q)}, now=t, model=MODEL).usage.cache_read == 0
    assert sim.respond("gemini", {"contents": contents(lead + " x")}, now=30, model="gemini-3.8-flash").usage.cache_read == 0
    # After the implicit TTL (300 s) without use the prompt is gone.
    assert sim.respond("gemini", {"contents": contents(lead + " y")}, now=10 + 301, model=MODEL).usage.cache_read == 0
