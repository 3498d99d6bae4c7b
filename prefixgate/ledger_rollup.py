"""Per-minute and per-hour rollups of the ledger: what the dashboard reads instead of the raw records.

A rollup row sums the records of one bucket (a minute or an hour) that share one dimension's value
(`dim` route, model, key, target, provider or tenant, and `name` its value; `dim` "" sums every
record): requests, errors, tokens by class, and money in integer picodollars (so sums are exact and
equal a scan of the raw records). A record of a tenant also lands in that tenant's own rows, the same
dimensions scoped to it (`scoped`): what a tenant's dashboard reader is shown, never a sum over others. A keep-alive
refresh also lands in the row of its (route, key) pair (`KEEPALIVE_PAIR`): what keep-alive's per-key caps restart from.
Where a provider reports its own cost (OpenRouter's `usage.cost`), the rollups also keep it beside the
price table's for the same requests, and count those that differ by over 1%, the requests priced from the
provider's report alone (no price row), and those left unpriced.
Rows are per dimension, not per combination of them, so a bucket holds as many rows as there are
distinct routes plus keys plus models..., not their product (a tenant's rows at most double that).
Latency and time to first byte go into log-scale histograms beside them (bins 10% wide), from which
percentiles are read to within 5%: per minute for all records (and for all of a tenant's), per hour for
each dimension's values (a histogram has tens of bins; per minute and value they would outnumber the records).

The ledger thread maintains them from a rowid cursor: one transaction adds a batch of records to the
rollups and moves the cursor, so after a crash or kill -9 each record is rolled up exactly once (the
records not yet rolled up are picked up when the ledger opens again). Readers add the records beyond
the cursor themselves, so what they show is current to the last committed record.
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from decimal import Decimal

from prefixgate.cost import disagree

RESOLUTIONS = (60, 3600)
DIMENSIONS = ("route", "model", "key", "target", "provider", "tenant")
SUMS = ("requests", "errors", "unpriced", "uncached_input", "cache_read", "cache_write", "output",
        "spend_pico", "without_cache_pico", "savings_pico",
        # Cost check: requests priced from the provider's report alone; requests priced by the table that the
        # provider also reported a cost for ("compared") and what each said they cost; and of those, the ones
        # where the two differ by over 1%, with what each said.
        "priced_by_provider", "compared", "provider_cost_pico", "table_cost_pico",
        "cost_disagreements", "disagreeing_provider_pico", "disagreeing_table_pico",
        # The response cache: hits served and the spend they avoided; shadow mode's would-be hits and what those
        # requests cost (what serving them would have avoided). Never part of savings_pico (prompt caching).
        "response_hits", "response_avoided_pico", "shadow_hits", "shadow_avoidable_pico",
        # Keep-alive (gateway/keepalive.py): refreshes sent and what they cost (also in spend_pico), and what the
        # reads they kept alive saved on the sessions' next requests ("bought vs saved").
        "keepalive_refreshes", "keepalive_bought_pico", "keepalive_saved_pico",
        # Balanced routes: prefixes that moved to a target where they were cold, and what writing them again cost.
        "flips", "flip_cost_pico",
        # The gateway's own rows (a keep-alive refresh, an abandoned attempt, an explicit cache's upkeep: ledger kind
        # not ""), and those of them not answered 200: in `requests` and `errors`, which count rows, while the
        # dashboard shows callers' requests (requests - gateway_rows). Their cost is spend all the same.
        "gateway_rows", "gateway_row_errors",
        # Those rows' cache reads and prompt tokens (in the token sums): the hit rate is the callers' (a refresh
        # reads the whole prefix from cache, which would lift a kept-alive route's rate above what its callers got).
        "gateway_row_cache_read", "gateway_row_prompt")
BIN_RATIO = 1.1
VALUE_HIST_RES = 3600           # per-value histograms are kept per hour only (see the module docstring)
BATCH = 1000                    # records per roll-up transaction (appends wait for it)
CURSOR = "rolled_up_to"

# A rollup column; its default lets a ledger from an older version add it in place (ledger_migrate), and an
# older replica's upserts (naming fewer columns) still insert.
SUM_TYPE = "INTEGER NOT NULL DEFAULT 0"
_KEY = ("res", "bucket", "dim", "name")
_KEY_SQL = "res INTEGER, bucket INTEGER, dim TEXT, name TEXT"
# Keys ordered (res, dim, bucket, ...): a query reads one dimension's rows over a span of buckets.
_PK = "res, dim, bucket, name"
# Between a dimension and the tenant its rows are scoped to; no dimension's name holds it.
TENANT_SEP = "\x1f"
# Keep-alive's caps are per route and per key on a route (gateway/keepalive.py): a refresh's rows by route, and by this
# dimension of keep-alive rows alone, named `keepalive_pair(route, key)`. Not a dashboard grouping (DIMENSIONS).
KEEPALIVE_PAIR = "keepalive_pair"


def statements(prefix: str = "") -> tuple[list[str], str, str]:
    """(CREATE statements, rollup upsert, histogram upsert) for the tables `{prefix}rollups` and
    `{prefix}rollup_hist` (a prefix: "temp." for a connection's own tables, "prefixgate_" in Postgres)."""
    rollups, hist = f"{prefix}rollups", f"{prefix}rollup_hist"
    bare_rollups, bare_hist = rollups.split(".")[-1], hist.split(".")[-1]
    create = [
        f"CREATE TABLE IF NOT EXISTS {rollups} ({_KEY_SQL}, {', '.join(f'{s} {SUM_TYPE}' for s in SUMS)}, "
        f"PRIMARY KEY ({_PK})) WITHOUT ROWID",
        f"CREATE TABLE IF NOT EXISTS {hist} ({_KEY_SQL}, kind TEXT, bin INTEGER, n INTEGER NOT NULL, "
        f"PRIMARY KEY ({_PK}, kind, bin)) WITHOUT ROWID",
    ]
    # SQL text: table and column names are this module's constants; values are bound.
    upsert_rollup = (f"INSERT INTO {rollups} ({', '.join(_KEY + SUMS)}) VALUES ({', '.join('?' for _ in _KEY + SUMS)}) "  # nosec B608
                     f"ON CONFLICT ({_PK}) DO UPDATE SET "
                     f"{', '.join(f'{s} = {bare_rollups}.{s} + excluded.{s}' for s in SUMS)}")
    # SQL text: table and column names are this module's constants; values are bound.
    upsert_hist = (f"INSERT INTO {hist} ({', '.join(_KEY)}, kind, bin, n) VALUES ({', '.join('?' for _ in _KEY)}, ?, ?, ?) "  # nosec B608
                   f"ON CONFLICT ({_PK}, kind, bin) DO UPDATE SET n = {bare_hist}.n + excluded.n")
    return create, upsert_rollup, upsert_hist


SCHEMA, UPSERT_ROLLUP, UPSERT_HIST = statements()


def picodollars(amount: str | None) -> int:
    """Dollars (a decimal string) as an exact integer of 1e-12 dollars (prices have at most 6 decimals per MTok)."""
    return int(Decimal(amount).scaleb(12).to_integral_value()) if amount else 0


def latency_bin(ms: float) -> int:
    """The histogram bin of a duration: 0 below 1 ms, then bins BIN_RATIO wide."""
    return 0 if ms < 1 else 1 + int(math.log(ms) / math.log(BIN_RATIO))


def bin_ms(b: int) -> float:
    """A bin's representative duration (its geometric middle)."""
    return 0.5 if b == 0 else round(BIN_RATIO ** (b - 0.5), 1)


def scoped(tenant: str, dim: str = "") -> str:
    """The `dim` of tenant `tenant`'s own rows of dimension `dim` ("": every record of the tenant)."""
    return f"{dim}{TENANT_SEP}{tenant}"


def keepalive_pair(route: str, key: str) -> str:
    """The `name` of the KEEPALIVE_PAIR rows of `key`'s refreshes on `route`."""
    return f"{route}{TENANT_SEP}{key}"


def unscoped(dim: str) -> str:
    """The dimension a row's `dim` is of, whatever tenant it is scoped to."""
    return dim.split(TENANT_SEP, 1)[0]


@dataclass
class Aggregate:
    """The sums of one rollup row and its two histograms."""

    sums: list[int] = field(default_factory=lambda: [0] * len(SUMS))
    latency: Counter[int] = field(default_factory=Counter)
    ttft: Counter[int] = field(default_factory=Counter)

    @classmethod
    def of(cls, adds: list[tuple[tuple[int, ...], int | None, int | None]]) -> Aggregate:
        """The row summing records' `contribution`s (each column summed once: a record lands in up to 30 rows)."""
        return cls([sum(column) for column in zip(*(a[0] for a in adds), strict=True)],
                   Counter(a[1] for a in adds if a[1] is not None), Counter(a[2] for a in adds if a[2] is not None))


def contribution(rec: dict) -> tuple[tuple[int, ...], int | None, int | None]:
    """What one decoded record adds to each of its rollup rows: the SUMS, its latency bin and TTFT bin (none for
    the gateway's own rows: not a caller's wait, as on /metrics)."""
    status, priced = rec["status"], rec["cost_usd"] is not None
    own = bool(rec.get("kind"))
    cost = picodollars(rec["cost_usd"])
    # A table price gives a counterfactual too; a cost from the provider's report alone does not (cost.ledger_fields).
    reported, by_table = rec.get("provider_cost_usd"), rec["cost_without_cache_usd"] is not None
    compared = reported is not None and by_table and priced
    provider_cost = picodollars(reported) if compared else 0
    differs = compared and disagree(Decimal(reported), Decimal(rec["cost_usd"]))
    sums = (1, int(status != 200), int(not priced and status == 200), rec["uncached_input"] or 0, rec["cache_read"] or 0,
            sum(rec["cache_writes"].values()), rec["output"] or 0, cost,
            # No counterfactual (priced from the provider's report alone): as if it cost the same without caching.
            # An explicit zero is one: a keep-alive refresh or a cache's storage, spent only because of caching.
            cost if rec["cost_without_cache_usd"] is None else picodollars(rec["cost_without_cache_usd"]),
            picodollars(rec["savings_usd"]) if priced else 0,
            int(priced and reported is not None and not by_table), int(compared), provider_cost, cost if compared else 0,
            int(differs), provider_cost if differs else 0, cost if differs else 0,
            *_response_cache(rec, cost), *_keepalive(rec, cost), int(bool(rec.get("flip"))), picodollars(rec.get("flip_cost_usd")),
            int(own), int(own and status != 200), (rec["cache_read"] or 0) if own else 0, _prompt(rec) if own else 0)
    ttft = rec["ttft_ms"]
    if own:
        return sums, None, None
    return sums, latency_bin(rec["latency_ms"] or 0.0), None if ttft is None else latency_bin(ttft)


def _prompt(rec: dict) -> int:
    return (rec["uncached_input"] or 0) + (rec["cache_read"] or 0) + sum(rec["cache_writes"].values())


def _response_cache(rec: dict, cost: int) -> tuple[int, int, int, int]:
    state = rec.get("response_cache") or ""
    hit, shadow = state == "hit", state == "shadow-hit" and rec["status"] == 200
    return int(hit), picodollars(rec.get("avoided_usd")) if hit else 0, int(shadow), cost if shadow else 0


def _keepalive(rec: dict, cost: int) -> tuple[int, int, int]:
    refresh = rec.get("kind") == "keepalive"
    return int(refresh), cost if refresh else 0, picodollars(rec.get("keepalive_saved_usd"))


def aggregate(records: Iterable[dict], by_tenant: bool = True, tenants_only: bool = False) -> dict[tuple, Aggregate]:
    """Decoded records (the ledger's JSON fields) summed per (resolution, bucket start, dimension, value):
    each record lands in its minute and its hour, once for all records (dimension "") and once per
    dimension (a keep-alive refresh once more, in its KEEPALIVE_PAIR row); with `by_tenant`, a tenant's record once
    more in each of its tenant's scoped rows (with `tenants_only`, in those alone: ledger_tenant_backfill)."""
    rows: defaultdict[tuple, list] = defaultdict(list)
    for rec in records:
        if tenants_only and not rec.get("tenant"):
            continue
        adds = contribution(rec)
        keys = [("", ""), *((d, rec[d] or "") for d in DIMENSIONS)]
        if by_tenant and rec.get("tenant"):
            mine = [(scoped(rec["tenant"], dim), name) for dim, name in keys]
            keys = mine if tenants_only else keys + mine
        if rec.get("kind") == "keepalive" and not tenants_only:
            keys.append((KEEPALIVE_PAIR, keepalive_pair(rec["route"] or "", rec["key"] or "")))
        for res in RESOLUTIONS:
            bucket = int(rec["ts"] // res) * res
            for dim, name in keys:
                rows[(res, bucket, dim, name)].append(adds)
    return {key: Aggregate.of(adds) for key, adds in rows.items()}


def upsert_rows(aggs: dict[tuple, Aggregate]) -> tuple[list[tuple], list[tuple]]:
    """Parameters for UPSERT_ROLLUP and UPSERT_HIST."""
    rollups = [(*key, *agg.sums) for key, agg in aggs.items()]
    hist = [(*key, kind, b, n) for key, agg in aggs.items() if key[0] == VALUE_HIST_RES or unscoped(key[2]) == ""
            for kind, counts in (("l", agg.latency), ("t", agg.ttft)) for b, n in counts.items()]
    return rollups, hist


def create(db: sqlite3.Connection) -> None:
    for statement in SCHEMA:
        db.execute(statement)
    db.execute("CREATE TABLE IF NOT EXISTS ledger_meta (key TEXT PRIMARY KEY, value TEXT)")


def cursor(db: sqlite3.Connection) -> int:
    """The last rowid rolled up (0: none yet)."""
    row = db.execute("SELECT value FROM ledger_meta WHERE key = ?", (CURSOR,)).fetchone()
    return int(row[0]) if row else 0


def _yielding(rows: list, every: int = 4) -> Iterator:
    """`rows`, letting the other threads run after every few: summing takes ~40 us of the GIL a record,
    and the request path, which takes the GIL back after each of its own reads and writes, would otherwise
    wait out the interpreter's 5 ms switch interval each time (a 50 ms tick's batch gave requests 2-6 ms)."""
    for i, row in enumerate(rows):
        if i % every == every - 1:
            time.sleep(0)
        yield row


def roll_up(db: sqlite3.Connection, columns: list[str], decode: Callable[[dict], dict],
            appends: AbstractContextManager = nullcontext()) -> int:
    """Add the next batch of records beyond the cursor to the rollups and move the cursor, in one
    transaction (`db` in autocommit mode). Returns how many records were rolled up.

    The batch is read and summed before the write transaction (a WAL reader takes no lock), so the write
    lock is held only for the upserts: the request path's appends wait that long, not for the whole
    roll-up. `appends` is the appenders' lock in this process: they then wait on it, not in SQLite's busy
    handler, whose sleeps start at 1 ms and grow (a 50 ms roll-up tick gave ~2% of requests 3-4 ms)."""
    start = cursor(db)
    # SQL text: table and column names are this module's constants; values are bound.
    rows = db.execute(f"SELECT rowid, {', '.join(columns)} FROM requests WHERE rowid > ? ORDER BY rowid LIMIT {BATCH}",  # nosec B608
                      (start,)).fetchall()
    if not rows:
        return 0
    rollups, hist = upsert_rows(aggregate(decode(dict(zip(columns, row[1:], strict=True))) for row in _yielding(rows)))
    with appends:
        db.execute("BEGIN IMMEDIATE")
        try:
            if cursor(db) != start:
                # Another process sharing this ledger rolled these records up meanwhile.
                db.execute("ROLLBACK")
                return 0
            db.executemany(UPSERT_ROLLUP, rollups)
            db.executemany(UPSERT_HIST, hist)
            db.execute("INSERT OR REPLACE INTO ledger_meta VALUES (?, ?)", (CURSOR, str(rows[-1][0])))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    return len(rows)
