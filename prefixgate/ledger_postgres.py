"""The fleet's shared ledger in PostgreSQL (`ledger_url: postgresql://...`): every replica copies its
records there, with their rollups, and every replica's dashboard reads the fleet's figures from it.

Each replica still commits a record to its own SQLite file before the answer's last byte; its ledger
thread then copies the rows over (the cursor and its guarantees: ledger_copy), adding them to the
rollups in the same Postgres transaction that inserts them and moves the cursor, so each record is
counted once. A replica new to Postgres copies its whole file (moving from SQLite to Postgres keeps
the history). The copy and the dashboard each draw connections from a small psycopg pool.
"""

from __future__ import annotations

import logging
import uuid

import psycopg
from psycopg_pool import ConnectionPool

from prefixgate import ledger_rollup as rollup
from prefixgate import ledger_tenant_backfill as tenant_backfill
from prefixgate.ledger import COLUMNS, column_types, decode_row, schema
from prefixgate.ledger_copy import RowCopier
from prefixgate.ledger_migrate import add_columns, add_record_columns, fill, fill_rows, missing_sums

CURSORS = "prefixgate_cursors"
TENANT_ROWS_PENDING = "prefixgate_tenant_rows_pending"    # ids of records rolled up before tenant rows existed
log = logging.getLogger("prefixgate.ledger")
# SQLite's types as Postgres needs them: token counts and picodollars outgrow 32 bits, times need doubles.
_TYPES = {" INTEGER": " BIGINT", " REAL": " DOUBLE PRECISION", " WITHOUT ROWID": ""}


def to_postgres(sql: str) -> str:
    """A statement written for SQLite (its types, `?` parameters) as Postgres takes it."""
    for sqlite_type, pg_type in _TYPES.items():
        sql = sql.replace(sqlite_type, pg_type)
    return sql.replace("?", "%s")


_CREATE_ROLLUPS, _UPSERT_ROLLUP, _UPSERT_HIST = rollup.statements("prefixgate_")
DDL = [to_postgres(s) for s in (schema("prefixgate_requests"), *_CREATE_ROLLUPS)] + [
    "CREATE INDEX IF NOT EXISTS prefixgate_requests_ts ON prefixgate_requests (ts)",
    f"CREATE TABLE IF NOT EXISTS {CURSORS} (ledger_id TEXT PRIMARY KEY, position BIGINT NOT NULL)"]
# SQL text: table and column names are this module's constants; values are bound.
INSERT = (f"INSERT INTO prefixgate_requests ({', '.join(COLUMNS)}) VALUES ({', '.join('%s' for _ in COLUMNS)}) "  # nosec B608
          "ON CONFLICT (id) DO NOTHING RETURNING id")
UPSERT_ROLLUP = to_postgres(_UPSERT_ROLLUP)
UPSERT_HIST = to_postgres(_UPSERT_HIST)


def without_nul(rows: list[tuple]) -> list[tuple]:
    """Postgres text cannot hold NUL (a DataError that would stop the copy for good, every later record
    waiting behind it): a caller's NUL (a model name, a route hint) is stored as U+FFFD. JSON columns
    already escape it."""
    return [tuple(v.replace("\x00", "\ufffd") if isinstance(v, str) and "\x00" in v else v for v in row)
            for row in rows]


def open_pool(url: str) -> ConnectionPool:
    """A small pool (the copy thread and the dashboard's polls), opened in the background: a Postgres
    that is down at start delays the copy, it does not stop the gateway."""
    pool = ConnectionPool(url, min_size=1, max_size=4, open=False, timeout=5.0, name="prefixgate-ledger")
    pool.open(wait=False)
    return pool


def create_tables(pool: ConnectionPool) -> None:
    with pool.connection() as conn:
        # Replicas starting together: one creates the tables, the others wait for its lock.
        conn.execute("SELECT pg_advisory_xact_lock(7274657)")
        for statement in DDL:
            conn.execute(statement)
        have = conn.execute("SELECT column_name FROM information_schema.columns WHERE table_name = 'prefixgate_requests' "
                            "AND table_schema = current_schema()").fetchall()
        for statement in add_record_columns("prefixgate_requests", (name for (name,) in have), column_types()):
            conn.execute(to_postgres(statement))
        _add_missing_sums(conn)


def _add_missing_sums(conn: psycopg.Connection) -> None:
    """Rollup sums a newer version adds (ledger_migrate), in this transaction: every record in Postgres
    was rolled up when it was copied, so all of them fill the new columns in; on rollups from before tenant
    rows, the tenants' records are marked for theirs (ledger_tenant_backfill)."""
    have = conn.execute("SELECT column_name FROM information_schema.columns WHERE table_name = 'prefixgate_rollups' "
                        "AND table_schema = current_schema()").fetchall()
    missing = missing_sums(name for (name,) in have)
    if not missing:
        return
    for statement in add_columns("prefixgate_rollups", missing):
        conn.execute(to_postgres(statement))
    if tenant_backfill.predates_tenant_rows(missing):
        conn.execute(f"CREATE TABLE IF NOT EXISTS {TENANT_ROWS_PENDING} (id TEXT PRIMARY KEY)")
        # SQL text: table names are this module's constants.
        conn.execute(f"INSERT INTO {TENANT_ROWS_PENDING} SELECT id FROM prefixgate_requests WHERE tenant <> '' "  # nosec B608
                     "ON CONFLICT DO NOTHING")
    update = to_postgres(fill("prefixgate_rollups", missing))
    # SQL text: table and column names are this module's constants.
    with conn.cursor(name="prefixgate_fill") as rows, conn.cursor() as out:
        rows.execute(f"SELECT {', '.join(COLUMNS)} FROM prefixgate_requests")  # nosec B608
        while batch := rows.fetchmany(rollup.BATCH):
            out.executemany(update, fill_rows((decode_row(dict(zip(COLUMNS, r, strict=True))) for r in batch), missing))


