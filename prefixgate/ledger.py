"""The ledger: one record per request (gateway and SDK traffic alike) in SQLite (WAL), copied to a
Redis stream plus running totals that every replica shares when Redis is configured.

Crash guarantee: `append` commits before it returns, and the gateway appends before the last byte of
the answer leaves (a non-streamed body is built after its record; a stream's terminal event is held
until its record is written). So after a kill -9 the file opens cleanly and holds every request whose
answer a client received in full. Rollups (ledger_rollup) and retention are the background thread's
work, never the request path's. Redis is copied from SQLite by a background thread that remembers
how far it got (in Redis, in the same transaction), so a Redis outage delays the copy and loses nothing.

The Redis copy wakes on a timer, not per record: waking a thread for every request (a queue put) cost
~0.2 ms of the request path on a 2-core VM, more than the SQLite commit itself.
"""

from __future__ import annotations

import json
import logging
import math
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

from prefixgate import ledger_rollup as rollup
from prefixgate import ledger_tenant_backfill as tenant_backfill
from prefixgate.config import Settings
from prefixgate.ledger_bounds import storable
from prefixgate.ledger_migrate import add_keepalive_pairs, add_missing_sums, add_record_columns
from prefixgate.usage import Usage

if TYPE_CHECKING:
    from prefixgate.ledger_copy import RowCopier

FLUSH_S = 0.05
CHECKPOINT_S = 5.0
STREAM = "prefixgate:ledger"
TOTALS = "prefixgate:totals"
PRUNE_BATCH = 2000
WAL_LIMIT_BYTES = 64 << 20
DAY_S = 86400
# The longest window a budget or keep-alive cap restarts from the rollups (`Ledger.spend_pico`) other than "total": a
# calendar month of 31 days and the hour DST gives back. The minute rollups of the dimensions they read (RESTORED) are
# kept that long whatever `ledger_retention_days` says: a month in Asia/Kolkata starts at 18:30 UTC, and its first
# half hour is in no hour rollup of its own.
MONTH_S = 31 * DAY_S + 3600
RESTORED = ("key", "route", rollup.KEEPALIVE_PAIR)


@dataclass
class LedgerRecord:
    id: str
    ts: float
    key: str = ""
    tenant: str = ""
    route: str = ""
    target: str = ""            # upstream name
    provider: str = ""
    model: str = ""
    dialect: str = ""           # the caller's
    stream: bool = False
    status: int = 200
    uncached_input: int = 0
    cache_read: int = 0
    cache_writes: dict[str, int] = field(default_factory=dict)
    output: int = 0
    cost_usd: str | None = None           # Decimal as text; None when the model has no known price
    cost_without_cache_usd: str | None = None
    savings_usd: str | None = None
    # What the provider itself reported the request cost (OpenRouter's usage.cost); None where it reports none.
    provider_cost_usd: str | None = None
    latency_ms: float = 0.0
    ttft_ms: float | None = None
    overhead_ms: float = 0.0
    attempts: int = 1
    prefix_hash: str = ""
    plan_summary: str = ""
    explanation: list[str] = field(default_factory=list)
    miss_reason: str = ""
    # Why the provider itself says its cache missed (its own word: tools_changed, reasoning_effort_changed,
    # previous_message_not_found, ...) and the tokens it says were not read; "" / None where it said nothing.
    provider_miss_reason: str = ""
    provider_missed_tokens: int | None = None
    error: str = ""
    # Per-segment prefix shape of the request as sent (prefix_shape): what the misses view diffs.
    segments: list[str] = field(default_factory=list)
    # The request as the application sent it (target dialect, before planning), kept only with the
    # `ledger_bodies` setting: what `prefixgate ledger export --trace` replays.
    body: str = ""
    # With the body, where its wire format resends answers (Anthropic Messages): the answer's text blocks (JSON),
    # so that `plan --keepalive` on the exported trace can upgrade through them as the live gateway does.
    response: str = ""
    # What the route's response cache did (hit, miss, shadow-hit, bypass; "" where it is off), and on a hit the
    # cost of the stored answer, not spent again: kept apart from prompt-cache savings.
    response_cache: str = ""
    avoided_usd: str | None = None
    # What the route did with OpenAI's prompt_cache_key (derive, keep, off; "" where the target has none) and
    # the key sent ("" for none): sessions that share a key share the provider's cache machine.
    cache_key_mode: str = ""
    prompt_cache_key: str = ""
    # "" for a caller's request; "keepalive" for a refresh the gateway sent to keep a session's cache warm
    # (gateway/keepalive.py): billed to the session's key like its requests, and kept apart on the dashboard;
    # `cache_extend` (an explicit cache's TTL extended: the storage it adds), `cache_delete` (deleted early: the
    # storage not used, as a negative cost) or `cache_create` (a cache made for a request that another target then
    # answered, or whose creation got no answer: its writing and storage; no cost where the search for it stopped
    # unresolved), all by gateway/explicit_caches.py.
    kind: str = ""
    # On a caller's request that read a prefix only a keep-alive refresh kept alive (its gap outlasted the
    # cache's TTL): what that read saved against writing the prefix again. None where no refresh helped.
    keepalive_saved_usd: str | None = None
    # A balanced route's prefix answered by another target than the one it was warm on (gateway/sticky.py):
    # why (failover, expired; "" for none), from where, the prompt tokens written again and what that cost
    # over reading them (None: unpriced).
    flip: str = ""
    flip_from: str = ""
    flip_tokens: int = 0
    flip_cost_usd: str | None = None
    # The hosted service tier the upstream says served the request (OpenAI default/flex/priority, Anthropic
    # standard/priority); "" where it said none. The cost is priced at this tier, not the one asked for.
    service_tier: str = ""

    @property
    def usage(self) -> Usage:
        return Usage(self.uncached_input, self.cache_read, dict(self.cache_writes), self.output)


