"""A budgeted key's Vertex context cache whose creation got no answer, and which the gateway's search could not find
(the project lists more caches than a search reads): Vertex made it all the same and bills its writing and an hour of
storage. The key's budget holds that worst case from the creation in doubt until the cache's TTL is over, then books
it. It used to hold nothing, so a key whose creations kept timing out bought storage no budget saw. Driven with
google-genai (vertexai=True) through the gateway, against mock-providers' Vertex surface."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import datetime
from decimal import Decimal

import pytest
from google import genai
from google.genai import errors, types
from google.oauth2.credentials import Credentials

from prefixgate.errors import RequestError
from prefixgate.gateway.state import RedisCounters
from prefixgate.ledger import read_records
from prefixgate.policies.limits import Limits, nanodollars, spend_counter
from prefixgate.policies.schema import Budget, CallerKey
from prefixgate.simulation.mock.faults import FaultRule, parse_fault
from prefixgate.simulation.mock.server import tenant_of
from tests.gateway.support_vertex import GEMINI, LOCATION
from tests.gateway.test_explicit_cache_in_doubt_vertex import CACHES, CALLER, SCOPE, Stack, vertex_stack
from tests.gateway.test_gateway_explicit_cache import SYSTEM
from tests.support_calendar import midday_zone
from tests.support_services import wait_until

pytestmark = pytest.mark.slow
# Gemini 3.5 Flash's published prices, USD per million tokens: input $1.50 (writing a cache bills its tokens at it),
# storage $1.00 per million tokens per hour (https://ai.google.dev/gemini-api/docs/pricing).
INPUT, STORAGE_PER_HOUR = Decimal("1.50"), Decimal("1.00")
MTOK = Decimal(10**6)
# The request costs about $0.009 (5,600 prompt tokens, 64 output), its cache about $0.014 at worst: the budget fits
# the request, and a second one while the first's cache is in doubt only if that cache is not held.
BUDGET = Decimal("0.018")


def ask(gateway: str) -> None:
    client = genai.Client(vertexai=True, project="acme-project", location=LOCATION, credentials=Credentials(CALLER),
                          http_options=types.HttpOptions(base_url=gateway, headers={"x-prefixgate-route": "warranty"}))
    answer = client.models.generate_content(
        model=GEMINI, contents="Is my toaster covered?",
        config=types.GenerateContentConfig(system_instruction=SYSTEM, max_output_tokens=64))
    assert answer.usage_metadata.prompt_token_count > 5000 and not answer.usage_metadata.cached_content_token_count


def seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def unresolved(gw: str, stack: Stack) -> Limits:
    """A request whose cache's creation got no answer and that the search could not find; the gateway's limits. The
    creation takes 1.5 s, the route waits 0.5 s; the project already holds 12 caches and a search reads 2 pages of 5
    (`vertex_stack(..., page_size=5, find_pages=2)`), so the search stops before it reaches the one Vertex made."""
    body = {"model": f"models/{GEMINI}", "systemInstruction": {"parts": [{"text": SYSTEM}]}}
    for _ in range(12):
        stack.ctx.simulator.create_cached_content(body, now=stack.ctx.clock(), tenant=tenant_of(f"vertex:{SCOPE}"))
    ask(gw)
    assert "unresolved" in stack.made()["explanation"][0]
    return settled(stack)


def settled(stack: Stack) -> Limits:
    """The gateway's limits once the request's record is written and its budget settled (after its answer, in the
    background): what they hold is its cache's worst case alone."""
    limits = stack.caches.proxy.limits
    wait_until(lambda: any(not r["kind"] for r in read_records(stack.ledger)) and len(limits._live) == 1, 5,
               "the request settled, its cache's worst case held")
    return limits


def test_an_unresolved_cache_holds_its_worst_case_until_its_ttl_is_over(monkeypatch, tmp_path):
    with vertex_stack(monkeypatch, tmp_path, "1.5", budget=float(BUDGET), page_size=5, find_pages=2) as (gw, stack):
        limits = unresolved(gw, stack)
        wait_until(lambda: len(stack.billed()) == 13, 5, "Vertex finishing the creation")
        [made] = [c for c in stack.billed() if c.get("displayName", "").startswith("prefixgate-")]
        [request] = [r for r in read_records(stack.ledger) if not r["kind"]]
        counter, _, _ = spend_counter(stack.caches.proxy.policy.keys[0], time.time())
        # What Vertex bills for the cache it made: its tokens written, and stored for its TTL.
        ttl_h = Decimal(str(seconds(made["expireTime"]) - seconds(made["createTime"]))) / 3600
        bill = made["tokens"] * (INPUT + STORAGE_PER_HOUR * ttl_h) / MTOK
        held = Decimal(limits.reserved.get(counter, 0)) / 10**9
        assert bill <= held < 2 * bill, (bill, held)
        # The key has budget left after its request, but not after what its cache may cost: the next request is told
        # to wait for what its running work holds.
        assert Decimal(request["cost_usd"]) < BUDGET < Decimal(request["cost_usd"]) + bill
        with pytest.raises(errors.ClientError) as refused:
            ask(gw)
        assert refused.value.code == 429 and "hold" in str(refused.value.message), refused.value
        # Its TTL over, the worst case is booked, on a record of its own, and nothing is held any more.
        stack.caches.clock = lambda: time.time() + 2 * 3600
        wait_until(lambda: len([r for r in read_records(stack.ledger) if r["kind"] == "cache_create"]) == 2, 10,
                   "the worst case's record")
        booked = [r for r in read_records(stack.ledger) if r["kind"] == "cache_create"][1]
        assert nanodollars(booked["cost_usd"]) == nanodollars(held)
        wait_until(lambda: counter not in limits.reserved, 5, "the hold's release")
        spent, _ = limits.store._values[counter]     # one replica's own counters
    assert "outlived its TTL" in booked["explanation"][0]
    assert spent == nanodollars(request["cost_usd"]) + nanodollars(booked["cost_usd"])


