"""Where the dashboard reads the ledger: the replica's SQLite file, or the store every replica writes
when one is configured (Postgres with `ledger_url`, else the Redis stream), so the page shows the
whole fleet, whichever replica serves it.

Figures come from rollups (prefixgate.ledger_rollup), read through a source's `view`: a SQLite
connection holding the `rollups` and `rollup_hist` tables plus, in temp tables of the same shape, the
records the ledger thread has not rolled up yet. A poll therefore costs buckets x distinct values
(routes, keys, models...), not records. A tenant's view holds that tenant's own rollup rows alone, under
the dimensions' plain names, so the same figures read only its records. The misses
view still reads records, but only the latest MISS_SAMPLE of the window.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, closing
from dataclasses import fields
from typing import Protocol

import psycopg
import redis

from prefixgate import ledger_postgres
from prefixgate import ledger_rollup as rollup
from prefixgate.config import Settings
from prefixgate.ledger import COLUMNS, STREAM, LedgerRecord, decode_row

_KNOWN = {f.name for f in fields(LedgerRecord)}
# Stream ids are Redis's clock at write time; a replica's clock may differ from Redis's by this much.
CLOCK_SLACK_MS = 60_000
PAGE = 5000
# What a shared store that is down raises.
UNAVAILABLE = (psycopg.Error, redis.RedisError, OSError)
READ_TIMEOUT_S = 5.0    # a shared store's call (Redis) or wait for a connection (Postgres)
# The misses view diagnoses at most this many of the window's latest records (plus their predecessors).
MISS_SAMPLE = 1000


class LedgerSource(Protocol):
    name: str

    def records(self, since: float, until: float, latest: int | None = None, route: str | None = None,
                tenant: str | None = None) -> list[LedgerRecord]:
        """Records with `since <= ts < until` (of `route`, of `tenant`), oldest first; with `latest`, only the last
        that many: a tenant's latest, not the tenant's share of everyone's latest."""
        ...

    def view(self, since: float, until: float, tenant: str | None = None,
             cuts: Sequence[float] = ()) -> AbstractContextManager[sqlite3.Connection]:
        """A consistent snapshot of the rollups covering [since, until) (of `tenant`'s records alone: see the
        module docstring), and its parts split at `cuts`."""
        ...

    def close(self) -> None: ...


def _record(data: dict) -> LedgerRecord:
    # Records written by a newer or older gateway version: unknown fields dropped, missing ones defaulted.
    return LedgerRecord(**{k: v for k, v in data.items() if k in _KNOWN})


def _load(db: sqlite3.Connection, records: list[dict], schema: str = "") -> None:
    """Roll `records` up into `rollups`/`rollup_hist` tables (in `schema`, e.g. `temp.`)."""
    create, upsert_rollup, upsert_hist = rollup.statements(schema)
    for statement in create:
        db.execute(statement)
    rows, hist = rollup.upsert_rows(rollup.aggregate(records, by_tenant=False))
    db.executemany(upsert_rollup, rows)
    db.executemany(upsert_hist, hist)


def _matching(route: str | None, tenant: str | None, mark: str) -> tuple[str, list[str]]:
    """The WHERE clause's extra terms for a route and a tenant (None: any), and their bound values."""
    terms = [(column, value) for column, value in (("route", route), ("tenant", tenant)) if value is not None]
    return "".join(f" AND {column} = {mark}" for column, _ in terms), [value for _, value in terms]


def _in_memory(records: list[dict]) -> sqlite3.Connection:
    """A view holding `records`, rolled up."""
    db = sqlite3.connect(":memory:", isolation_level=None)
    _load(db, records)
    _load(db, [], "temp.")
    return db


