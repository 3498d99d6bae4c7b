"""Without Redis a restart starts budgets and keep-alive's caps from the ledger: from its rollups (hours kept 400 days,
the minutes of keys, routes and keep-alive pairs a month), not its raw records, which `ledger_retention_days` (30 by
default) deletes before a 31-day month ends. The instants are the calendar's: December has 31 days, and a month in
Asia/Kolkata (UTC+05:30 all year) starts at 18:30 UTC on the last day of the month before."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import datetime
from types import SimpleNamespace

import pytest

from prefixgate.config import Settings
from prefixgate.gateway.keepalive import KeepAlive
from prefixgate.gateway.proxy import Proxy
from prefixgate.gateway.state import MemoryCounters
from prefixgate.ledger import Ledger, LedgerRecord, read_records
from prefixgate.policies import Limits
from prefixgate.policies.keepalive import KeepAlivePolicy
from prefixgate.policies.schema import Budget, CallerKey
from tests.support_services import wait_until

NEW_YEARS_EVE = "2026-12-31T06:00:00+00:00"     # 11:30 in Kolkata: its December's last day too


def at(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def refresh(ident: str, iso: str, usd: str, key: str = "team", route: str = "chat") -> LedgerRecord:
    return LedgerRecord(id=ident, ts=at(iso), key=key, route=route, cost_usd=usd, kind="keepalive")


def pruned_ledger(path: str, records: list[LedgerRecord], gone: set[str]) -> Ledger:
    """A ledger holding `records`, rolled up (closing rolls up the rest) and opened again on New Year's Eve, once its
    pruning (30 days' records, the default) has deleted the records `gone`. Its retention counts from the test's
    instants, never the machine's (which would prune these records, then their rollups, in a later year)."""
    ledger = Ledger(path, clock=lambda: at(NEW_YEARS_EVE) - 86400)
    for rec in records:
        ledger.append(rec)
    ledger.close()
    ledger = Ledger(path, clock=lambda: at(NEW_YEARS_EVE))
    wait_until(lambda: not gone & {r["id"] for r in read_records(path)}, 10, "pruning the month's first records")
    return ledger


def restored_caps(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """What a restarted gateway's month caps of key `team` on route `chat` start from: route cap, key cap."""
    monkeypatch.setattr("prefixgate.gateway.keepalive.time.time", lambda: at(NEW_YEARS_EVE))
    proxy = SimpleNamespace(settings=SimpleNamespace(redis_url=""), counters=MemoryCounters(), ledger=ledger)
    policy = KeepAlivePolicy(on=True, route_usd=5.0, key_usd=1.0, period="month")
    session = SimpleNamespace(route=SimpleNamespace(name="chat", keepalive=policy), group=("tenant:t", "team", "chat"))
    keepalive = SimpleNamespace(proxy=proxy, _restored={})
    caps = KeepAlive._caps(keepalive, session)  # type: ignore[arg-type]

    async def run() -> list[float]:
        for cap in caps:
            await KeepAlive._restore(keepalive, cap)  # type: ignore[arg-type]
        return [await proxy.counters.get(cap.counter) for cap in caps]

    return asyncio.run(run())


def test_a_month_cap_restored_on_its_31st_day_counts_the_refreshes_of_its_first(tmp_path, monkeypatch) -> None:
    ledger = pruned_ledger(str(tmp_path / "ledger.sqlite"), [
        refresh("november", "2026-11-30T23:00:00+00:00", "0.5"),               # last month
        refresh("first", "2026-12-01T02:00:00+00:00", "0.25"),                 # deleted by the 31st
        refresh("other-key", "2026-12-01T03:00:00+00:00", "0.5", key="ops"),   # the route's, not the key's
        refresh("other-route", "2026-12-01T04:00:00+00:00", "2", route="docs"),
        refresh("mid", "2026-12-15T12:00:00+00:00", "0.125")], gone={"first", "other-key", "other-route"})
    try:
        # Route cap: $0.25 + $0.5 + $0.125; key cap: $0.25 + $0.125 (in nanodollars).
        assert restored_caps(ledger, monkeypatch) == [875_000_000, 375_000_000]
    finally:
        ledger.close()


def test_refreshes_rolled_up_before_keepalive_pairs_existed_are_counted_in_the_key_cap(tmp_path, monkeypatch) -> None:
    path = str(tmp_path / "ledger.sqlite")
    ledger = Ledger(path, clock=lambda: at(NEW_YEARS_EVE))
    ledger.append(refresh("early", "2026-12-20T12:00:00+00:00", "0.25"))
    ledger.close()
    db = sqlite3.connect(path)      # as an older version left it: rolled up, and no (route, key) rows
    with db:
        db.execute("DELETE FROM rollups WHERE dim = 'keepalive_pair'")
        db.execute("DELETE FROM ledger_meta WHERE key = 'keepalive_pairs'")
    db.close()
    ledger = Ledger(path, clock=lambda: at(NEW_YEARS_EVE))
    ledger.append(refresh("late", "2026-12-30T12:00:00+00:00", "0.125"))       # beyond the cursor: the records
    try:
        assert restored_caps(ledger, monkeypatch) == [375_000_000, 375_000_000]
    finally:
        ledger.close()


def test_a_kolkata_month_restored_on_its_last_day_counts_its_first_half_hour(tmp_path) -> None:
    ledger = pruned_ledger(str(tmp_path / "ledger.sqlite"), [
        LedgerRecord(id="november", ts=at("2026-11-30T18:10:00+00:00"), key="team", cost_usd="0.40"),  # 23:40 IST
        LedgerRecord(id="first", ts=at("2026-11-30T18:45:00+00:00"), key="team", cost_usd="0.25"),     # 00:15 IST
        LedgerRecord(id="mid", ts=at("2026-12-15T12:00:00+00:00"), key="team", cost_usd="0.5")], gone={"first"})
    month_key = CallerKey("team", "0" * 64, budget=Budget(usd=1.0, period="month", timezone="Asia/Kolkata"))
    limits = Limits(MemoryCounters(), clock=lambda: at(NEW_YEARS_EVE))
    proxy = SimpleNamespace(settings=Settings(), policy=SimpleNamespace(keys=(month_key,)), ledger=ledger, limits=limits)
    try:
        asyncio.run(Proxy.restore_budgets(proxy))  # type: ignore[arg-type]
        assert asyncio.run(limits.store.get("spend:team:2026-12")) == 750_000_000     # $0.25 + $0.50
    finally:
        ledger.close()
