"""Two replicas admitting one key's requests at once overshoot its budget no more than one replica would: a
reservation is held in Redis, where every replica's admission sees it. Each replica used to see only its own
reservations, so N replicas let through N times the requests one would (4 where one replica admits 2)."""

from __future__ import annotations

import asyncio
import time
import uuid
from contextlib import ExitStack
from decimal import Decimal

import httpx
import pytest

from prefixgate.errors import RequestError
from prefixgate.gateway.state import MemoryCounters, RedisCounters
from prefixgate.policies import limits as limits_module
from prefixgate.policies.limits import HELD, SPENT, Limits
from prefixgate.policies.schema import Budget, CallerKey, hash_key
from tests.gateway.support_gateway import policy_for, running_gateway, running_upstream, settings_for

KEY = CallerKey("team", "0" * 64, budget=Budget(usd=1.0, period="day"))
NOW = 20_000 * 86400 + 5.0
ESTIMATE = Decimal("0.6")       # each request may cost $0.60 of the key's $1.00
CROWD = "pg-crowd-key-0001"


async def _admitted(replicas: list[Limits], tries: int = 8) -> list:
    """Admissions taken in turn from each replica until every one refuses; the reservations admitted."""
    held = []
    for i in range(tries):
        try:
            held.append(await replicas[i % len(replicas)].admit(KEY, ESTIMATE))
        except RequestError as e:
            assert "budget" in e.message
    return held


async def released(replica: Limits) -> None:
    """Until the holds `replica` let go of are gone from Redis: the release runs off the settling call, so a fixed
    wait would be a race on a loaded machine."""
    await asyncio.gather(*replica._unholding)


def test_one_replica_admits_two_requests_of_this_size():
    # The documented bound, one replica: $0 + $0.60 reserved is under $1, so a second is admitted; not a third.
    async def run() -> int:
        return len(await _admitted([Limits(MemoryCounters(), clock=lambda: NOW)]))

    assert asyncio.run(run()) == 2


def test_two_replicas_admit_no_more_than_one_would(redis_url):
    async def run() -> tuple[int, bool]:
        a, b = RedisCounters(redis_url), RedisCounters(redis_url)
        replicas = [Limits(a, clock=lambda: NOW), Limits(b, clock=lambda: NOW)]
        held = await _admitted(replicas)
        # The first request cost $0.10: settled on its replica, the room it leaves is seen by the other.
        await replicas[0].settle(KEY, held[0], tokens=0, cost_usd=Decimal("0.10"))
        await released(replicas[0])
        again = await replicas[1].admit(KEY, ESTIMATE)
        await a.close()
        await b.close()
        return len(held), again.nano == 600_000_000

    assert asyncio.run(run()) == (2, True)


def test_holds_up_to_a_worst_case_share_what_is_left_across_replicas(redis_url):
    """An uncapped request holds its worst case, or what the key's budget has left fleet-wide, never past it: the
    gateway bounds its answer by what it holds. Below a minimal answer ($0.10 here) it is refused."""
    least = Decimal("0.10")

    async def run() -> tuple[list[int], bool, int]:
        a, b = RedisCounters(redis_url), RedisCounters(redis_url)
        replicas = [Limits(a, clock=lambda: NOW), Limits(b, clock=lambda: NOW)]
        first = await replicas[0].admit(KEY, ESTIMATE, least)
        second = await replicas[1].admit(KEY, ESTIMATE, least)     # $0.40 left of $1.00: all of it
        try:
            await replicas[0].admit(KEY, ESTIMATE, least)
            refused = ""
        except RequestError as e:
            refused = e.kind    # none of it spent, all of it held: a retryable rate limit, not the spent budget
        await replicas[0].settle(KEY, first, tokens=0, cost_usd=Decimal("0.10"))
        await released(replicas[0])
        again = await replicas[1].admit(KEY, ESTIMATE, least)      # $1.00 - $0.10 spent - $0.40 held
        for replica in replicas:
            await replica.aclose()
        await a.close()
        await b.close()
        return [first.nano, second.nano], refused, again.nano

    assert asyncio.run(run()) == ([600_000_000, 400_000_000], "rate_limit", 500_000_000)


