"""A ledger written before the rollups kept the cost check (provider-reported cost beside the price table's,
disagreements, requests priced by the provider alone) gains those columns when a newer gateway opens it,
filled in from its kept records exactly as if they had been rolled up with them: in SQLite, and in the
fleet's Postgres."""

from __future__ import annotations

import sqlite3
import time
from dataclasses import replace
from decimal import Decimal

import psycopg
from psycopg_pool import ConnectionPool

from prefixgate.ledger import Ledger, LedgerRecord, read_records
from prefixgate.ledger_postgres import PostgresSync, create_tables
from prefixgate.ledger_rollup import SUMS
from tests.support_services import empty_postgres_ledger, wait_until

NOW = time.time()
ADDED = ("priced_by_provider", "compared", "provider_cost_pico", "table_cost_pico", "cost_disagreements",
         "disagreeing_provider_pico", "disagreeing_table_pico")


def record(i: int) -> LedgerRecord:
    """Every pricing case in turn: table only, table and an agreeing report, a disagreeing one (5% over), the
    provider's report alone, and neither (unpriced)."""
    cost = Decimal(i % 13 + 1) * Decimal("0.000001234567")
    table, reported = [(cost, None), (cost, cost), (cost, cost * Decimal("1.05")), (None, cost), (None, None)][i % 5]
    return LedgerRecord(id=f"r{i}", ts=NOW - 7200 + i, route=f"route{i % 3}", model=f"m{i % 2}", provider="openrouter",
                        uncached_input=i % 50, output=i % 13, cost_usd=str(table or reported) if (table or reported) else None,
                        cost_without_cache_usd=str(table * 2) if table else None, savings_usd=str(table) if table else None,
                        provider_cost_usd=str(reported) if reported else None, latency_ms=1.0)


def rollups(rows: list[tuple]) -> dict[tuple, tuple]:
    return {tuple(r[:4]): tuple(r[4:]) for r in rows}


def sqlite_rollups(path: str) -> dict[tuple, tuple]:
    with sqlite3.connect(path) as db:
        return rollups(db.execute(f"SELECT res, bucket, dim, name, {', '.join(SUMS)} FROM rollups").fetchall())


def write(path: str, ids: range) -> None:
    ledger = Ledger(path)
    for i in ids:
        ledger.append(record(i))
    ledger.close()


def test_an_older_sqlite_ledger_gains_the_cost_check_filled_in(tmp_path):
    path, fresh = str(tmp_path / "ledger.sqlite"), str(tmp_path / "fresh.sqlite")
    write(path, range(500))
    current = sqlite_rollups(path)
    assert sum(v[SUMS.index("cost_disagreements")] for k, v in current.items() if k[2] == "") == 2 * 100   # minute + hour
    # The file as an older version left it: rollups without the cost-check columns.
    with sqlite3.connect(path) as db:
        for column in ADDED:
            db.execute(f"ALTER TABLE rollups DROP COLUMN {column}")
    write(path, range(500, 600))        # and newer records, rolled up the usual way after the migration
    write(fresh, range(600))
    assert sqlite_rollups(path) == sqlite_rollups(fresh)


def test_an_older_postgres_ledger_gains_the_cost_check_filled_in(tmp_path, postgres_url):
    empty_postgres_ledger(postgres_url)
    ledger = Ledger(str(tmp_path / "ledger.sqlite"), ledger_url=postgres_url)
    for i in range(300):
        ledger.append(record(i))
    copy = next(c for c in ledger.copies if isinstance(c, PostgresSync))
    wait_until(lambda: copy.position >= 300, 20, "the records copied to Postgres")
    ledger.close()
    query = f"SELECT res, bucket, dim, name, {', '.join(SUMS)} FROM prefixgate_rollups"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        current = rollups(conn.execute(query).fetchall())
        for column in ADDED:
            conn.execute(f"ALTER TABLE prefixgate_rollups DROP COLUMN {column}")
    assert any(v[SUMS.index("compared")] for v in current.values())
    with ConnectionPool(postgres_url, min_size=1, max_size=1) as pool:
        create_tables(pool)
        create_tables(pool)         # a second replica starting: nothing left to add
    with psycopg.connect(postgres_url) as conn:
        assert rollups(conn.execute(query).fetchall()) == current


PROVIDER_COLUMNS = ("provider_miss_reason", "provider_missed_tokens")


def test_older_ledgers_gain_the_provider_reason_columns(tmp_path, postgres_url):
    """A SQLite file and a fleet Postgres written before provider diagnostics: both gain the record columns when
    a newer gateway opens them, old rows read as "said nothing", and new rows carry the provider's reason."""
    path = str(tmp_path / "ledger.sqlite")
    write(path, range(10))
    with sqlite3.connect(path) as db:
        for column in PROVIDER_COLUMNS:
            db.execute(f"ALTER TABLE requests DROP COLUMN {column}")
    empty_postgres_ledger(postgres_url)
    with ConnectionPool(postgres_url, min_size=1, max_size=1) as pool:
        create_tables(pool)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for column in PROVIDER_COLUMNS:
            conn.execute(f"ALTER TABLE prefixgate_requests DROP COLUMN {column}")
    ledger = Ledger(path, ledger_url=postgres_url)
    ledger.append(replace(record(10), provider_miss_reason="tools_changed", provider_missed_tokens=1800))
    copy = next(c for c in ledger.copies if isinstance(c, PostgresSync))
    wait_until(lambda: copy.position >= 11, 20, "the records copied to Postgres")
    ledger.close()
    rows = {r["id"]: r for r in read_records(path)}
    assert (rows["r10"]["provider_miss_reason"], rows["r10"]["provider_missed_tokens"]) == ("tools_changed", 1800)
    assert rows["r3"]["provider_miss_reason"] is None and rows["r3"]["provider_missed_tokens"] is None
    with psycopg.connect(postgres_url) as conn:
        found = dict(((i, (r, t)) for i, r, t in conn.execute(
            "SELECT id, provider_miss_reason, provider_missed_tokens FROM prefixgate_requests")))
    assert found["r10"] == ("tools_changed", 1800) and found["r3"] == (None, None) and len(found) == 11