def test_an_unresolved_cache_is_booked_at_its_worst_case_when_the_gateway_stops(monkeypatch, tmp_path):
    # A rolling restart within the cache's TTL: the replica's holds go with it, so it books what it held first, or the
    # key would spend that money again.
    with vertex_stack(monkeypatch, tmp_path, "1.5", budget=float(BUDGET), page_size=5, find_pages=2) as (gw, stack):
        limits = unresolved(gw, stack)
        counter, _, _ = spend_counter(stack.caches.proxy.policy.keys[0], time.time())
        held = Decimal(limits.reserved.get(counter, 0)) / 10**9
        assert held > 0
    booked = [r for r in read_records(stack.ledger) if r["kind"] == "cache_create"]
    assert len(booked) == 2 and nanodollars(booked[1]["cost_usd"]) == nanodollars(held), booked
    assert "stopped" in booked[1]["explanation"][0]


def test_a_cache_still_searched_for_when_the_gateway_stops_is_booked_at_its_worst_case(monkeypatch, tmp_path):
    # Vertex answers the creation and each list after 3 s: the gateway stops while its first search waits.
    with vertex_stack(monkeypatch, tmp_path, "3", budget=float(BUDGET), slow_lists=1) as (gw, stack):
        counter, _, _ = spend_counter(stack.caches.proxy.policy.keys[0], time.time())
        ask(gw)
        limits = settled(stack)
        held = Decimal(limits.reserved[counter]) / 10**9
    [booked] = [r for r in read_records(stack.ledger) if r["kind"] == "cache_create"]
    assert nanodollars(booked["cost_usd"]) == nanodollars(held) > 0
    assert "when the gateway stopped" in booked["explanation"][0]


def test_a_hold_for_spending_in_doubt_is_placed_without_room_and_seen_by_every_replica(redis_url):
    # A running request holds the whole $1 budget when a cache in doubt may have cost $0.50: held all the same. The
    # request then costs $0.20, and another replica's request that needs $0.40 finds $0.30 left, not $0.80.
    key = CallerKey(f"team-{uuid.uuid4().hex}", "0" * 64, budget=Budget(usd=1.0, period="day", timezone=midday_zone()))

    async def run() -> tuple[int, str]:
        a, b = Limits(RedisCounters(redis_url)), Limits(RedisCounters(redis_url))
        running = await a.admit(key, Decimal("1.0"))
        doubt = await a.hold(key, Decimal("0.5"))
        await a.settle(key, running, 0, Decimal("0.2"))
        try:
            b.release(await b.admit(key, Decimal("0.4"), least_usd=Decimal("0.4")))
            return doubt.nano, ""
        except RequestError as e:
            return doubt.nano, e.message
        finally:
            await a.aclose()

    nano, refusal = asyncio.run(run())
    assert nano == 500_000_000 and "hold" in refusal, refusal


def test_a_cache_found_while_the_gateway_stops_during_its_delete_is_booked(monkeypatch, tmp_path):
    # The search finds the cache Vertex made; its DELETE (the only call on a cache's own path here) waits 8 s at
    # Vertex, and the gateway stops meanwhile. Nothing says whether Vertex deleted it, so it is booked as living out
    # its TTL; it used to lose its hold with the replica and be booked by nothing.
    with vertex_stack(monkeypatch, tmp_path, "1.5", budget=float(BUDGET)) as (gw, stack):
        deleting = FaultRule(parse_fault("latency=8"), "vertex", CACHES + "/")
        stack.ctx.faults.rules.insert(0, deleting)
        ask(gw)
        wait_until(lambda: deleting._fired == 1, 15, "the found cache's DELETE at Vertex")
        [made] = [c for c in stack.billed() if c.get("displayName", "").startswith("prefixgate-")]
    [booked] = [r for r in read_records(stack.ledger) if r["kind"] == "cache_create"]
    # What Vertex may bill for it: its tokens written, and stored for its whole TTL.
    ttl_h = Decimal(str(seconds(made["expireTime"]) - seconds(made["createTime"]))) / 3600
    bill = made["tokens"] * (INPUT + STORAGE_PER_HOUR * ttl_h) / MTOK
    assert abs(Decimal(booked["cost_usd"]) - bill) < Decimal("0.000001"), (booked, bill)
    assert booked["cache_writes"]["explicit"] == made["tokens"] and made["name"] in booked["explanation"][0]
    assert "the gateway stopped during its deletion" in booked["explanation"][0]