def _window_rows(since: float, until: float, tenant: str | None, mark: str, cuts: Sequence[float] = ()) -> tuple[str, tuple]:
    """The WHERE clause (and its values) picking the rollup rows a view of [since, until) reads: whole hours,
    the minutes at the window's edges, and every minute of all records (the time series), of every tenant or
    of `tenant`'s own rows. `cuts`: where callers split the window (an alert's window from its baseline): a
    part ending or starting inside an hour reads that hour's minutes of every dimension, which the window's own
    edges do not bring (the baseline of a drop alert asked in the first 5 minutes of an hour read none)."""
    first_minute = math.floor(since / 60) * 60
    first_hour, last_hour = math.ceil(first_minute / 3600) * 3600, math.floor(math.floor(until / 60) * 60 / 3600) * 3600
    dims = ["", *rollup.DIMENSIONS]
    if tenant is not None:
        dims = [rollup.scoped(tenant, dim) for dim in dims]
    hours = sorted({math.floor(c / 3600) * 3600 for c in cuts if since < c < until and c % 3600})
    inside = "".join(f" OR (bucket >= {mark} AND bucket < {mark})" for _ in hours)
    where = (f"WHERE bucket < {mark} AND dim IN ({', '.join(mark for _ in dims)}) AND ((res = 3600 AND bucket >= {mark}) "
             f"OR (res = 60 AND bucket >= {mark} AND (dim = {mark} OR bucket < {mark} OR bucket >= {mark}{inside})))")
    return where, (until, *dims, first_hour - 3600, first_minute, dims[0], first_hour, last_hour,
                   *(v for h in hours for v in (h, h + 3600)))


def _copied(sums: list[tuple], hist: list[tuple], tail: list[dict]) -> sqlite3.Connection:
    """A view of rollup rows read from a store (`res, bucket, dim, name, ...`; a tenant's under the plain
    dimension names) plus the `tail` of records not rolled up yet."""
    db = _in_memory(tail)
    db.executemany(rollup.UPSERT_ROLLUP, [(res, bucket, rollup.unscoped(dim), *rest) for res, bucket, dim, *rest in sums])
    db.executemany(rollup.UPSERT_HIST, [(res, bucket, rollup.unscoped(dim), *rest) for res, bucket, dim, *rest in hist])
    return db


def _read_rollups(execute: Callable[[str, tuple], list[tuple]], where: str, params: tuple, prefix: str) -> tuple[list, list]:
    """The rollup and histogram rows matching `where`, from the tables named `{prefix}rollups` and `{prefix}rollup_hist`."""
    # SQL text: column and table names are the ledger's constants; values are bound.
    sums = execute(f"SELECT res, bucket, dim, name, {', '.join(rollup.SUMS)} FROM {prefix}rollups {where}", params)  # nosec B608
    # SQL text: column and table names are the ledger's constants; values are bound.
    return sums, execute(f"SELECT res, bucket, dim, name, kind, bin, n FROM {prefix}rollup_hist {where}", params)  # nosec B608


class SqliteSource:
    name = "sqlite"

    def __init__(self, path: str) -> None:
        self.path = path

    def close(self) -> None:
        pass    # connections are per read

    def _connect(self) -> sqlite3.Connection | None:
        try:
            return sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, isolation_level=None)
        except sqlite3.OperationalError:
            return None   # no request has been recorded yet

    def records(self, since: float, until: float, latest: int | None = None, route: str | None = None,
                tenant: str | None = None) -> list[LedgerRecord]:
        db = self._connect()
        if db is None:
            return []
        try:
            have = {row[1] for row in db.execute("PRAGMA table_info(requests)")}
            cols = [c for c in COLUMNS if c in have]
            if tenant is not None and "tenant" not in have:
                return []       # a file from before tenants: none of its records is a tenant's
            order = f"DESC LIMIT {int(latest)}" if latest else ""
            where, values = _matching(route, tenant, "?")
            # SQL text: column and table names are the ledger's constants, the limit an int(); values are bound.
            rows = db.execute(f"SELECT {', '.join(cols)} FROM requests WHERE ts >= ? AND ts < ? {where} ORDER BY ts {order}",  # nosec B608
                              (since, until, *values)).fetchall()
        except sqlite3.OperationalError:
            return []
        finally:
            db.close()
        if latest:
            rows.reverse()
        return [_record(decode_row(dict(zip(cols, row, strict=True)))) for row in rows]

    def view(self, since: float, until: float, tenant: str | None = None,
             cuts: Sequence[float] = ()) -> closing[sqlite3.Connection]:
        db = self._connect()
        if db is None:
            return closing(_in_memory([]))
        try:
            # One read transaction: the cursor, the rollups and the records beyond it agree.
            db.execute("BEGIN")
            where, values = _matching(None, tenant, "?")
            # SQL text: column and table names are the ledger's constants; values are bound.
            rows = db.execute(f"SELECT {', '.join(COLUMNS)} FROM requests WHERE rowid > ?{where}",  # nosec B608
                              (rollup.cursor(db), *values)).fetchall()
            tail = [decode_row(dict(zip(COLUMNS, row, strict=True))) for row in rows]
            if tenant is None:
                _load(db, tail, "temp.")
                return closing(db)
            sums, hist = _read_rollups(lambda sql, params: db.execute(sql, params).fetchall(),
                                       *_window_rows(since, until, tenant, "?", cuts), "")
            view = _copied(sums, hist, tail)
        except sqlite3.OperationalError:
            # A file the gateway has not opened since rollups existed: nothing to show until it does.
            view = _in_memory([])
        db.close()
        return closing(view)