def test_redis_tells_a_spent_budget_from_one_running_requests_hold(redis_url):
    async def run() -> tuple[int, int, int]:
        store, counter = RedisCounters(redis_url), f"spend:probe-{uuid.uuid4().hex}"
        first = await store.reserve(counter, "h1", 1000, 1000, 60)      # all of it held
        second = await store.reserve(counter, "h2", 400, 1000, 60)      # none left, none spent: held
        await store.add(counter, 1000, 60)
        third = await store.reserve(counter, "h3", 1, 1000, 60)         # all of it spent
        await store.close()
        return first, second, third

    assert asyncio.run(run()) == (1000, HELD, SPENT)


def test_a_hold_left_by_a_replica_that_died_expires(redis_url, monkeypatch):
    monkeypatch.setattr(limits_module, "HOLD_S", 1)

    async def died() -> None:
        dead = RedisCounters(redis_url)
        await Limits(dead, clock=lambda: NOW).admit(KEY, Decimal("1.00"))
        await dead.close()

    # Its replica dies mid-request (its event loop ends, as its process would): nothing renews or releases its hold.
    asyncio.run(died())

    async def run() -> None:
        alive = RedisCounters(redis_url)
        survivor = Limits(alive, clock=lambda: NOW)
        with pytest.raises(RequestError):
            await survivor.admit(KEY, ESTIMATE)
        deadline = time.monotonic() + 10
        while True:     # the hold expires (HOLD_S) and the budget is the key's again
            await asyncio.sleep(0.2)
            try:
                await survivor.admit(KEY, ESTIMATE)
                break
            except RequestError:
                assert time.monotonic() < deadline, "the dead replica's hold never expired"
        await alive.close()

    asyncio.run(run())


def test_two_gateway_replicas_on_one_redis_admit_a_crowd_as_one_would(tmp_path, redis_url, monkeypatch):
    """Eight concurrent requests, four through each replica, against a budget that fits one request's cap and a bit:
    one gateway admits two of them; two replicas on one Redis admit two as well (four before)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-gateway-openai-0001")
    policy = {"routes": [{"name": "gpt", "models": ["gpt-*"], "targets": [{"upstream": "openai"}],
                          "max_request_usd": 0.6}],
              "keys": [{"name": "crowd", "key_sha256": hash_key(CROWD), "budget": {"usd": 1.0, "period": "total"}}]}
    with running_upstream() as up, ExitStack() as stack:
        up.delay_s = 1.0        # every admission happens before any request ends
        urls = []
        for name in ("a", "b"):
            folder = tmp_path / name
            folder.mkdir()
            settings = settings_for(up.url, folder, redis_url=redis_url)
            urls.append(stack.enter_context(running_gateway(settings, policy=policy_for(settings, policy))).url)

        async def crowd() -> list[int]:
            async with httpx.AsyncClient(timeout=30, headers={"authorization": f"Bearer {CROWD}"}) as client:
                answers = await asyncio.gather(*(client.post(urls[i % 2] + "/v1/chat/completions", json={
                    "model": "gpt-5.4-mini", "max_tokens": 20, "messages": [{"role": "user", "content": f"Hi {i}"}]})
                    for i in range(8)))
            return sorted(r.status_code for r in answers)

        assert asyncio.run(crowd()) == [200, 200] + [429] * 6


def test_a_request_that_outlasts_the_hold_keeps_its_budget_held(redis_url, monkeypatch):
    """A hold lasts HOLD_S (15 minutes) so that a dead replica's lapse; a live request longer than that (a 20-minute
    reasoning stream) lost its hold all the same, and the other replicas spent the budget it had reserved."""
    monkeypatch.setattr(limits_module, "HOLD_S", 2)

    async def run() -> tuple[list[bool], bool]:
        a, b = RedisCounters(redis_url), RedisCounters(redis_url)
        running, other = Limits(a, clock=lambda: NOW), Limits(b, clock=lambda: NOW)
        held = await running.admit(KEY, Decimal("1.00"))     # the key's whole budget, for a request still running
        refused = []
        for _ in range(3):          # 4.5 s: more than twice the hold's life
            await asyncio.sleep(1.5)
            try:
                await other.admit(KEY, ESTIMATE)
                refused.append(False)
            except RequestError:
                refused.append(True)
        await running.settle(KEY, held, tokens=0, cost_usd=Decimal("0.10"))
        await released(running)
        freed = all(refused) and (await other.admit(KEY, ESTIMATE)).nano == 600_000_000   # once it ends, the rest is free
        await running.aclose()
        await other.aclose()
        await a.close()
        await b.close()
        return refused, freed

    assert asyncio.run(run()) == ([True, True, True], True)