def failed(status: int) -> bool:
    """An error answer, or none at all (status 0: the request never got one)."""
    return status == 0 or status >= 400


def miss_reason(usage: Usage | None, status: int, explanation: list[str]) -> str:
    """Why no cached tokens were read, in words the dashboard groups by."""
    if failed(status) or (usage is not None and usage.cache_read):
        return ""
    if usage is None:
        return "usage not reported by the provider"
    planned = next((line.split(":", 1)[1].strip() for line in explanation if line.startswith("miss:")), None)
    if planned:
        return planned
    if usage.cache_write:
        return "cold: this request wrote the prefix"
    if any(line.startswith("passthrough:") for line in explanation):
        return "planner off and no cached prefix"
    return "no cached prefix reported by the provider"


COLUMNS = [f.name for f in fields(LedgerRecord)]
_JSON = {"cache_writes", "explanation", "segments"}
# Field annotations are strings (postponed evaluation); everything else is stored as TEXT.
_SQL_TYPES = {"bool": "INTEGER", "int": "INTEGER", "int | None": "INTEGER", "float": "REAL", "float | None": "REAL"}


def column_types() -> list[tuple[str, str]]:
    """(name, SQL type) of each record field, in COLUMNS order."""
    return [(f.name, _SQL_TYPES.get(str(f.type), "TEXT")) for f in fields(LedgerRecord)]


def schema(table: str = "requests") -> str:
    cols = [f"{name} {sql_type}{' PRIMARY KEY' if name == 'id' else ''}" for name, sql_type in column_types()]
    return f"CREATE TABLE IF NOT EXISTS {table} ({', '.join(cols)})"


def _row(rec: LedgerRecord) -> tuple:
    return tuple(json.dumps(getattr(rec, c)) if c in _JSON else getattr(rec, c) for c in COLUMNS)


log = logging.getLogger("prefixgate.ledger")


@dataclass(frozen=True)
class Retention:
    """How long the ledger keeps raw records and minute rollups (`records_s`) and hour rollups (`rollups_s`)."""

    records_s: float = 30 * DAY_S
    rollups_s: float = 400 * DAY_S
    every_s: float = 60.0           # how often the ledger thread prunes

    def __post_init__(self) -> None:
        if not 0 < self.records_s <= self.rollups_s:
            raise ValueError("ledger retention must be positive, and rollups kept at least as long as records")
        if self.every_s <= 0:
            raise ValueError("ledger prune interval must be positive")