class RedisSource:
    """Reads the fleet's records from the Redis stream and rolls them up per poll (the stream holds
    the last million records; for a fleet past that, use `ledger_url`)."""

    name = "redis"

    def __init__(self, url: str) -> None:
        # Bounded, as the Postgres pool's wait: a frozen Redis is a 503 after it, not a dashboard call held for ever.
        self._redis = redis.Redis.from_url(url, socket_timeout=READ_TIMEOUT_S, socket_connect_timeout=READ_TIMEOUT_S)

    def records(self, since: float, until: float, latest: int | None = None, route: str | None = None,
                tenant: str | None = None) -> list[LedgerRecord]:
        out: list[LedgerRecord] = []
        start = f"{max(0, int(since * 1000) - CLOCK_SLACK_MS)}"
        end = f"{int(until * 1000) + CLOCK_SLACK_MS}"
        while True:
            entries = self._redis.xrange(STREAM, min=start, max=end, count=PAGE)
            for _, fields_ in entries:
                rec = _record(json.loads(fields_[b"record"]))
                if since <= rec.ts < until and route in (None, rec.route) and tenant in (None, rec.tenant):
                    out.append(rec)
            if len(entries) < PAGE:
                break
            start = "(" + entries[-1][0].decode()
        out.sort(key=lambda r: r.ts)
        return out[-latest:] if latest else out

    def view(self, since: float, until: float, tenant: str | None = None,
             cuts: Sequence[float] = ()) -> closing[sqlite3.Connection]:
        return closing(_in_memory([rec.__dict__ for rec in self.records(since, until, tenant=tenant)]))

    def close(self) -> None:
        self._redis.close()


class PostgresSource:
    """Reads the fleet's records and rollups from the shared Postgres ledger (prefixgate.ledger_postgres).
    A view copies the window's rollup rows into an in-memory SQLite database: whole hours, the minutes
    at the window's edges, and the per-minute rows of all records that the time series reads."""

    name = "postgres"

    def __init__(self, url: str) -> None:
        self._pool = ledger_postgres.open_pool(url)

    def records(self, since: float, until: float, latest: int | None = None, route: str | None = None,
                tenant: str | None = None) -> list[LedgerRecord]:
        where, values = _matching(route, tenant, "%s")
        if any("\x00" in value for value in values):
            return []       # Postgres text holds no NUL: no record has it (and psycopg refuses to send it)
        order = f"DESC LIMIT {int(latest)}" if latest else ""
        try:
            with self._pool.connection() as conn:
                # SQL text: column and table names are the ledger's constants, the limit an int(); values are bound.
                rows = conn.execute(f"SELECT {', '.join(COLUMNS)} FROM prefixgate_requests WHERE ts >= %s AND ts < %s "  # nosec B608
                                    f"{where} ORDER BY ts {order}", (since, until, *values)).fetchall()
        except psycopg.errors.UndefinedTable:
            return []       # no replica has copied a record yet
        if latest:
            rows.reverse()
        return [_record(decode_row(dict(zip(COLUMNS, row, strict=True)))) for row in rows]

    def view(self, since: float, until: float, tenant: str | None = None,
             cuts: Sequence[float] = ()) -> closing[sqlite3.Connection]:
        if tenant is not None and "\x00" in tenant:
            return closing(_in_memory([]))      # no record has it (Postgres text holds no NUL)
        try:
            with self._pool.connection() as conn:
                sums, hist = _read_rollups(lambda sql, params: conn.execute(sql, params).fetchall(),
                                           *_window_rows(since, until, tenant, "%s", cuts), "prefixgate_")
        except psycopg.errors.UndefinedTable:
            return closing(_in_memory([]))      # no replica has copied a record yet: an empty view
        return closing(_copied(sums, hist, []))

    def close(self) -> None:
        self._pool.close()


def source_for(settings: Settings) -> LedgerSource:
    """Postgres when the fleet shares one, else the Redis stream when replicas share Redis, else this
    replica's SQLite file."""
    if settings.ledger_url:
        return PostgresSource(settings.ledger_url)
    return RedisSource(settings.redis_url) if settings.redis_url else SqliteSource(settings.ledger_path)
