"""Rollup sums a newer version adds (`ledger_rollup.SUMS`), brought into a ledger an older version wrote;
and the record columns it adds (`add_record_columns`, for SQLite and Postgres alike).

The missing columns are added in place (default 0) and filled in from the records that were already
rolled up, in the same transaction, so a reader sees either the old table or the new one complete; the
records not yet rolled up get every sum the usual way. Hour rollups whose records retention has already
deleted (older than `ledger_retention_days`) keep 0 in the new columns: their records are gone. SQLite
and Postgres (`ledger_postgres`) run the same fill with their own SQL. Rollups older than tenant rows also
have their records marked for those rows in the same transaction (ledger_tenant_backfill).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterable

from prefixgate import ledger_tenant_backfill as tenant_backfill
from prefixgate.ledger_rollup import BATCH, SUM_TYPE, SUMS, aggregate, cursor

log = logging.getLogger("prefixgate.ledger")


def add_record_columns(table: str, have: Iterable[str], wanted: list[tuple[str, str]]) -> list[str]:
    """ALTER statements giving a records table the (name, SQL type) columns a newer version added: old
    rows read them as NULL, which the record reads as the field's "said nothing" value."""
    present = set(have)
    # SQL text: table and column names are the ledger's constants.
    return [f"ALTER TABLE {table} ADD COLUMN {name} {sql_type}" for name, sql_type in wanted if name not in present]


def missing_sums(have: Iterable[str]) -> list[str]:
    """The SUMS columns a rollup table with columns `have` lacks, in SUMS order."""
    present = set(have)
    return [s for s in SUMS if s not in present]


def add_columns(table: str, missing: list[str]) -> list[str]:
    # SQL text: table and column names are this module's constants.
    return [f"ALTER TABLE {table} ADD COLUMN {s} {SUM_TYPE}" for s in missing]


def fill(table: str, missing: list[str]) -> str:
    """The statement adding a batch's share of the `missing` sums to the rows it rolled up into."""
    # SQL text: table and column names are this module's constants; values are bound.
    return (f"UPDATE {table} SET {', '.join(f'{s} = {s} + ?' for s in missing)} "  # nosec B608
            "WHERE res = ? AND bucket = ? AND dim = ? AND name = ?")


def fill_rows(records: Iterable[dict], missing: list[str]) -> list[tuple]:
    """Parameters of `fill` for decoded records that are already in the rollups (rollups from before tenant rows
    have none of those to fill in: they are built whole, ledger_tenant_backfill)."""
    index = [SUMS.index(s) for s in missing]
    by_tenant = not tenant_backfill.predates_tenant_rows(missing)
    return [(*(agg.sums[i] for i in index), *key) for key, agg in aggregate(records, by_tenant=by_tenant).items()]


def add_missing_sums(db: sqlite3.Connection, columns: list[str], decode: Callable[[dict], dict]) -> list[str]:
    """Bring a SQLite ledger's `rollups` up to SUMS (`db` in autocommit mode). Returns the columns added."""
    missing = missing_sums(row[1] for row in db.execute("PRAGMA table_info(rollups)"))
    if not missing:
        return []
    db.execute("BEGIN IMMEDIATE")
    try:
        for statement in add_columns("rollups", missing):
            db.execute(statement)
        last, upto, filled = 0, cursor(db), 0
        while True:
            # SQL text: table and column names are the ledger's constants; values are bound.
            rows = db.execute(f"SELECT rowid, {', '.join(columns)} FROM requests WHERE rowid > ? AND rowid <= ? "  # nosec B608
                              f"ORDER BY rowid LIMIT {BATCH}", (last, upto)).fetchall()
            if not rows:
                break
            records = [decode(dict(zip(columns, row[1:], strict=True))) for row in rows]
            db.executemany(fill("rollups", missing), fill_rows(records, missing))
            last, filled = rows[-1][0], filled + len(rows)
        tenant_backfill.mark(db, missing, upto)
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    log.info("ledger rollups gained %s, filled in from %d kept record(s)", ", ".join(missing), filled)
    return missing
