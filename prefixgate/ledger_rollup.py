"""Per-minute and per-hour rollups of the ledger: what the dashboard reads instead of the raw records.

A rollup row sums the records of one bucket (a minute or an hour) that share route, model, key,
target, provider and tenant: requests, errors, tokens by class, and money in integer picodollars (so
sums are exact and equal a scan of the raw records). Latency and time to first byte go into log-scale
histograms beside it (bins 10% wide), from which percentiles are read to within 5%.

The ledger thread maintains them from a rowid cursor: one transaction adds a batch of records to the
rollups and moves the cursor, so after a crash or kill -9 each record is rolled up exactly once (the
records not yet rolled up are picked up when the ledger opens again). Readers add the records beyond
the cursor themselves, so what they show is current to the last committed record.
"""

from __future__ import annotations

import math
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal

RESOLUTIONS = (60, 3600)
DIMENSIONS = ("route", "model", "key", "target", "provider", "tenant")
SUMS = ("requests", "errors", "unpriced", "uncached_input", "cache_read", "cache_write", "output",
        "spend_pico", "without_cache_pico", "savings_pico")
ALL_GROUPS = ("",) * len(DIMENSIONS)
BIN_RATIO = 1.1
BATCH = 1000                    # records per roll-up transaction (appends wait for it)
CURSOR = "rolled_up_to"

_KEY = ("res", "bucket", *DIMENSIONS)
SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS rollups ({', '.join(f'{c} TEXT' if c in DIMENSIONS else f'{c} INTEGER' for c in _KEY)}, "
    f"{', '.join(f'{s} INTEGER NOT NULL' for s in SUMS)}, PRIMARY KEY ({', '.join(_KEY)}))",
    f"CREATE TABLE IF NOT EXISTS rollup_hist ({', '.join(f'{c} TEXT' if c in DIMENSIONS else f'{c} INTEGER' for c in _KEY)}, "
    f"kind TEXT, bin INTEGER, n INTEGER NOT NULL, PRIMARY KEY ({', '.join(_KEY)}, kind, bin))",
    "CREATE TABLE IF NOT EXISTS ledger_meta (key TEXT PRIMARY KEY, value TEXT)",
)
UPSERT_ROLLUP = (f"INSERT INTO rollups ({', '.join(_KEY + SUMS)}) VALUES ({', '.join('?' for _ in _KEY + SUMS)}) "
                 f"ON CONFLICT ({', '.join(_KEY)}) DO UPDATE SET {', '.join(f'{s} = {s} + excluded.{s}' for s in SUMS)}")
UPSERT_HIST = (f"INSERT INTO rollup_hist ({', '.join(_KEY)}, kind, bin, n) VALUES ({', '.join('?' for _ in _KEY)}, ?, ?, ?) "
               f"ON CONFLICT ({', '.join(_KEY)}, kind, bin) DO UPDATE SET n = n + excluded.n")


def picodollars(amount: str | None) -> int:
    """Dollars (a decimal string) as an exact integer of 1e-12 dollars (prices have at most 6 decimals per MTok)."""
    return int(Decimal(amount).scaleb(12).to_integral_value()) if amount else 0


def latency_bin(ms: float) -> int:
    """The histogram bin of a duration: 0 below 1 ms, then bins BIN_RATIO wide."""
    return 0 if ms < 1 else 1 + int(math.log(ms) / math.log(BIN_RATIO))


def bin_ms(b: int) -> float:
    """A bin's representative duration (its geometric middle)."""
    return 0.5 if b == 0 else round(BIN_RATIO ** (b - 0.5), 1)


@dataclass
class Aggregate:
    """The sums of one rollup row and its two histograms."""

    sums: list[int] = field(default_factory=lambda: [0] * len(SUMS))
    latency: Counter[int] = field(default_factory=Counter)
    ttft: Counter[int] = field(default_factory=Counter)

    def add(self, rec: dict) -> None:
        s = self.sums
        status = rec["status"]
        s[0] += 1
        s[1] += status != 200
        if rec["cost_usd"] is None:
            s[2] += status == 200
        else:
            s[7] += picodollars(rec["cost_usd"])
            s[8] += picodollars(rec["cost_without_cache_usd"] or rec["cost_usd"])
            s[9] += picodollars(rec["savings_usd"])
        s[3] += rec["uncached_input"] or 0
        s[4] += rec["cache_read"] or 0
        s[5] += sum(rec["cache_writes"].values())
        s[6] += rec["output"] or 0
        self.latency[latency_bin(rec["latency_ms"] or 0.0)] += 1
        if rec["ttft_ms"] is not None:
            self.ttft[latency_bin(rec["ttft_ms"])] += 1


def aggregate(records: Iterable[dict]) -> dict[tuple, Aggregate]:
    """Decoded records (the ledger's JSON fields) summed per (resolution, bucket start, dimensions).

    Each record lands in four rows: its minute and its hour, per group (res 60, 3600) and summed over
    every group (res -60, -3600, dimensions empty): the page's totals and time series read those, one
    row per bucket however many routes, keys and models there are."""
    out: dict[tuple, Aggregate] = {}
    for rec in records:
        dims = tuple(rec[d] or "" for d in DIMENSIONS)
        for res in RESOLUTIONS:
            bucket = int(rec["ts"] // res) * res
            for key in ((res, bucket, *dims), (-res, bucket, *ALL_GROUPS)):
                agg = out.get(key)
                if agg is None:
                    agg = out[key] = Aggregate()
                agg.add(rec)
    return out


def upsert_rows(aggs: dict[tuple, Aggregate]) -> tuple[list[tuple], list[tuple]]:
    """Parameters for UPSERT_ROLLUP and UPSERT_HIST."""
    rollups = [(*key, *agg.sums) for key, agg in aggs.items()]
    hist = [(*key, kind, b, n) for key, agg in aggs.items()
            for kind, counts in (("l", agg.latency), ("t", agg.ttft)) for b, n in counts.items()]
    return rollups, hist


def create(db: sqlite3.Connection) -> None:
    for statement in SCHEMA:
        db.execute(statement)


def cursor(db: sqlite3.Connection) -> int:
    """The last rowid rolled up (0: none yet)."""
    row = db.execute("SELECT value FROM ledger_meta WHERE key = ?", (CURSOR,)).fetchone()
    return int(row[0]) if row else 0


def roll_up(db: sqlite3.Connection, columns: list[str], decode: Callable[[dict], dict]) -> int:
    """Add the next batch of records beyond the cursor to the rollups and move the cursor, in one
    transaction (`db` in autocommit mode). Returns how many records were rolled up."""
    db.execute("BEGIN IMMEDIATE")
    try:
        start = cursor(db)
        rows = db.execute(f"SELECT rowid, {', '.join(columns)} FROM requests WHERE rowid > ? ORDER BY rowid LIMIT {BATCH}",
                          (start,)).fetchall()
        if rows:
            rollups, hist = upsert_rows(aggregate(decode(dict(zip(columns, row[1:], strict=True))) for row in rows))
            db.executemany(UPSERT_ROLLUP, rollups)
            db.executemany(UPSERT_HIST, hist)
            db.execute("INSERT OR REPLACE INTO ledger_meta VALUES (?, ?)", (CURSOR, str(rows[-1][0])))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return len(rows)