class Ledger:
    """Appends commit on the caller's thread, so a record is in the file before the response that it
    accounts for ends; a background thread rolls records up, prunes old ones, checkpoints the WAL and,
    with Redis, copies rows there."""

    def __init__(self, path: str, redis_url: str = "", *, ledger_url: str = "", retention: Retention = Retention(),
                 clock: Callable[[], float] = time.time) -> None:
        # ":memory:" (tests, throwaway gateways) is one shared in-memory database, so the ledger thread's
        # connection sees the appends.
        self.path = f"file:prefixgate-ledger-{uuid.uuid4().hex}?mode=memory&cache=shared" if path == ":memory:" else path
        self.retention = retention
        self._clock = clock               # wall time for retention (tests move it)
        self._lock = threading.Lock()
        # Autocommit: each append is its own transaction. synchronous=NORMAL in WAL mode means a commit is
        # a write() to the WAL, not an fsync: it survives the process being killed (not a power cut).
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, uri=True)
        # Pages freed by pruning go back to the filesystem (incremental_vacuum after each prune). Only takes
        # effect on a new file; an older file reuses freed pages instead, so it stops growing all the same.
        self._db.execute("PRAGMA auto_vacuum=INCREMENTAL")
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        # Checkpoints fsync the database file: the background thread runs them on its own connection,
        # never on the request path and never holding the append lock.
        self._db.execute("PRAGMA wal_autocheckpoint=0")
        # A checkpoint leaves the WAL file at its largest size unless told to truncate it past this.
        self._db.execute(f"PRAGMA journal_size_limit={WAL_LIMIT_BYTES}")
        self._db.execute(schema())
        # A ledger file from an older version lacks newer columns; old rows read them as empty.
        have = [row[1] for row in self._db.execute("PRAGMA table_info(requests)")]
        for statement in add_record_columns("requests", have, column_types()):
            self._db.execute(statement)
        self._db.execute("CREATE INDEX IF NOT EXISTS requests_ts ON requests (ts)")
        rollup.create(self._db)
        add_missing_sums(self._db, COLUMNS, decode_row)
        add_keepalive_pairs(self._db, COLUMNS, decode_row)
        marks = ", ".join("?" for _ in COLUMNS)
        # A record id written twice (an SDK export repeated) keeps its first row: replacing it would give
        # it a new rowid and roll it up twice.
        self._insert = f"INSERT OR IGNORE INTO requests ({', '.join(COLUMNS)}) VALUES ({marks})"
        self._stop = threading.Event()
        # Shared stores the ledger thread copies rows to (imported only when configured).
        self.copies: list[RowCopier] = []
        if redis_url:
            from prefixgate.ledger_redis import RedisSync

            self.copies.append(RedisSync(redis_url, self.path))
        if ledger_url:
            from prefixgate.ledger_postgres import PostgresSync

            self.copies.append(PostgresSync(ledger_url, self.path))
        self.written = 0
        self._thread = threading.Thread(target=self._run, name="prefixgate-ledger", daemon=True)
        self._thread.start()

    @classmethod
    def for_settings(cls, settings: Settings) -> Ledger:
        """The gateway's ledger, as configured."""
        return cls(settings.ledger_path, settings.redis_url, ledger_url=settings.ledger_url,
                   retention=Retention(settings.ledger_retention_days * DAY_S, settings.ledger_rollup_retention_days * DAY_S))

    def append(self, record: LedgerRecord) -> None:
        """Write a record (~50 us on a shared 2-core VM); it is durable when this returns. One holding a count or
        amount no store can sum is written without them (ledger_bounds)."""
        row = _row(storable(record))
        with self._lock:
            self._db.execute(self._insert, row)
            self.written += 1

    def spend_pico(self, since: float, dim: str, name: str, column: str = "spend_pico") -> int:
        """What the records of rollup dimension `dim` valued `name` (a key, a route, a keep-alive pair) added to the
        rollup sum `column` from `since` (a whole minute: a window's start), in picodollars: the hour rollups (kept
        far longer than raw records) from the first whole hour on, the minute ones before it (a window starting off
        the hour: a day in Asia/Kolkata starts at 18:30 UTC; kept at least MONTH_S), and the records not yet rolled
        up. Where budgets (`key`) and keep-alive's caps (`route`, `keepalive_pair`: `keepalive_bought_pico`) start
        after a restart without Redis."""
        if dim not in RESTORED or column not in rollup.SUMS:
            raise ValueError(f"no restore from rollup dimension {dim!r} and sum {column!r}")
        hour = math.ceil(since / 3600) * 3600
        with self._lock:
            mark = rollup.cursor(self._db)
            # SQL text: the column is one of the rollups' own (checked above); values are bound.
            rolled = self._db.execute(
                f"SELECT coalesce(sum({column}), 0) FROM rollups WHERE dim = ? AND name = ? AND "  # nosec B608
                "((res = 3600 AND bucket >= ?) OR (res = 60 AND bucket >= ? AND bucket < ?))",
                (dim, name, hour, since, hour)).fetchone()[0]
            # SQL text: the columns are the ledger's constants; values are bound.
            fresh = self._db.execute(f"SELECT {', '.join(COLUMNS)} FROM requests WHERE rowid > ? AND ts >= ?",  # nosec B608
                                     (mark, since)).fetchall()
        # The records beyond the cursor summed as the rollups will sum them: the same rows, whatever the dimension.
        sums = rollup.aggregate(decode_row(dict(zip(COLUMNS, row, strict=True))) for row in fresh)
        index = rollup.SUMS.index(column)
        return int(rolled) + sum(agg.sums[index] for (res, _, d, n), agg in sums.items() if res == 60 and (d, n) == (dim, name))

    def close(self) -> None:
        """Stop the background thread after a last roll-up, checkpoint and Redis copy."""
        self._stop.set()
        self._thread.join()
        with self._lock:
            self._db.execute("PRAGMA wal_checkpoint(PASSIVE)")
            self._db.close()

    def _run(self) -> None:
        worker = sqlite3.connect(self.path, timeout=10, isolation_level=None, uri=True)
        # synchronous is per connection, FULL by default: a roll-up's commit would fsync the WAL while it
        # holds the write lock, and the request path's appends would wait for the disk (3-5 ms here).
        worker.execute("PRAGMA synchronous=NORMAL")
        checkpointed = time.monotonic()
        pruned = 0.0
        backfilling = True      # older records' tenant rows (ledger_tenant_backfill): a batch a tick until none is left
        while True:
            stopping = self._stop.wait(FLUSH_S)
            # Each chore on its own: one that fails (a record no rollup can hold) is logged and tried again at the
            # next tick, and never stops the others (the copies, pruning) or this thread, which nothing restarts.
            with _chore("rolling up"):
                while rollup.roll_up(worker, COLUMNS, decode_row, self._lock) == rollup.BATCH:
                    pass
            if backfilling:
                with _chore("building older records' tenant rows"):
                    backfilling = tenant_backfill.backfill(worker, COLUMNS, decode_row, self._lock)
            for copy in self.copies:
                with _chore(f"copying to {copy.store}"):
                    copy.push(final=stopping)
            if time.monotonic() - pruned > self.retention.every_s:
                with _chore("pruning"):
                    self._prune(worker)
                pruned = time.monotonic()
            if time.monotonic() - checkpointed > CHECKPOINT_S:
                with _chore("checkpointing"):
                    worker.execute("PRAGMA wal_checkpoint(PASSIVE)")
                checkpointed = time.monotonic()
            if stopping:
                worker.close()
                for copy in self.copies:
                    copy.close()
                return

    def _prune(self, db: sqlite3.Connection) -> int:
        """Delete records and rollups past their retention (records only once rolled up and copied to
        Redis), in small transactions so appends never wait long. Returns the records deleted."""
        now = self._clock()
        keep_from = min([rollup.cursor(db), *(copy.position for copy in self.copies)])
        # The newest row always stays: with the table empty SQLite would hand out rowid 1 again, behind
        # every cursor that counts rows by rowid.
        newest = db.execute("SELECT coalesce(max(rowid), 0) FROM requests").fetchone()[0]
        limit = min(keep_from + 1, newest)
        deleted = 0
        while True:
            # SQL text: table names are this module's constants; values are bound.
            n = db.execute(f"DELETE FROM requests WHERE rowid IN (SELECT rowid FROM requests WHERE ts < ? AND rowid < ? "  # nosec B608
                           f"LIMIT {PRUNE_BATCH})", (now - self.retention.records_s, limit)).rowcount
            deleted += n
            if n < PRUNE_BATCH:
                break
        # The minutes budgets and keep-alive's caps restart from (`spend_pico`) are kept a month whatever the retention.
        restored = ", ".join("?" for _ in RESTORED)
        # SQL text: placeholders only; values are bound.
        db.execute(f"DELETE FROM rollups WHERE res = 60 AND bucket < ? AND (bucket < ? OR dim NOT IN ({restored}))",  # nosec B608
                   (now - self.retention.records_s, now - max(self.retention.records_s, MONTH_S), *RESTORED))
        db.execute("DELETE FROM rollup_hist WHERE res = 60 AND bucket < ?", (now - self.retention.records_s,))
        for table in ("rollups", "rollup_hist"):
            # SQL text: table names are this module's constants; values are bound.
            db.execute(f"DELETE FROM {table} WHERE bucket < ?", (now - self.retention.rollups_s,))  # nosec B608
        db.execute("PRAGMA incremental_vacuum")
        for copy in self.copies:
            try:
                copy.prune(now - self.retention.records_s, now - self.retention.rollups_s)
            except copy.errors as e:
                log.warning("pruning the %s ledger failed (%s); retried at the next prune", copy.store, type(e).__name__)
        return deleted


