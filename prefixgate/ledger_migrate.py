"""Rollup sums a newer version adds (`ledger_rollup.SUMS`), brought into a ledger an older version wrote;
and the record columns it adds (`add_record_columns`, for SQLite and Postgres alike).

The missing columns are added in place (default 0) and filled in from the records that were already
rolled up, in the same transaction, so a reader sees either the old table or the new one complete; the
records not yet rolled up get every sum the usual way. Hour rollups whose records retention has already
deleted (older than `ledger_retention_days`) keep 0 in the new columns: their records are gone. SQLite
and Postgres (`ledger_postgres`) run the same fill with their own SQL. Rollups older than tenant rows also
have their records marked for those rows in the same transaction (ledger_tenant_backfill). Keep-alive refreshes an
older version rolled up get their (route, key) rows (ledger_rollup.KEEPALIVE_PAIR) once, from the records still kept
(`add_keepalive_pairs`): keep-alive's per-key caps restart from them.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from prefixgate import ledger_tenant_backfill as tenant_backfill
from prefixgate.ledger_rollup import (
    BATCH,
    KEEPALIVE_PAIR,
    SUM_TYPE,
    SUMS,
    UPSERT_ROLLUP,
    aggregate,
    cursor,
    upsert_rows,
)

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
    filled = 0
    with _immediate(db):
        for statement in add_columns("rollups", missing):
            db.execute(statement)
        for records in _rolled_up(db, columns, decode):
            db.executemany(fill("rollups", missing), fill_rows(records, missing))
            filled += len(records)
        tenant_backfill.mark(db, missing, cursor(db))
    log.info("ledger rollups gained %s, filled in from %d kept record(s)", ", ".join(missing), filled)
    return missing


PAIRS_BUILT = "keepalive_pairs"     # ledger_meta: every rolled-up refresh is in its KEEPALIVE_PAIR rows


def add_keepalive_pairs(db: sqlite3.Connection, columns: list[str], decode: Callable[[dict], dict]) -> int:
    """Add the keep-alive refreshes rolled up before KEEPALIVE_PAIR rows existed to theirs, once per ledger, in one
    transaction with its mark (`db` in autocommit mode). Returns the records added."""
    built = "SELECT 1 FROM ledger_meta WHERE key = ?"
    if db.execute(built, (PAIRS_BUILT,)).fetchone():
        return 0
    added = 0
    with _immediate(db):
        if db.execute(built, (PAIRS_BUILT,)).fetchone():     # another process opening this ledger built them meanwhile
            return 0
        for records in _rolled_up(db, columns, decode, "AND kind = 'keepalive'"):
            pairs = {key: agg for key, agg in aggregate(records).items() if key[2] == KEEPALIVE_PAIR}
            db.executemany(UPSERT_ROLLUP, upsert_rows(pairs)[0])
            added += len(records)
        db.execute("INSERT INTO ledger_meta VALUES (?, ?)", (PAIRS_BUILT, str(cursor(db))))
    if added:
        log.info("ledger: keep-alive's (route, key) rollups built for %d refresh(es) kept from before them", added)
    return added


@contextmanager
def _immediate(db: sqlite3.Connection) -> Iterator[None]:
    """One write transaction (`db` in autocommit mode): committed, or rolled back on any exception."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _rolled_up(db: sqlite3.Connection, columns: list[str], decode: Callable[[dict], dict], where: str = ""
               ) -> Iterator[list[dict]]:
    """The records already rolled up (and `where`, a constant condition), decoded, a batch at a time."""
    last, upto = 0, cursor(db)
    while True:
        # SQL text: table and column names are the ledger's constants, `where` this module's; values are bound.
        rows = db.execute(f"SELECT rowid, {', '.join(columns)} FROM requests WHERE rowid > ? AND rowid <= ? {where} "  # nosec B608
                          f"ORDER BY rowid LIMIT {BATCH}", (last, upto)).fetchall()
        if not rows:
            return
        yield [decode(dict(zip(columns, row[1:], strict=True))) for row in rows]
        last = rows[-1][0]
