"""A hit-rate drop alert asked in the first minutes of an hour. A view of the rollups reads whole hours and, of the
per-route minutes, only those at the window's edges (a month's view would otherwise copy every route's every
minute); the alert splits its view into the last 5 minutes and the hour before them, and a part ending inside an
hour reads that hour's minutes. Asked before HH:05, the baseline's last hour was read from minutes the view did not
hold: the route showed no baseline requests and the alert never fired (the project's CI run 47 failed so, in
`test_dashboard_hit_rate.py`, at 14:0x). The view now takes the points where its readers split it
(`LedgerSource.view(cuts=...)`), over Postgres and a tenant's SQLite view alike (the Redis stream's view is rolled
up whole)."""

from __future__ import annotations

import pytest

from prefixgate.gateway.dashboard.alerts import AlertRule, alert_cuts, route_alerts
from prefixgate.gateway.dashboard.source import PostgresSource, SqliteSource
from prefixgate.ledger import Ledger, LedgerRecord
from tests.support_services import empty_postgres_ledger

HOUR = 3600
NOW = 1_000_000_000 - 1_000_000_000 % HOUR + 2 * HOUR + 120     # two minutes past an hour
CALLER = dict(route="chat", model="gpt-5.4", key="app", tenant="acme", target="openai", provider="openai")


def records() -> list[LedgerRecord]:
    """Half an hour before: 5 requests reading 800 of 1000 prompt tokens (80%); in the last 5 minutes, 5 reading 200
    of 1000 (20%): a drop of 75%, past the rule's 50%."""
    early = [LedgerRecord(id=f"early-{i}", ts=NOW - 1800 + 10 * i, uncached_input=200, cache_read=800, output=10,
                          cost_usd="0.001", **CALLER) for i in range(5)]
    late = [LedgerRecord(id=f"late-{i}", ts=NOW - 200 + 5 * i, uncached_input=800, cache_read=200, output=10,
                         cost_usd="0.002", **CALLER) for i in range(5)]
    return early + late


@pytest.mark.parametrize("store", ["postgres", "sqlite tenant"])
def test_a_drop_alert_asked_just_after_the_hour_sees_its_baseline(tmp_path, request, store) -> None:
    url = empty_postgres_ledger(request.getfixturevalue("postgres_url")) if store == "postgres" else ""
    ledger = Ledger(str(tmp_path / "ledger.sqlite"), ledger_url=url, clock=lambda: NOW)
    for rec in records():
        ledger.append(rec)
    ledger.close()      # its last roll-up (and copy): the view reads rollups, not the records
    source = PostgresSource(url) if url else SqliteSource(str(tmp_path / "ledger.sqlite"))
    rule = AlertRule()
    try:
        with source.view(NOW - rule.window_s - rule.baseline_s, NOW, tenant=None if url else "acme",
                         cuts=alert_cuts(NOW, rule)) as view:
            alerts = route_alerts(view, NOW, rule)
    finally:
        source.close()
    assert [(a.route, a.requests, a.baseline_requests, a.firing) for a in alerts] == [("chat", 5, 5, True)]
    assert (alerts[0].hit_rate, alerts[0].baseline_hit_rate) == (pytest.approx(0.2), pytest.approx(0.8))
