"""Keep-alive's spend caps across replicas: gateways sharing one real Redis reserve each refresh's expected cost
on the caps' counters before sending it, in one atomic step, so two replicas whose sessions fall due at the same
moment never both pass a cap with room for one refresh. (The live, two-replica version through the SDK and the
mock is `test_keepalive_live.test_gateways_sharing_redis_share_the_caps`.)"""

from __future__ import annotations

import asyncio
import json
import time
from decimal import Decimal
from types import SimpleNamespace

import pytest

from prefixgate.cache_planner.keepalive import Refresh, upgrade_body
from prefixgate.cache_planner.stability import PlannerState
from prefixgate.compact_json import compact_bytes
from prefixgate.cost import Price
from prefixgate.gateway.keepalive import KeepAlive, RouteFlags
from prefixgate.gateway.metrics import Metrics
from prefixgate.gateway.state import MemoryCounters, RedisCounters
from prefixgate.gateway.upstream import UpstreamFailure
from prefixgate.policies.keepalive import KeepAlivePolicy
from prefixgate.providers.rules import load_catalog
from prefixgate.usage import Usage
from tests.support_calendar import midday_zone

# Sonnet 5.5's cache read is $0.10/MTok: a refresh reading 7,900 tokens costs $0.00079; the key's cap of $0.001 a
# day has room for one and not two.
REFRESH = Decimal("7900") * Decimal("0.10") / 1_000_000
POLICY = KeepAlivePolicy(on=True, route_usd=1.0, key_usd=0.001, period="day", timezone=midday_zone())


def replica(redis_url: str) -> KeepAlive:
    """A gateway's keep-alive with what its caps use of the gateway: the shared counters (no ledger: with Redis the
    counters are never restored from one)."""
    proxy = SimpleNamespace(metrics=Metrics(), settings=SimpleNamespace(redis_url=redis_url),
                            counters=RedisCounters(redis_url), ledger=None)
    return KeepAlive(proxy)  # type: ignore[arg-type]


def session(ident: str) -> SimpleNamespace:
    return SimpleNamespace(route=SimpleNamespace(name="capped", keepalive=POLICY), group=("tenant:t", "capped", "capped"),
                           ident=ident)


def test_two_replicas_due_at_once_pass_a_cap_with_room_for_one_refresh_once(redis_url: str) -> None:
    async def both() -> list[str]:
        a, b = replica(redis_url), replica(redis_url)
        return list(await asyncio.gather(a._reserve(a._caps(session("on-a")), REFRESH), b._reserve(b._caps(session("on-b")), REFRESH)))

    assert sorted(asyncio.run(both())) == ["", "key cap"]


def test_a_refresh_not_sent_gives_its_reservation_back(redis_url: str) -> None:
    async def run() -> tuple[str, str, str]:
        a, b = replica(redis_url), replica(redis_url)
        first = await a._reserve(a._caps(session("on-a")), REFRESH)
        await a._settle(a._caps(session("on-a")), REFRESH, Decimal(0))        # refused by the key's budget, or failed
        second = await b._reserve(b._caps(session("on-b")), REFRESH)          # so the other replica's fits
        await b._settle(b._caps(session("on-b")), REFRESH, REFRESH)           # sent and billed as expected
        third = await a._reserve(a._caps(session("on-a")), REFRESH)           # a second billed refresh would pass $0.001
        return first, second, third

    assert asyncio.run(run()) == ("", "", "key cap")


def test_a_refresh_that_breaks_unexpectedly_gives_its_reservation_back(redis_url: str) -> None:
    """Not an upstream failure the refresh records, but an error nobody planned for (here the transport itself
    raising): the reservation is settled at $0 on the way out, so the cap is not held by money never spent."""
    class Broken:
        async def send(self, *args: object) -> None:
            raise RuntimeError("transport broke")

    async def run() -> str:
        a, b = replica(redis_url), replica(redis_url)
        a.proxy.upstream = Broken()
        due = session("on-a")
        due.__dict__.update(touched=time.time(), ttl_s=300.0, upgrading=False, expected_usd=REFRESH, key=None,
                            upstream=None, wire=None, model="claude-sonnet-5-5", body=b"{}", headers={},
                            credential=None)
        with pytest.raises(RuntimeError):
            await a._send(due)
        return await b._reserve(b._caps(session("on-b")), REFRESH)  # the whole cap is free again

    assert asyncio.run(run()) == ""