@contextmanager
def _chore(what: str) -> Iterator[None]:
    try:
        yield
    except Exception:
        log.exception("ledger: %s failed; tried again at the next tick", what)


def read_records(path: str) -> list[dict]:
    """Every record in a ledger file, oldest first (for exports, the dashboard and tests)."""
    db = sqlite3.connect(path)
    try:
        db.row_factory = sqlite3.Row
        rows = db.execute("SELECT * FROM requests ORDER BY ts").fetchall()
    finally:
        db.close()
    return [decode_row(dict(row)) for row in rows]


def decode_row(rec: dict) -> dict:
    """A SQLite row as the record's JSON fields (the form the Redis stream holds too)."""
    for key in _JSON:
        if key in rec:
            rec[key] = json.loads(rec[key]) if rec[key] is not None else ({} if key == "cache_writes" else [])
    rec["stream"] = bool(rec.get("stream"))
    return rec


# Upstream kind -> the trace's provider (OpenAI's Responses-only upstreams replay under OpenAI's rules).
TRACE_PROVIDERS = {"anthropic": "anthropic", "openai": "openai", "openai_responses": "openai", "gemini": "gemini",
                   "gemini_interactions": "gemini"}


def export_trace(path: str, out: str) -> tuple[int, int]:
    """Write the ledger's recorded requests as a replay trace (`prefixgate replay` reads it).
    Returns (lines written, records skipped: no body kept, a failed request, or a self-hosted target). The
    gateway's own requests (keep-alive refreshes, explicit caches' upkeep) are not the application's: neither
    written nor counted (`prefixgate plan --keepalive` plans its own refreshes)."""
    written = skipped = 0
    with open(out, "w", encoding="utf-8") as f:
        for rec in read_records(path):
            if rec.get("kind"):
                continue
            if not rec.get("body") or rec["provider"] not in TRACE_PROVIDERS or failed(rec["status"]):
                skipped += 1
                continue
            line = {"t": rec["ts"], "provider": TRACE_PROVIDERS[rec["provider"]], "model": rec["model"], "route": rec["route"] or "default",
                    "tenant": rec["tenant"] or "default", "output_tokens": rec["output"], "body": json.loads(rec["body"])}
            if rec.get("response"):
                line["response"] = {"type": "message", "role": "assistant", "content": json.loads(rec["response"])}
            f.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
            written += 1
    return written, skipped
