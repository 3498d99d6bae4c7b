"""Budget and keep-alive periods on the calendar: a `month` is the calendar month and a `day` the calendar day, from
midnight in the policy's (or the key's) IANA time zone. The expected instants are the calendar's, typed with their
UTC offsets: US DST began on 2026-03-08 (second Sunday of March) and ended on 2026-11-01; India is UTC+05:30 all
year. The limiter, keep-alive's caps, the restore from the ledger and the dashboard's forecast all count in them."""

from __future__ import annotations

import asyncio
from datetime import datetime
from decimal import Decimal
from types import SimpleNamespace
from zoneinfo import ZoneInfoNotFoundError

import pytest

from prefixgate.config import Settings
from prefixgate.errors import RequestError
from prefixgate.gateway.dashboard.forecast import period_window
from prefixgate.gateway.keepalive import KeepAlive
from prefixgate.gateway.proxy import Proxy
from prefixgate.gateway.state import MemoryCounters, RedisCounters
from prefixgate.ledger import Ledger, LedgerRecord
from prefixgate.policies import Limits, Policy, builtin_upstreams
from prefixgate.policies.keepalive import KeepAlivePolicy
from prefixgate.policies.periods import window, zone_error
from prefixgate.policies.schema import Budget, CallerKey, PolicyError


