"""A fleet on a shared PostgreSQL ledger (`ledger_url`), against a real server: two replicas, each
showing both replicas' requests exactly once; the copy resumes without loss or double counting when
Postgres goes away and comes back; the rollups in Postgres equal a scan of its records."""

from __future__ import annotations

from decimal import Decimal

import httpx
import psycopg
import pytest

from prefixgate.gateway.dashboard.source import PostgresSource
from prefixgate.ledger import Ledger, LedgerRecord, read_records
from tests.gateway.dashboard.support_scenario import burst, dashboard_gateway
from tests.support_services import empty_postgres_ledger, wait_until


@pytest.fixture
def shared(postgres_url):
    """The shared database, emptied of an earlier test's tables."""
    return empty_postgres_ledger(postgres_url)


def fleet_totals(url: str) -> dict:
    return httpx.get(url + "/api/summary", params={"range": "1h"}).json()


def pg_scan(url: str) -> tuple[int, int, int]:
    """(records, their spend in picodollars, the rollups' spend over all records) in Postgres."""
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT cost_usd FROM prefixgate_requests").fetchall()
        rolled = conn.execute("SELECT coalesce(sum(spend_pico), 0) FROM prefixgate_rollups WHERE res = 3600 AND dim = ''"
                              ).fetchone()[0]
    return len(rows), sum(int(Decimal(c) * 10**12) for (c,) in rows if c), rolled


def test_two_replicas_on_one_postgres_each_show_both_replicas_requests_once(tmp_path, shared):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with dashboard_gateway(tmp_path / "a", ledger_url=shared) as a, dashboard_gateway(tmp_path / "b", ledger_url=shared) as b:
        burst(a.url, rounds=3)
        burst(b.url, rounds=2)
        wait_until(lambda: fleet_totals(a.url)["totals"]["requests"] >= 10, 20, "both replicas' records in Postgres")
        seen_a, seen_b = fleet_totals(a.url), fleet_totals(b.url)
        ids_a = {r["id"] for r in httpx.get(a.url + "/api/requests").json()["records"]}
        ids_b = {r["id"] for r in httpx.get(b.url + "/api/requests").json()["records"]}
    local = read_records(a.settings.ledger_path) + read_records(b.settings.ledger_path)
    assert len(local) == 10
    assert seen_a["window"]["source"] == seen_b["window"]["source"] == "postgres"
    for seen in (seen_a, seen_b):
        assert seen["totals"]["requests"] == 10
        assert Decimal(seen["totals"]["spend_usd"]) == sum(Decimal(r["cost_usd"]) for r in local)
    assert ids_a == ids_b == {r["id"] for r in local}
    records, spend, rolled = pg_scan(shared)
    assert records == 10 and spend == rolled


def test_the_copy_waits_out_a_postgres_outage_and_counts_each_record_once(tmp_path, shared):
    # A URL nothing listens on: the ledger keeps every record locally and copies nothing.
    down = "postgresql://prefixgate@127.0.0.1:9/postgres"
    ledger = Ledger(str(tmp_path / "l.sqlite"), ledger_url=down)
    for i in range(30):
        ledger.append(LedgerRecord(id=f"q{i}", ts=1e9 + i, route="r", cost_usd="0.000123456789", uncached_input=10))
    ledger.close()
    # The same file, Postgres reachable: the rows go over, and a second open copies nothing again.
    for _ in range(2):
        ledger = Ledger(str(tmp_path / "l.sqlite"), ledger_url=shared, clock=lambda: 1e9 + 60)
        ledger.append(LedgerRecord(id=f"late{_}", ts=1e9 + 40, route="r", cost_usd="0.000000000001", uncached_input=1))
        ledger.close()
    records, spend, rolled = pg_scan(shared)
    assert records == 32
    assert spend == rolled == 30 * 123456789 + 2


def test_with_postgres_down_requests_are_answered_and_recorded_and_the_dashboard_says_so(tmp_path):
    down = "postgresql://prefixgate@127.0.0.1:9/postgres"
    with dashboard_gateway(tmp_path, ledger_url=down) as gw:
        answers = burst(gw.url, rounds=1)
        summary = httpx.get(gw.url + "/api/summary", timeout=30)
    assert [a.status_code for a in answers] == [200, 200]
    assert len(read_records(gw.settings.ledger_path)) == 2
    assert summary.status_code == 503 and "postgres ledger cannot be read" in summary.text


def test_the_postgres_source_reads_a_route_and_a_tenant_however_they_are_spelled(tmp_path, shared):
    ledger = Ledger(str(tmp_path / "l.sqlite"), ledger_url=shared, clock=lambda: 1e9 + 60)
    for i, (tenant, route) in enumerate([("acme", "chat"), ("beta", "chat"), ("acme", "batch"), ("", "chat")]):
        ledger.append(LedgerRecord(id=f"r{i}", ts=1e9 + i, tenant=tenant, route=route, uncached_input=10))
    ledger.close()
    assert pg_scan(shared)[0] == 4
    source = PostgresSource(shared)
    try:
        # `?route=` (empty) is a route no request has: no records, not a query missing its parameter.
        assert source.records(1e9, 1e9 + 10, route="") == []
        # `?route=%00`: Postgres text holds no NUL, so no record has it (psycopg refuses to send it: was a 503).
        assert source.records(1e9, 1e9 + 10, route="chat\x00") == []
        assert [r.id for r in source.records(1e9, 1e9 + 10, tenant="acme")] == ["r0", "r2"]
        assert [r.id for r in source.records(1e9, 1e9 + 10, route="chat", tenant="acme", latest=5)] == ["r0"]
        assert [r.id for r in source.records(1e9, 1e9 + 10, tenant="acme", latest=1)] == ["r2"]
    finally:
        source.close()