def test_without_redis_each_window_is_started_from_the_ledger_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without Redis a window's counter starts from what the ledger says refreshes spent in it, once: a route on
    another period looking at its own windows in between must not make a day's counter start again (the ledger's
    spend counted twice), and windows that have ended are forgotten (a gateway up for months keeps no list of
    every key's every hour)."""
    asked: list[tuple[int, str]] = []

    class Ledger:
        def spend_pico(self, since: int, dim: str, name: str, column: str) -> int:
            asked.append((since, dim))
            return int(REFRESH * 10**12)     # one refresh bought in this window before the restart

    proxy = SimpleNamespace(metrics=Metrics(), settings=SimpleNamespace(redis_url=""), counters=MemoryCounters(),
                            ledger=Ledger())
    keepalive = KeepAlive(proxy)  # type: ignore[arg-type]
    hourly = KeepAlivePolicy(on=True, route_usd=1.0, key_usd=1.0, period="hour")

    def on(route: str, policy: KeepAlivePolicy) -> SimpleNamespace:
        return SimpleNamespace(route=SimpleNamespace(name=route, keepalive=policy), group=("tenant:t", "k", route))

    now = [86400.0 * 20_000 + 7200.0]     # 02:00 on some day
    monkeypatch.setattr("prefixgate.gateway.keepalive.time.time", lambda: now[0])

    async def run() -> list[str]:
        verdicts = [await keepalive._reserve(keepalive._caps(on("daily", POLICY)), Decimal(0))]  # ledger: 1 bought
        now[0] += 3600                    # 03:00: the hourly route's window is newer than the day's
        verdicts.append(await keepalive._reserve(keepalive._caps(on("hourly", hourly)), REFRESH))
        # The day's key cap ($0.001) has room for one refresh and the ledger's is in it: a second does not fit.
        verdicts.append(await keepalive._reserve(keepalive._caps(on("daily", POLICY)), REFRESH))
        return verdicts

    assert asyncio.run(run()) == ["", "", "key cap"]
    assert len([a for a in asked if a[1] == "keepalive_pair"]) == 2   # the daily key's window and the hourly key's, once each
    now[0] += 86400                       # the next day: every counter above belongs to a window that has ended
    asyncio.run(keepalive._reserve(keepalive._caps(on("hourly", hourly)), Decimal(0)))
    assert len(keepalive._restored) == 2                     # this hour's route and key counters only


def test_what_a_route_refused_is_remembered_for_the_most_recent_routes_only() -> None:
    """On an open gateway every caller key is a tenant: what keep-alive learned of each tenant's route (no upgrades,
    no pre-warms) is bounded, the route asked about most recently kept."""
    flags = RouteFlags(2)
    flags.add("a/chat", "chat")
    flags.add("b/chat", "chat")
    assert "a/chat" in flags            # asked about: now the most recent
    flags.add("c/chat", "chat")
    assert "a/chat" in flags and "c/chat" in flags and "b/chat" not in flags and len(flags) == 2


def held_session(keepalive: KeepAlive, **fields: object) -> SimpleNamespace:
    """A conversation's session as keep-alive holds it (the fields its bookkeeping reads), 1,000 body bytes."""
    session = SimpleNamespace(**{**dict(group=("tenant:t", "k", "chat"), ident="s1", anchor="a1", static=(), upgrade=b"",
                                        body=b"x" * 1000, price=Price(Decimal(3), Decimal(15), Decimal("0.3"),
                                                                       {"5m": Decimal("3.75"), "1h": Decimal(6)}),
                                        cached_tokens=900, prewarm=False, expected_usd=Decimal(0), stopped="",
                                        level="conversation"), **fields})
    session.slot = (*session.group, session.ident)
    keepalive._keep(session)  # type: ignore[arg-type]
    return session


def bytes_held(keepalive: KeepAlive) -> tuple[int, int]:
    """The count kept against the bound, and what the sessions held really hold."""
    return keepalive.body_bytes, sum(len(s.body) + len(s.upgrade) for s in keepalive.sessions.values())


def stub_keepalive() -> KeepAlive:
    proxy = SimpleNamespace(metrics=Metrics(), settings=SimpleNamespace(redis_url=""), counters=MemoryCounters(),
                            ledger=SimpleNamespace(append=lambda rec: None, spend_pico=lambda *a, **k: 0))
    return KeepAlive(proxy)  # type: ignore[arg-type]


def test_a_session_continued_while_its_refresh_is_built_leaves_the_byte_count_true(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refresh bodies are compacted off the event loop; a request that continues the session meanwhile drops it
    (giving its bytes back). The refresh built for it must not then be counted against the bound as if still
    held: the count would drift up for good, and the bound would drop live sessions for bytes nobody holds."""
    keepalive = stub_keepalive()
    session = held_session(keepalive)
    assert bytes_held(keepalive) == (1000, 1000)

    def compact_while_a_request_continues(body: dict) -> bytes:
        keepalive._drop(session)  # type: ignore[arg-type]  # the caller's next request arrived meanwhile
        return b"y" * 400

    monkeypatch.setattr("prefixgate.gateway.keepalive.compact_bytes", compact_while_a_request_continues)
    refresh = Refresh("generate", {"model": "m", "max_tokens": 0})
    assert asyncio.run(keepalive._use(session, refresh)) is False  # type: ignore[arg-type]
    assert bytes_held(keepalive) == (0, 0)


def test_an_upgrade_refused_after_its_session_was_continued_leaves_the_byte_count_true() -> None:
    """The upstream refuses an upgrade (400) while the caller's next request continues the session: the route
    stops upgrading, and the upgrade's bytes, given back when the session was dropped, are not given back twice
    (the count would drift down, and the bound would hold more than it says)."""
    keepalive = stub_keepalive()
    session = held_session(keepalive, upgrade=b"u" * 500, upgrading=True, upgrade_bill=Decimal(0), touched=time.time(),
                           ttl_s=300.0, key=None, upstream=SimpleNamespace(name="anthropic", provider="anthropic"),
                           wire=None, model="claude-sonnet-5-5", headers={}, credential=None, refreshes=0, reason="",
                           route=SimpleNamespace(name="chat", keepalive=POLICY), gap_route="tenant:t/chat",
                           upgrade_ttl="1h", rows="anthropic", dialect="anthropic", prefix_hash="p", turns=1,
                           last_request=time.time(), ttl="5m", upgrade_usd=Decimal(0), due=None)
    keepalive.body_bytes += len(session.upgrade)        # as `_plan` counts a planned upgrade

    class ContinuedThenRefused:
        async def send(self, *args: object) -> None:
            keepalive._drop(session)  # type: ignore[arg-type]
            raise UpstreamFailure("anthropic", 400, "max_tokens: must be at least 1")

    keepalive.proxy.upstream = ContinuedThenRefused()
    asyncio.run(keepalive._refresh(session))  # type: ignore[arg-type]
    assert "tenant:t/chat" in keepalive.no_upgrade
    assert bytes_held(keepalive) == (0, 0)


def test_a_reservation_cancelled_between_its_caps_gives_back_what_it_added(redis_url: str) -> None:
    """A shutdown cancels the worker while it adds the refresh's cost to its second cap (a round trip to Redis):
    the first cap's share is given back, so the shared cap is not held by a refresh never sent."""
    async def run() -> float:
        a = replica(redis_url)
        caps = a._caps(session("on-a"))
        real, stuck = a.proxy.counters.add, asyncio.Event()

        async def add(counter: str, amount: float, ttl: int) -> float:
            if counter == caps[1].counter and amount > 0:
                stuck.set()
                await asyncio.Event().wait()        # Redis never answers before the shutdown
            return await real(counter, amount, ttl)

        a.proxy.counters.add = add
        worker = asyncio.create_task(a._reserve(caps, REFRESH))
        await stuck.wait()
        worker.cancel()
        with pytest.raises(asyncio.CancelledError):
            await worker
        return await real(caps[0].counter, 0, caps[0].ttl)

    assert asyncio.run(run()) == 0


def upgraded_session(keepalive: KeepAlive) -> SimpleNamespace:
    """A conversation's session whose upgrade (a real Anthropic one: the prefix, the answer marked 1h, a filler turn)
    is out, on a tenant/route whose upstream has refused a pre-warm."""
    asked = {"model": "claude-sonnet-5-5", "max_tokens": 50, "system": "You review contracts.",
             "messages": [{"role": "user", "content": [{"type": "text", "text": "Review section 1. " * 200,
                                                        "cache_control": {"type": "ephemeral"}}]}]}
    upgrade = upgrade_body("anthropic", asked, [{"type": "text", "text": "Section 1 is fine."}], "1h")
    assert upgrade is not None
    session = held_session(keepalive, upgrade=compact_bytes(upgrade.body), upgrading=True, upgraded=False,
                           planner="anthropic", model="claude-sonnet-5-5", ttl="5m", upgrade_ttl="1h", planner_route="",
                           upgrade_key="k", refreshes=0, touched=0.0,
                           gap_route="tenant:t/chat", route=SimpleNamespace(name="chat", keepalive=POLICY))
    session.ttl_s = 300.0
    keepalive.body_bytes += len(session.upgrade)        # as `_plan` counts a planned upgrade
    keepalive.no_prewarm.add("tenant:t/chat", "chat")
    return session


def test_after_an_upgrade_a_route_that_refused_pre_warm_is_refreshed_with_one_token() -> None:
    """A route whose upstream refused a pre-warm is kept with the least output from then on (one token: `max_tokens:
    1`, docs/gateway.md's keep-alive section), the refresh that follows an upgrade included; and the session's `prewarm` says what its body
    is, so a refusal of that body falls back instead of stopping the session as failed."""
    keepalive = stub_keepalive()
    keepalive.proxy.catalog = load_catalog()
    session = upgraded_session(keepalive)
    upgrade = session.upgrade
    assert keepalive._answered(session, Usage(cache_read=1200, cache_writes={"1h": 10}), 0.0) == "upgraded"  # type: ignore[arg-type]
    assert asyncio.run(keepalive._after_upgrade(session, upgrade))  # type: ignore[arg-type]
    refresh = json.loads(session.body)
    assert refresh["max_tokens"] == 1 and session.prewarm is False
    assert session.upgraded and session.ttl == "1h" and session.cached_tokens == 1210
    assert bytes_held(keepalive) == (len(session.body), len(session.body))


def test_a_session_continued_while_its_upgrade_is_taken_in_leaves_the_byte_count_true(monkeypatch: pytest.MonkeyPatch) -> None:
    """As for a refresh (above): the refresh that follows an upgrade, built for a session a request continued
    meanwhile, is not counted against the bound."""
    keepalive = stub_keepalive()
    keepalive.proxy.catalog = load_catalog()
    session = upgraded_session(keepalive)

    def compact_while_a_request_continues(body: dict) -> bytes:
        keepalive._drop(session)  # type: ignore[arg-type]  # the caller's next request arrived meanwhile
        return b"y" * 400

    monkeypatch.setattr("prefixgate.gateway.keepalive.compact_bytes", compact_while_a_request_continues)
    upgrade = session.upgrade
    assert keepalive._answered(session, Usage(cache_read=1200), 0.0) == "upgraded"  # type: ignore[arg-type]
    assert not asyncio.run(keepalive._after_upgrade(session, upgrade))  # type: ignore[arg-type]
    assert bytes_held(keepalive) == (0, 0)


def sent_session(keepalive: KeepAlive, **fields: object) -> SimpleNamespace:
    """A Claude conversation's session as `_send` reads it, its refresh due now (no key: no budget to settle)."""
    return held_session(keepalive, **{**dict(
        touched=time.time(), ttl_s=300.0, upgrading=False, expected_usd=Decimal(0), key=None,
        upstream=SimpleNamespace(name="anthropic", provider="anthropic", base_model=str), wire=None,
        model="claude-sonnet-5-5", headers={}, credential=None, refreshes=0, reason="",
        route=SimpleNamespace(name="chat", keepalive=POLICY), gap_route="tenant:t/chat", rows="anthropic",
        dialect="anthropic", prefix_hash="p", ttl="5m"), **fields})


class Silent:
    """An upstream that gives no answer to a refresh within its timeout."""

    async def send(self, *args: object) -> None:
        raise UpstreamFailure("anthropic", None, "no answer in time", timed_out=True)


def test_a_refresh_that_timed_out_is_billed_the_read_it_was_sent_for() -> None:
    """A refresh given up on at its timeout had been sent whole: the provider may have run it (read the prefix it
    was sent to keep warm) and billed that, though no answer came. It was recorded at $0 and gave its reservation
    back, so the caps (and the key's budget) under-counted what refreshes spent."""
    keepalive = stub_keepalive()
    recorded: list = []
    keepalive.proxy.ledger.append = recorded.append
    session = sent_session(keepalive)

    keepalive.proxy.upstream = Silent()
    asyncio.run(keepalive._send(session))  # type: ignore[arg-type]
    [rec] = recorded
    # 900 cached tokens read at the session's cache-read price, $0.30 per million.
    assert (rec.status, rec.cache_read, Decimal(rec.cost_usd)) == (504, 900, Decimal(900) * Decimal("0.3") / 1_000_000)
    assert any("estimated" in line for line in rec.explanation)
    spent = asyncio.run(keepalive.proxy.counters.get(keepalive._caps(session)[1].counter))  # type: ignore[arg-type]
    assert spent == 270_000      # the key cap's counter, in nanodollars: $0.00027


def test_an_upgrade_answered_after_a_request_continued_its_session_is_still_held() -> None:
    """The upgrade wrote its hour-long entry whether or not the caller's next request came while it was out: the
    planner must still hold it (mark it again on later turns), or it is left to lapse an hour on. And the planner
    learns of it before the upgrade's record is written (`_answered` runs with no await between)."""
    keepalive = stub_keepalive()
    keepalive.proxy.planner_state = PlannerState()
    session = upgraded_session(keepalive)
    session.planner_route, session.upgrade_key = "t/chat", "the-entry-key"
    keepalive._drop(session)  # type: ignore[arg-type]  # the caller's next request arrived while the upgrade was out
    assert keepalive._answered(session, Usage(cache_read=1200, cache_writes={"1h": 10}), 1000.0) == "continued"  # type: ignore[arg-type]
    # Held for the hour the upgrade asked, from when it was sent.
    assert keepalive.proxy.planner_state.route("t/chat").held.entries == {"the-entry-key": ("1h", 1000.0 + 3600)}


def test_an_upgrade_that_timed_out_is_billed_the_answer_it_was_sent_to_write() -> None:
    """An upgrade given up on at its timeout had been sent whole too: if the provider ran it, it billed the prefix
    read and the answer written with the hour-long TTL (Anthropic bills a 1h write at twice the input price). Held
    at that when sent, it was recorded and settled at the read alone, so the caps and the key's budget gave back
    what the write may have cost."""
    keepalive = stub_keepalive()
    recorded: list = []
    keepalive.proxy.ledger.append = recorded.append
    session = sent_session(keepalive, upgrading=True, upgrade=b"u" * 500, upgrade_ttl="1h", reply_tokens=2000,
                           upgrade_bill=Decimal(0))

    keepalive.proxy.upstream = Silent()
    asyncio.run(keepalive._send(session))  # type: ignore[arg-type]
    [rec] = recorded
    # The session's typed price: reads $0.30, hour-long writes $6 per million tokens.
    read_and_write = (Decimal(900) * Decimal("0.3") + Decimal(2000) * Decimal(6)) / 1_000_000
    assert (rec.status, rec.cache_read, rec.cache_writes) == (504, 900, {"1h": 2000})
    assert Decimal(rec.cost_usd) >= read_and_write
    spent = asyncio.run(keepalive.proxy.counters.get(keepalive._caps(session)[1].counter))  # type: ignore[arg-type]
    assert spent == int(Decimal(rec.cost_usd) * 10**9)


def test_a_refresh_out_when_the_gateway_stops_is_billed_what_it_was_sent_to_do() -> None:
    """A shutdown cancels the worker while a refresh is out: sent, the provider may run it and bill its read, as it
    may bill a caller's request the caller hung up on (recorded at its estimate, status 499). The refresh was recorded
    nowhere and its reservations given back, so keep-alive's caps and the key's budget forgot what it may have cost."""
    keepalive = stub_keepalive()
    recorded: list = []
    keepalive.proxy.ledger.append = recorded.append
    session = sent_session(keepalive, expected_usd=REFRESH)

    async def run() -> None:
        out = asyncio.Event()

        class Stuck:
            async def send(self, *args: object) -> None:
                out.set()
                await asyncio.Event().wait()        # no answer before the shutdown

        keepalive.proxy.upstream = Stuck()
        worker = asyncio.create_task(keepalive._send(session))  # type: ignore[arg-type]
        await out.wait()
        worker.cancel()
        with pytest.raises(asyncio.CancelledError):
            await worker

    asyncio.run(run())
    [rec] = recorded
    # 900 cached tokens read at the session's cache-read price, $0.30 per million.
    assert (rec.status, rec.cache_read, Decimal(rec.cost_usd)) == (499, 900, Decimal(900) * Decimal("0.3") / 1_000_000)
    assert any("estimated" in line for line in rec.explanation)
    spent = asyncio.run(keepalive.proxy.counters.get(keepalive._caps(session)[1].counter))  # type: ignore[arg-type]
    assert spent == 270_000      # the key cap's counter, in nanodollars: $0.00027
