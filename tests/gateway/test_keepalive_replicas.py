"""Keep-alive behind a load balancer that is not sticky: a conversation's turns alternate between two gateways
(replicas, each with its own ledger) sharing one real Redis, then it goes idle. Each replica holds the session as
it last saw it; the one that did not answer the latest turn used to refresh its older view of the session (the
entry the other replica's request had just read: a refresh that bought nothing), and then both kept refreshing, so
one idle gap cost two refreshes and two `keepalive` ledger rows. A session's latest activity is now shared through
Redis and a refresh is sent under a short lease: one refresh per idle gap, from the replica that saw the latest turn.

What the replicas learn of gaps is shared too. Each used to learn from the requests it answered, timing a gap from
the turn *it* last saw: a conversation alternating between two replicas at 3-minute gaps showed each 6-minute gaps,
so the planner wrote its later turns for an hour (Anthropic bills an hour's write at 2x the input price, 5 minutes'
at 1.25x: an hour pays only for a turn not expected back within 5 minutes), and keep-alive judged an idle session
likely back after 4 minutes and refreshed it.

Prices and the mock's 5-minute entries are as in `test_keepalive_live` (Claude Sonnet 5.5, Anthropic's pages)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from decimal import Decimal
from pathlib import Path

import anthropic
import pytest
import redis

from prefixgate.cache_planner.lifetime import GAP_EDGES, GapBook, GapModel
from prefixgate.cache_planner.reuse import BOUNDS
from prefixgate.gateway import keepalive_shared
from prefixgate.gateway.keepalive_shared import KEPT, LEASE, TOUCH, Kept, Seen, SharedSessions, place
from tests.gateway.test_keepalive_live import (
    READ,
    REPLY_S,
    WRITE_5M,
    Stack,
    contract,
    keepalive_replicas,
    section_2,
    turn,
)

IDLE_S = 280     # past the point where a refresh of a 5-minute entry pays, short of its expiry
GAP_S = 180      # a user who answers within 3 minutes, every turn


def replicas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redis_url: str):
    """Two gateways (A, B) on one Redis before one mock, route "chat" kept alive by re-reading."""
    return keepalive_replicas(tmp_path, monkeypatch, redis_url, "chat",
                              {"mode": "on", "route_usd": 5, "key_usd": 1, "period": "day", "upgrade": False})


def converse(a: Stack, b: Stack, turns: int, tag: str) -> None:
    """`turns` turns of one conversation, a minute apart, answered by A, B, A, ... in turn (a round-robin balancer)."""
    history: list[dict] = []
    for i in range(turns):
        gw = (a, b)[i % 2]
        turn(gw.client("chat"), "chat", tag, history, "Review section 1." if i == 0 else section_2(f"{tag}-{i}"))
        if i < turns - 1:
            a.advance(REPLY_S)


def idle(stacks: tuple[Stack, ...], seconds: int, step: int = 20) -> None:
    """An idle gap passed in steps (on the clock the replicas share), each once every replica's worker has acted on
    the clock as it stands."""
    for _ in range(seconds // step):
        stacks[0].advance(step)
        for stack in stacks:
            stack.settle()


def test_one_idle_gap_costs_one_refresh_from_the_replica_that_answered_last(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch,
                                                                            redis_url: str) -> None:
    """Turns at 0, 60, 120 and 180 s: A's view of the session ends at 120 + 300 s, but B's turn at 180 read that
    entry; A's refresh near its view's end bought nothing (the entry lived until 480 s), and B refreshed too."""
    with replicas(tmp_path, monkeypatch, redis_url) as (a, b):
        converse(a, b, 4, "alternating")     # A answers turns 1 and 3, B turns 2 and 4
        idle((a, b), IDLE_S)
        assert (len(a.refreshes("chat")), len(b.refreshes("chat"))) == (0, 1)
        [refresh] = b.refreshes("chat")
        assert refresh["cache_read"] > 3000
    # What the replicas share expires: a touch after twice its entry's TTL (10 minutes here), a lease after a refresh's
    # timeout plus 5 s, the route's gap counts after a day; nothing is left for ever.
    shared = redis.Redis.from_url(redis_url)
    names = list(shared.scan_iter("prefixgate:keepalive:*"))
    assert names and all(0 < shared.pttl(n) <= 600_000 for n in names if b":lease:" not in n and b":gaps:" not in n)
    assert all(0 < shared.pttl(n) <= 65_000 for n in names if b":lease:" in n)
    assert any(b":gaps:" in n for n in names) and all(0 < shared.pttl(n) <= 86_400_000 for n in names if b":gaps:" in n)


def test_the_refresh_is_credited_where_the_sessions_next_turn_lands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     redis_url: str) -> None:
    """B kept the session; its fifth turn, 340 s after the fourth (past its 5-minute entry), reaches A. That turn's
    record is credited with what B's refresh kept: the entry's tokens at the write price less the read price. (A
    replica credits only its own sessions' refreshes: the saving was lost when the next turn changed replicas.)"""
    with replicas(tmp_path, monkeypatch, redis_url) as (a, b):
        history: list[dict] = []
        for i in range(4):
            turn((a, b)[i % 2].client("chat"), "chat", "credit", history,
                 "Review section 1." if i == 0 else section_2(f"credit-{i}"))
            a.advance(REPLY_S if i < 3 else 0)
        idle((a, b), IDLE_S)
        [refresh] = b.refreshes("chat")
        a.advance(180 + 340 - a.offset)
        back = turn(a.client("chat"), "chat", "credit", history, "And section 5?")
        assert back.usage.cache_read_input_tokens >= refresh["cache_read"] > 3000
        assert Decimal(a.requests("chat")[-1]["keepalive_saved_usd"]) == refresh["cache_read"] * (WRITE_5M - READ) / 1_000_000


def test_a_quiet_routes_system_prompt_is_refreshed_by_one_replica(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    redis_url: str) -> None:
    """The route's static prefix is a session in each replica that served it. One-question sessions 20-30 minutes
    apart, served by A, B, A, B, then the route goes quiet: A's view of the system prompt's 1-hour entry ends at 110
    minutes (its last request was at 50), but B's request at 70 read it and it lives until 130. A used to refresh it at
    its own view's end (buying nothing), then B at 130: two refreshes, where one (at 130) keeps it."""
    with replicas(tmp_path, monkeypatch, redis_url) as (a, b):
        prompt = contract("shared system prompt")
        for minute, gw, question in ((0, a, "Is clause 3 fair?"), (20, b, "Who signs it?"), (50, a, "When does it end?"),
                                     (70, b, "Can it be renewed?")):
            a.advance(minute * 60 - a.offset)
            gw.client("chat").messages.create(model="chat-sonnet", max_tokens=50, system=prompt,
                                              messages=[{"role": "user", "content": question}])
        for until in (110 * 60, 130 * 60):        # each replica's view of the entry's end, passed 10 s at a time
            a.advance(until - 90 - a.offset)
            idle((a, b), 90, step=10)
        refreshes = a.refreshes("chat") + b.refreshes("chat")
        assert [r["explanation"][0].split(" of session")[0] for r in refreshes] == ["keepalive: refresh of the static prefix 1"]
        # Sent at the entry's real end (130), not at A's view's (110): 55 minutes later, past 110 + 60, it is read.
        a.advance(185 * 60 - a.offset)
        later = a.client("chat").messages.create(model="chat-sonnet", max_tokens=50, system=prompt,
                                                 messages=[{"role": "user", "content": "Who may terminate it?"}])
        assert later.usage.cache_read_input_tokens == refreshes[0]["cache_read"] > 3000


def test_with_redis_down_a_replica_refreshes_on_its_own_view() -> None:
    """Redis not answering: the lease is not refused but skipped (nothing seen elsewhere), so the replica refreshes as
    a single replica would, instead of never refreshing at all."""
    async def run() -> tuple[str, Seen] | None:
        shared = SharedSessions("redis://127.0.0.1:1", lease_s=65)     # nothing listens on port 1
        try:
            return await shared.claim(place("tenant:t", "k", "chat", "anchor"))
        finally:
            await shared.aclose()

    assert asyncio.run(run()) == ("", Seen(0.0, 0.0))


def alternate(a: Stack, b: Stack, route: str, turns: int, tag: str) -> list[anthropic.types.Message]:
    """`turns` turns of one conversation, `GAP_S` apart, answered by A, B, A, ... in turn: their answers."""
    history: list[dict] = []
    answers = []
    for i in range(turns):
        if i:
            a.advance(GAP_S)
        answers.append(turn((a, b)[i % 2].client(route), route, tag, history,
                            "Review section 1." if i == 0 else section_2(f"{tag}-{i}")))
    return answers


def test_turns_alternating_between_replicas_are_written_for_5_minutes_as_on_one(tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch,
                                                                                redis_url: str) -> None:
    """Twelve turns 3 minutes apart, A, B, A, ...: each is back well within 5 minutes, so each turn's new part is
    written for 5 minutes, as a single gateway writes it; none for an hour. Each replica's planner learnt 3-minute
    gaps, not the 6 minutes since it last saw the conversation (with them it wrote turns 7 and 9-12 for an hour)."""
    with keepalive_replicas(tmp_path, monkeypatch, redis_url, "plain", "off") as (a, b):
        answers = alternate(a, b, "plain", 12, "alternating")
        assert [m.usage.cache_creation.ephemeral_1h_input_tokens for m in answers] == [0] * 12
        assert all(m.usage.cache_creation.ephemeral_5m_input_tokens > 3000 for m in answers)
        assert all(m.usage.cache_read_input_tokens > 3000 for m in answers[1:])
        for gw in (a, b):
            learnt = [r.reuse.level("conversation") for r in gw.app.state.proxy.planner_state.routes.values()]
            [conversation] = [stats for stats in learnt if stats.reuses]
            assert conversation.within[BOUNDS.index(300.0)] == conversation.reuses >= 5     # all back within 5 min
            assert abs(conversation.gap_sum / conversation.reuses - GAP_S) < 5
    # Shared as hashes (no tenant or route in Redis), and expiring within a day.
    shared = redis.Redis.from_url(redis_url)
    names = list(shared.scan_iter("prefixgate:route:reuse:*"))
    assert names and all(b"tenant" not in n and b"plain" not in n and 0 < shared.pttl(n) <= 86_400_000 for n in names)


def test_an_idle_session_is_judged_on_the_gaps_it_showed_on_both_replicas(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch,
                                                                         redis_url: str) -> None:
    """Six turns 3 minutes apart, A, B, A, ..., then the conversation goes idle. Both replicas' gap models hold its
    five 3-minute gaps (the route's counts are shared), and B, which answered the last turn, judges a session 4
    minutes away unlikely back within the next 5 (it always came back within 3): it used to see 6-minute gaps on each
    replica and put that at 0.66-0.81."""
    with replicas(tmp_path, monkeypatch, redis_url) as (a, b):
        alternate(a, b, "chat", 6, "idle")
        idle((a, b), IDLE_S)
        for gw in (a, b):
            model = gw.app.state.proxy.keepalive.gaps.model("tenant:chat/chat", "")
            assert model.returns == 5 and model.returned[GAP_EDGES.index(240)] == 5
        # B's decision at 4.5 minutes idle, on its refresh's row if it sent one (a small chance may still pay a
        # refresh of a few cents' entry), else on its session.
        said = [r["explanation"][1] for r in b.refreshes("chat")] + [s.reason for s in b.app.state.proxy.keepalive.sessions.values()]
        [back] = [float(re.search(r"away 4 min\)=([0-9.]+)", line)[1]) for line in said if "away 4 min" in line]
        assert back <= 0.1
        assert a.refreshes("chat") == []
        # A's view of the session (its turn at 12 minutes) was continued on B: it is not counted as a session still
        # away on A (B's is the one that is), so the route's shared counts never see it end twice.
        assert [len(gw.app.state.proxy.keepalive.gaps.model("tenant:chat/chat", "").open) for gw in (a, b)] == [0, 1]


def test_a_replica_just_started_decides_on_the_gaps_the_others_learnt(redis_url: str) -> None:
    """A's gap model saw a session come back every 3 minutes; B, just started, reads the route's counts at its first
    tick and decides on them (the gaps are added up in Redis: its own would be added to A's)."""
    async def run() -> GapModel:
        a, b = SharedSessions(redis_url, lease_s=65), SharedSessions(redis_url, lease_s=65)
        try:
            learnt, fresh = GapBook(shared=True), GapBook(shared=True)
            for i in range(5):
                learnt.observe("tenant:chat/chat", "", "session", i * GAP_S)
            await a.share_gaps(learnt, time.monotonic())
            fresh.model("tenant:chat/chat", "")
            await b.share_gaps(fresh, time.monotonic())
            return fresh.model("tenant:chat/chat", "")
        finally:
            await a.aclose()
            await b.aclose()

    model = asyncio.run(run())
    assert model.returns == 4 and model.returned[GAP_EDGES.index(GAP_S)] == 4 and not model.unshared


def test_with_redis_down_a_replica_learns_gaps_on_its_own() -> None:
    """Redis not answering: the model keeps what it counted (decides on it, as a single replica) and shares it later."""
    async def run() -> GapModel:
        shared = SharedSessions("redis://127.0.0.1:1", lease_s=65)
        try:
            gaps = GapBook(shared=True)
            for i in range(3):
                gaps.observe("tenant:chat/chat", "", "session", i * GAP_S)
            await shared.share_gaps(gaps, time.monotonic())
            return gaps.model("tenant:chat/chat", "")
        finally:
            await shared.aclose()

    model = asyncio.run(run())
    assert model.returns == 2 and model.returned[GAP_EDGES.index(GAP_S)] == 2
    assert model.unshared == {f"r|{GAP_EDGES.index(GAP_S)}": 2.0, "n": 2.0}


def test_a_refresh_finished_while_redis_rested_is_recorded_once_it_answers(redis_url: str) -> None:
    """A replica took a place's lease and refreshed; meanwhile another client's timeout rested Redis (the shared
    window, prefixgate/redis_outage.py), so giving the lease back and touching the place were skipped. The touch
    used to be lost: another replica, once the lease expired, read the place as untouched since and paid for the same
    refresh again. It is now sent when Redis answers, with the lease given back and what the refresh kept."""
    where = place("group", "anchor")
    seen = Seen(1000.0, 900.0, 3, True)
    kept = Kept(900.0, 300.0, 1, 4000, "3.45")

    async def run() -> tuple[bytes | None, bytes | None, bytes | None, bool]:
        shared = SharedSessions(redis_url, lease_s=65)
        try:
            token, _ = await shared.claim(where)
            shared.window.outage.failed(0.5)        # another client of this Redis timed out just now
            await shared.release(where, token, seen, ttl_s=300)
            await shared.keeping(where, kept, ttl_s=300)
            skipped = not await shared._redis.exists(TOUCH + where)
            for _ in range(200):                    # the window ends, then the missed writes are resent
                if await shared._redis.exists(TOUCH + where, KEPT + where) == 2:
                    break
                await asyncio.sleep(0.05)
            return (await shared._redis.get(TOUCH + where), await shared._redis.get(LEASE + where),
                    await shared._redis.get(KEPT + where), skipped)
        finally:
            await shared.aclose()

    touched, lease, kept_raw, skipped = asyncio.run(run())
    assert skipped, "Redis was resting: nothing should have been sent then"
    assert Seen.of(touched) == seen
    assert lease is None
    assert json.loads(kept_raw) == {"last_request": 900.0, "written_ttl_s": 300.0, "refreshes": 1, "tokens": 4000,
                                    "margin": "3.45"}


def test_what_redis_missed_in_a_long_outage_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Redis down for hours while this replica refreshes on its own view: each refresh's release and kept entry is
    held to be resent, one per place. Places come and go with sessions, so without a bound the replica's memory (and
    the resend once Redis answers) grew with every session refreshed in the outage; the newest are kept."""
    monkeypatch.setattr(keepalive_shared, "MAX_MISSED", 50)
    places = [place("group", f"anchor-{i}") for i in range(60)]

    async def run() -> dict:
        shared = SharedSessions("redis://127.0.0.1:1", lease_s=65)     # nothing listens on port 1
        try:
            for i, where in enumerate(places):
                await shared.release(where, "", Seen(1000.0 + i, 900.0 + i, 3, True), ttl_s=300)
            return dict(shared._missed)
        finally:
            await shared.aclose()

    missed = asyncio.run(run())
    assert len(missed) == 50
    assert {where for where, _ in missed} == set(places[10:])


def test_a_touch_whose_lifetime_passed_in_the_outage_is_not_revived(redis_url: str) -> None:
    """A release Redis missed is resent once it answers, but a touch lives twice its entry's TTL from when it was
    made: one whose lifetime ran out during the outage, resent with a fresh expiry, would show every replica a place
    used long after its session ended (and a kept entry a refresh whose cache is gone). It is dropped instead."""
    where = place("group", "short-lived")
    sent: list[str] = []

    async def run() -> None:
        shared = SharedSessions(redis_url, lease_s=65)
        release = shared._release
        shared._release = lambda **kw: (sent.append(kw["keys"][0]), release(**kw))[1]
        try:
            token, _ = await shared.claim(where)
            shared.window.outage.failed(0.5)        # another client of this Redis timed out just now
            await shared.release(where, token, Seen(1000.0, 900.0, 3, True), ttl_s=0.05)  # a touch lasts 0.1 s
            await shared.keeping(where, Kept(900.0, 300.0, 1, 4000, "3.45"), ttl_s=0.05)
            for _ in range(200):                    # the window ends, then the retry looks at what was missed
                if not shared._missed and shared.window._retrying.done():
                    break
                await asyncio.sleep(0.05)
            assert not shared._missed
            assert not await shared._redis.exists(TOUCH + where, KEPT + where)
        finally:
            await shared.aclose()

    asyncio.run(run())
    assert sent == [], "a touch past its lifetime was sent to Redis after the outage"