def at(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def test_a_month_is_the_calendar_month_in_utc() -> None:
    month = window("month", at("2026-11-15T12:00:00+00:00"))
    assert (month.start, month.end) == (at("2026-11-01T00:00:00+00:00"), at("2026-12-01T00:00:00+00:00"))
    assert month.left(at("2026-11-15T00:00:00+00:00")) == 16 * 86400     # the 429's Retry-After on the 15th
    assert month.ttl >= 30 * 86400                                       # a counter outlives the 30-day month
    feb = window("month", at("2027-02-10T00:00:00+00:00"))
    assert feb.end - feb.start == 28 * 86400


def test_a_day_when_dst_starts_in_los_angeles_is_23_hours() -> None:
    day = window("day", at("2026-03-08T12:00:00-07:00"), "America/Los_Angeles")
    assert (day.start, day.end) == (at("2026-03-08T00:00:00-08:00"), at("2026-03-09T00:00:00-07:00"))
    assert day.end - day.start == 23 * 3600
    back = window("day", at("2026-11-01T12:00:00-08:00"), "America/Los_Angeles")
    assert back.end - back.start == 25 * 3600
    # November in Los Angeles starts in daylight time and ends in standard time.
    month = window("month", at("2026-11-20T12:00:00-08:00"), "America/Los_Angeles")
    assert (month.start, month.end) == (at("2026-11-01T07:00:00+00:00"), at("2026-12-01T08:00:00+00:00"))


def test_a_day_in_kolkata_starts_at_18_30_utc() -> None:
    day = window("day", at("2026-11-28T20:00:00+00:00"), "Asia/Kolkata")
    assert (day.start, day.end) == (at("2026-11-28T18:30:00+00:00"), at("2026-11-29T18:30:00+00:00"))
    before = window("day", at("2026-11-28T18:29:59+00:00"), "Asia/Kolkata")
    assert before.end == day.start and before.id != day.id


def test_minute_and_hour_windows_and_utc_days_keep_their_counters() -> None:
    now = at("2026-11-28T21:07:30+00:00")
    assert window("minute", now).id == str(int(now // 60)) and window("hour", now).id == str(int(now // 3600))
    assert window("day", now).id == str(int(now // 86400))     # the fixed UTC day's counter: none reset at upgrade
    assert window("total", now).left(now) == 0 and window("total", now).ttl == 0


def key(period: str = "month", zone: str = "UTC") -> CallerKey:
    return CallerKey("team", "0" * 64, budget=Budget(usd=1.0, period=period, timezone=zone))


def test_a_budget_spent_on_november_30_is_fresh_on_december_1() -> None:
    clock = [at("2026-11-30T23:50:00+00:00")]

    async def run() -> tuple[RequestError, float]:
        limits = Limits(MemoryCounters(), clock=lambda: clock[0])
        held = await limits.admit(key(), Decimal("0.5"))
        await limits.settle(key(), held, 0, Decimal("1.0"))          # the whole dollar spent
        with pytest.raises(RequestError) as refused:
            await limits.admit(key(), Decimal("0.01"))
        clock[0] = at("2026-12-01T00:00:00+00:00")
        fresh = await limits.admit(key(), Decimal("0.01"))          # a 30-day window would run to 2026-12-03
        await limits.aclose()
        return refused.value, fresh.nano

    refused, fresh = asyncio.run(run())
    assert refused.status == 429 and refused.kind == "quota" and refused.retry_after == 600
    assert refused.message.endswith("per month; it resets at 2026-12-01 00:00 UTC")
    assert fresh == 10_000_000


def test_a_day_budget_resets_at_the_keys_own_midnight() -> None:
    clock = [at("2026-11-28T23:30:00-08:00")]

    async def run() -> tuple[RequestError, int]:
        limits = Limits(MemoryCounters(), clock=lambda: clock[0])
        la = key("day", "America/Los_Angeles")
        await limits.settle(la, await limits.admit(la, Decimal("0.5")), 0, Decimal("1.0"))
        with pytest.raises(RequestError) as refused:
            await limits.admit(la, Decimal("0.01"))
        clock[0] = at("2026-11-29T00:00:00-08:00")        # 08:00 UTC: the UTC day had begun 8 hours before
        fresh = await limits.admit(la, Decimal("0.01"))
        await limits.aclose()
        return refused.value, fresh.nano

    refused, fresh = asyncio.run(run())
    assert (refused.retry_after, fresh) == (1800, 10_000_000)
    assert refused.message.endswith("it resets at 2026-11-29 00:00 America/Los_Angeles")


def record(ident: str, iso: str, usd: str, who: str = "team") -> LedgerRecord:
    return LedgerRecord(id=ident, ts=at(iso), key=who, route="chat", cost_usd=usd)


def rolled_up_ledger(path: str, records: list[LedgerRecord]) -> Ledger:
    """A ledger holding `records`, all rolled up (closing rolls up the rest), opened again. Its retention counts from
    the newest record, never the machine's clock (which would prune them, then their rollups, in a later year)."""
    newest = max(rec.ts for rec in records)
    ledger = Ledger(path, clock=lambda: newest)
    for rec in records:
        ledger.append(rec)
    ledger.close()
    return Ledger(path, clock=lambda: newest)


def test_a_restart_without_redis_counts_only_this_calendar_months_spend(tmp_path) -> None:
    ledger = rolled_up_ledger(str(tmp_path / "ledger.sqlite"), [
        record("october", "2026-10-31T23:00:00+00:00", "0.40"),     # last month
        record("second", "2026-11-02T09:00:00+00:00", "0.25"),      # this month, before the 30-day window's 3rd
        record("tenth", "2026-11-10T09:00:00+00:00", "0.50")])
    ledger.append(record("fresh", "2026-11-14T09:00:00+00:00", "0.125"))    # not rolled up yet
    limits = Limits(MemoryCounters(), clock=lambda: at("2026-11-15T12:00:00+00:00"))
    policy = SimpleNamespace(keys=(key(),))
    try:
        asyncio.run(Proxy.restore_budgets(SimpleNamespace(settings=Settings(), policy=policy, ledger=ledger,
                                                          limits=limits)))  # type: ignore[arg-type]
        assert asyncio.run(limits.store.get("spend:team:2026-11")) == 875_000_000     # $0.25 + $0.50 + $0.125
    finally:
        ledger.close()


def test_the_restore_counts_a_kolkata_day_from_18_30_utc(tmp_path) -> None:
    ledger = rolled_up_ledger(str(tmp_path / "ledger.sqlite"), [
        record("yesterday", "2026-11-28T18:10:00+00:00", "0.40"),   # 23:40 in Kolkata, the 28th
        record("today", "2026-11-28T18:45:00+00:00", "0.25"),       # 00:15 in Kolkata, the 29th: same UTC hour
        record("later", "2026-11-28T21:00:00+00:00", "0.50")])
    try:
        since = window("day", at("2026-11-28T22:00:00+00:00"), "Asia/Kolkata").start
        assert ledger.spend_pico(since, "key", "team") == 750_000_000_000
    finally:
        ledger.close()


def test_keepalive_caps_count_in_the_policys_calendar(monkeypatch) -> None:
    monkeypatch.setattr("prefixgate.gateway.keepalive.time.time", lambda: at("2026-11-15T12:00:00+00:00"))
    policy = KeepAlivePolicy(on=True, route_usd=1.0, key_usd=0.5, period="month", timezone="America/Los_Angeles")
    session = SimpleNamespace(route=SimpleNamespace(name="chat", keepalive=policy), group=("tenant:t", "team", "chat"))
    caps = KeepAlive._caps(SimpleNamespace(), session)  # type: ignore[arg-type]
    assert [c.counter for c in caps] == ["keepalive:chat:2026-11", "keepalive:chat:team:2026-11"]
    assert (caps[0].since, caps[0].until) == (at("2026-11-01T00:00:00-07:00"), at("2026-12-01T00:00:00-08:00"))


def test_the_dashboards_forecast_uses_the_same_windows() -> None:
    now = at("2026-11-15T12:00:00+00:00")
    assert period_window("month", now) == (at("2026-11-01T00:00:00+00:00"), at("2026-12-01T00:00:00+00:00"))
    assert period_window("day", now, "Asia/Kolkata") == (at("2026-11-15T00:00:00+05:30"), at("2026-11-16T00:00:00+05:30"))


def policy(doc: dict) -> Policy:
    return Policy.from_dict({"routes": [{"name": "chat", "models": ["gpt-*"], "targets": [{"upstream": "openai"}],
                                         "keepalive": {"mode": "on", "route_usd": 5, "key_usd": 1, "period": "day"}}],
                             "keys": [{"name": "team", "key_sha256": "ab" * 32, "budget": {"usd": 5, "period": "day"}},
                                      {"name": "blr", "key_sha256": "cd" * 32,
                                       "budget": {"usd": 5, "period": "day", "timezone": "Asia/Kolkata"}}],
                             **doc}, builtin_upstreams(Settings()))


def test_the_policys_timezone_is_every_calendars_unless_a_key_names_its_own() -> None:
    utc = policy({})
    assert utc.timezone == "UTC" and [k.budget.timezone for k in utc.keys] == ["UTC", "Asia/Kolkata"]  # type: ignore[union-attr]
    la = policy({"timezone": "America/Los_Angeles"})
    assert [k.budget.timezone for k in la.keys] == ["America/Los_Angeles", "Asia/Kolkata"]  # type: ignore[union-attr]
    assert la.routes[0].keepalive.timezone == "America/Los_Angeles"


@pytest.mark.parametrize(("doc", "path"), [({"timezone": "Mars/Olympus_Mons"}, "timezone:"),
                                           ({"timezone": 5}, "timezone:"),
                                           ({"keys": [{"name": "t", "key_sha256": "ab" * 32,
                                                       "budget": {"usd": 1, "timezone": "PST8PDT/Nowhere"}}]},
                                            "keys.0.budget.timezone:")])
def test_a_zone_zoneinfo_does_not_know_is_refused_at_load_naming_its_key(doc: dict, path: str) -> None:
    with pytest.raises(PolicyError) as refused:
        policy(doc)
    assert str(refused.value).startswith(path) and "time zone" in str(refused.value)


def test_utc_needs_no_time_zone_database_and_another_zone_says_what_is_missing(monkeypatch) -> None:
    def no_database(name: str) -> None:
        raise ZoneInfoNotFoundError(f"No time zone found with key {name}")

    monkeypatch.setattr("prefixgate.policies.periods.ZoneInfo", no_database)      # a slim image without tzdata
    monkeypatch.setattr("prefixgate.policies.periods.available_timezones", set)
    assert window("month", at("2026-11-15T12:00:00+00:00")).start == at("2026-11-01T00:00:00+00:00")
    assert zone_error("UTC") == "" and "pip install tzdata" in zone_error("Asia/Kolkata")


def test_a_shared_store_takes_the_thirty_day_months_spend_into_the_calendar_month_once(redis_url) -> None:
    # Before calendar months a "month" was 30 days from the epoch, named by its index: 2026-11-15 fell in the
    # one that began on 2026-11-03 (within November), 2026-12-02 still in it (begun before December).
    month_key = key()
    index = int(at("2026-11-15T12:00:00+00:00") // (30 * 86400))

    async def run() -> tuple[float, float]:
        seed = RedisCounters(redis_url)
        await seed.add(f"spend:team:{index}", 300_000_000, 86400)      # what the key spent before the upgrade
        replicas = [Limits(RedisCounters(redis_url), clock=lambda: at("2026-11-15T12:00:00+00:00")) for _ in range(3)]
        for limits in replicas:                                        # three replicas start, one restarts
            await limits.carry_thirty_days(month_key)
        await replicas[0].carry_thirty_days(month_key)
        december = Limits(seed, clock=lambda: at("2026-12-02T12:00:00+00:00"))
        await december.carry_thirty_days(month_key)
        november, after = await seed.get("spend:team:2026-11"), await seed.get("spend:team:2026-12")
        for store in [seed] + [r.store for r in replicas]:
            await store.close()
        return november, after

    assert asyncio.run(run()) == (300_000_000, 0)


class Counted:
    """A counter store that counts the calls made to it."""

    def __init__(self, store: RedisCounters) -> None:
        self.store, self.calls = store, 0

    def __getattr__(self, name: str):  # noqa: ANN204 -- the store's own methods, counted
        method = getattr(self.store, name)

        async def counted(*args: object, **kwargs: object) -> object:
            self.calls += 1
            return await method(*args, **kwargs)

        return counted


def test_the_thirty_day_carry_is_made_once_per_key_and_later_starts_add_nothing(redis_url) -> None:
    # 30-day windows (from the epoch) began on 2026-11-03, 2026-12-03 and 2027-01-02: each within its calendar month.
    month_key = key()
    first = at("2026-11-15T12:00:00+00:00")
    later = [at("2026-11-20T12:00:00+00:00"), at("2026-12-05T12:00:00+00:00"), at("2027-01-10T12:00:00+00:00")]

    async def run() -> tuple[list[int], float, list[bytes]]:
        store = Counted(RedisCounters(redis_url))
        await store.store.add(f"spend:team:{int(first // (30 * 86400))}", 300_000_000, 86400)
        await Limits(store, clock=lambda: first).carry_thirty_days(month_key)  # type: ignore[arg-type]
        calls = []
        for now in later:
            store.calls = 0
            await Limits(store, clock=lambda now=now: now).carry_thirty_days(month_key)  # type: ignore[arg-type]
            calls.append(store.calls)
        kept = sorted(await store.store._redis.keys(RedisCounters.PREFIX + "*"))
        november = await store.get("spend:team:2026-11")
        await store.close()
        return calls, november, kept

    calls, november, kept = asyncio.run(run())
    assert calls == [1, 1, 1] and november == 300_000_000
    # The key's spend, the earlier version's counter and the carry's one mark: no counter or mark for later months.
    assert [k.decode().removeprefix(RedisCounters.PREFIX) for k in kept] == [
        "carried:team", "spend:team:2026-11", f"spend:team:{int(first // (30 * 86400))}"]


def test_a_fleet_that_carried_with_the_per_month_mark_does_not_carry_again(redis_url) -> None:
    # 6cf7fce marked its carry carried:<key>:<month>: a fleet upgrading from it within November has made the carry,
    # and the 30-day counter still holds what it carried (nothing has written it since).
    month_key = key()
    now = at("2026-11-29T12:00:00+00:00")
    index = int(now // (30 * 86400))

    async def run() -> float:
        store = RedisCounters(redis_url)
        await store.add(f"spend:team:{index}", 300_000_000, 86400)
        await store.add("carried:team:2026-11", 1, 86400)
        await store.add("spend:team:2026-11", 300_000_000 + 50_000_000, 86400)   # the carry and spend since
        await Limits(store, clock=lambda: now).carry_thirty_days(month_key)
        november = await store.get("spend:team:2026-11")
        await store.close()
        return november

    assert asyncio.run(run()) == 350_000_000


def test_a_key_moved_to_another_zone_goes_on_with_the_counter_of_the_same_date() -> None:
    # docs/gateway.md: a counter is named by its window's local date. Pacific/Kiritimati is UTC+14 all year: its 29th
    # began at 10:00 UTC on the 28th.
    clock = [at("2026-11-28T20:00:00+00:00")]

    async def run() -> tuple[RequestError, int]:
        limits = Limits(MemoryCounters(), clock=lambda: clock[0])
        kiritimati, utc = key("day", "Pacific/Kiritimati"), key("day", "UTC")
        await limits.settle(kiritimati, await limits.admit(kiritimati, Decimal("0.5")), 0, Decimal("1.0"))
        clock[0] = at("2026-11-29T05:00:00+00:00")       # the policy now says UTC
        with pytest.raises(RequestError) as refused:
            await limits.admit(utc, Decimal("0.01"))
        clock[0] = at("2026-11-30T00:00:00+00:00")
        fresh = await limits.admit(utc, Decimal("0.01"))
        await limits.aclose()
        return refused.value, fresh.nano

    refused, fresh = asyncio.run(run())
    assert (refused.kind, refused.retry_after, fresh) == ("quota", 19 * 3600, 10_000_000)