def backfill_tenant_rows(pool: ConnectionPool) -> bool:
    """Add a batch of the records marked pending (see `_add_missing_sums`) to their tenants' rows, in one
    transaction that unmarks them; replicas doing it at once take different batches. Returns whether any may
    still be pending."""
    with pool.connection() as conn, conn.transaction():
        if conn.execute("SELECT to_regclass(%s)", (TENANT_ROWS_PENDING,)).fetchone()[0] is None:
            return False        # rollups never older than tenant rows
        # SQL text: table names are this module's constants, the batch a constant.
        ids = [i for (i,) in conn.execute(f"DELETE FROM {TENANT_ROWS_PENDING} WHERE id IN (SELECT id FROM "  # nosec B608
                                          f"{TENANT_ROWS_PENDING} LIMIT {rollup.BATCH} FOR UPDATE SKIP LOCKED) RETURNING id")]
        if not ids:
            return False        # (batches other replicas hold are theirs to finish)
        # SQL text: column and table names are this module's constants; values are bound.
        rows = conn.execute(f"SELECT {', '.join(COLUMNS)} FROM prefixgate_requests WHERE id = ANY(%s)", (ids,)).fetchall()  # nosec B608
        sums, hist = tenant_backfill.tenant_rows([decode_row(dict(zip(COLUMNS, r, strict=True))) for r in rows])
        with conn.cursor() as cur:
            cur.executemany(UPSERT_ROLLUP, sums)
            cur.executemany(UPSERT_HIST, hist)
    return True


class PostgresSync(RowCopier):
    store = "postgres"
    errors = (psycopg.Error, OSError)

    def __init__(self, url: str, path: str) -> None:
        super().__init__(path)
        self._pool = open_pool(url)
        self._created = False
        self._backfilling = True

    def _stored_position(self) -> int:
        if not self._created:
            create_tables(self._pool)
            self._created = True
        with self._pool.connection() as conn:
            # SQL text: table and column names are this module's constants; values are bound.
            row = conn.execute(f"SELECT position FROM {CURSORS} WHERE ledger_id = %s", (self.ledger_id,)).fetchone()  # nosec B608
        return row[0] if row else 0

    def push(self, final: bool = False) -> int:
        """The copy (ledger_copy), then, until none is left, a batch of older records' tenant rows."""
        copied = super().push(final)
        if self._backfilling and self._created and self._down_since is None:
            try:
                self._backfilling = backfill_tenant_rows(self._pool)
            except self.errors as e:     # the copy reports an outage; the batch is tried again next tick
                log.debug("building older records' tenant rows in postgres failed (%s)", type(e).__name__)
        return copied

    def _apply(self, expected: int, new: int, rows: list[tuple]) -> int:
        # A record the file holds without an id (its id column allows NULL) would fail every batch, each later record
        # waiting behind it: it gets one of its own (the batch commits with the cursor, so never two for one record).
        rows = [row if row[0] is not None else (f"{self.ledger_id}-{uuid.uuid4().hex[:16]}", *row[1:])
                for row in without_nul(rows)]
        with self._pool.connection() as conn, conn.transaction():
            # SQL text: table and column names are this module's constants; values are bound.
            conn.execute(f"INSERT INTO {CURSORS} VALUES (%s, 0) ON CONFLICT DO NOTHING", (self.ledger_id,))  # nosec B608
            # SQL text: table and column names are this module's constants; values are bound.
            current = conn.execute(f"SELECT position FROM {CURSORS} WHERE ledger_id = %s FOR UPDATE",  # nosec B608
                                   (self.ledger_id,)).fetchone()[0]
            if current != expected:
                return current
            with conn.cursor() as cur:
                cur.executemany(INSERT, rows, returning=True)
                inserted = set()
                while True:
                    inserted.update(r[0] for r in cur.fetchall())
                    if not cur.nextset():
                        break
            # Only records new to Postgres are rolled up (an id already there, e.g. SDK records exported
            # into two replicas' files, is counted once).
            records = [r for r in self.decode(rows) if r["id"] in inserted]
            sums, hist = rollup.upsert_rows(rollup.aggregate(records))
            with conn.cursor() as cur:
                cur.executemany(UPSERT_ROLLUP, sums)
                cur.executemany(UPSERT_HIST, hist)
            # SQL text: table and column names are this module's constants; values are bound.
            conn.execute(f"UPDATE {CURSORS} SET position = %s WHERE ledger_id = %s", (new, self.ledger_id))  # nosec B608
        return new

    def prune(self, records_before: float, rollups_before: float) -> None:
        # Every replica runs it; deleting twice is harmless.
        with self._pool.connection() as conn:
            conn.execute("DELETE FROM prefixgate_requests WHERE ts < %s", (records_before,))
            for table in ("prefixgate_rollups", "prefixgate_rollup_hist"):
                # SQL text: table and column names are this module's constants; values are bound.
                conn.execute(f"DELETE FROM {table} WHERE res = 60 AND bucket < %s", (records_before,))  # nosec B608
                # SQL text: table and column names are this module's constants; values are bound.
                conn.execute(f"DELETE FROM {table} WHERE bucket < %s", (rollups_before,))  # nosec B608

    @property
    def pool(self) -> ConnectionPool:
        return self._pool

    def close(self) -> None:
        self._pool.close()
        super().close()
