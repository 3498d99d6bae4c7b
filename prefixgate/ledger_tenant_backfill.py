"""Tenant rows for the records a ledger rolled up before rollups kept them, built from the records it still keeps.

Tenant-scoped rollup rows (ledger_rollup.scoped) came in the same version as the `gateway_rows` sum, so a
ledger whose rollups lack that column rolled every record up to its cursor without them. When ledger_migrate
adds the column it also marks those records pending, in the same transaction: the mark commits with the new
schema, and a ledger reopened later has the column and is never marked again (a tenant that simply had no
traffic is no sign of anything). The ledger thread then adds the pending records of a tenant to that tenant's
rows, one batch per tick, each batch in one transaction that also moves the mark: a crash neither skips a
record nor adds one twice, and the records rolled up after the upgrade, which got their tenant rows then, are
never pending. Records retention already deleted are not there to add: their hours stay in the operator's
figures only.

SQLite marks a range of rowids (its records are rolled up in rowid order); Postgres (ledger_postgres) marks the
ids of the tenants' records it held, since its records have no order of copying.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

from prefixgate.ledger_rollup import BATCH, UPSERT_HIST, UPSERT_ROLLUP, aggregate, upsert_rows

# The rollup sum that came with tenant rows: rollups without it were written without them.
PREDATES = "gateway_rows"
PENDING = "tenant_rows_pending"     # ledger_meta: "<last rowid done> <last rowid pending>"

log = logging.getLogger("prefixgate.ledger")


def predates_tenant_rows(missing: list[str]) -> bool:
    """Whether rollups lacking the sums `missing` were written before tenant rows existed."""
    return PREDATES in missing


def tenant_rows(records: list[dict]) -> tuple[list[tuple], list[tuple]]:
    """Parameters for UPSERT_ROLLUP and UPSERT_HIST adding decoded records to their tenants' rows alone."""
    return upsert_rows(aggregate(records, tenants_only=True))


def mark(db: sqlite3.Connection, missing: list[str], rolled_up_to: int) -> None:
    """In ledger_migrate's transaction: the records up to `rolled_up_to` are pending if the rollups predate tenant rows."""
    if predates_tenant_rows(missing) and rolled_up_to:
        db.execute("INSERT OR REPLACE INTO ledger_meta VALUES (?, ?)", (PENDING, f"0 {rolled_up_to}"))
        log.info("ledger: tenant rows to be built for records up to rowid %d (rolled up before tenant rows existed)",
                 rolled_up_to)


def _pending(db: sqlite3.Connection) -> tuple[int, int] | None:
    row = db.execute("SELECT value FROM ledger_meta WHERE key = ?", (PENDING,)).fetchone()
    if row is None:
        return None
    done, upto = row[0].split()
    return int(done), int(upto)


def backfill(db: sqlite3.Connection, columns: list[str], decode: Callable[[dict], dict],
             appends: AbstractContextManager = nullcontext()) -> bool:
    """Add the next batch of pending records to their tenants' rows (`db` in autocommit mode; `appends` as in
    ledger_rollup.roll_up). Returns whether records are still pending."""
    pending = _pending(db)
    if pending is None:
        return False
    done, upto = pending
    # SQL text: table and column names are the ledger's constants, the batch a constant; values are bound.
    rows = db.execute(f"SELECT rowid, {', '.join(columns)} FROM requests WHERE rowid > ? AND rowid <= ? "  # nosec B608
                      f"AND tenant != '' ORDER BY rowid LIMIT {BATCH}", (done, upto)).fetchall()
    rollups, hist = tenant_rows([decode(dict(zip(columns, row[1:], strict=True))) for row in rows])
    finished = len(rows) < BATCH
    with appends:
        db.execute("BEGIN IMMEDIATE")
        try:
            if _pending(db) != pending:
                db.execute("ROLLBACK")      # another process sharing this ledger took this batch meanwhile
                return True
            db.executemany(UPSERT_ROLLUP, rollups)
            db.executemany(UPSERT_HIST, hist)
            if finished:
                db.execute("DELETE FROM ledger_meta WHERE key = ?", (PENDING,))
            else:
                db.execute("UPDATE ledger_meta SET value = ? WHERE key = ?", (f"{rows[-1][0]} {upto}", PENDING))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    if finished:
        log.info("ledger: tenant rows built for the records kept from before them")
    return not finished
