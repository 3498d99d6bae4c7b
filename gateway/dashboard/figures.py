"""The dashboard's figures from the ledger's rollups: totals, a time series, breakdowns and per-route
hit rates, each one SQL aggregate over a `source.view` (rows per bucket and value, never per record).

Windows are read in whole minutes: the minutes whose start lies in [since, until), taken from hour
rollups where whole hours fit inside and from minute rollups at the edges. Money is summed in integer
picodollars and leaves as exact decimal strings, so the totals the page shows are exactly the ledger's.
Hit rate is by tokens: cache reads over all prompt tokens, of callers' requests. Requests, errors and the
hit rate are callers' requests: the gateway's own rows (keep-alive refreshes, abandoned attempts, explicit
caches' upkeep) are left out of them and counted in spend, tokens and their own figures. Latency percentiles come from histograms
with bins 10% wide (within 5% of the exact figure); a breakdown row's are over the whole hours that
the window touches (per-value histograms are kept per hour).
"""

from __future__ import annotations

import math
import sqlite3
from collections import defaultdict
from decimal import Decimal

from prefixgate.ledger_rollup import DIMENSIONS, SUMS, VALUE_HIST_RES, bin_ms

GROUPINGS = DIMENSIONS
MINUTE, HOUR = 60, 3600


def spans(since: float, until: float) -> list[tuple[int, float, float]]:
    """(resolution, first bucket, end) triples covering the window's minutes (see the module docstring)."""
    lo = math.floor(since / MINUTE) * MINUTE
    first_hour = math.ceil(lo / HOUR) * HOUR
    last_hour = math.floor(math.floor(until / MINUTE) * MINUTE / HOUR) * HOUR
    if first_hour >= last_hour:
        return [(MINUTE, lo, until)]
    return [(MINUTE, lo, first_hour), (HOUR, first_hour, last_hour), (MINUTE, last_hour, until)]


def _rows(table: str, since: float, until: float, dim: str, columns: str, res: int | None = None) -> tuple[str, list]:
    """A subquery over `table` (main and the temp tail) restricted to the window and to the rows of `dim`
    ("": all records), and its parameters; with `res`, only rollups of that resolution that overlap it."""
    parts, params = [], []
    for r, lo, hi in ([(res, math.floor(since / res) * res, until)] if res else spans(since, until)):
        for schema in ("main", "temp"):
            # SQL text: table, schema and column names are this module's constants and the subquery is built from them; values are bound.
            parts.append(f"SELECT {columns} FROM {schema}.{table} WHERE res = ? AND bucket >= ? AND bucket < ? AND dim = ?")  # nosec B608
            params += [r, lo, hi, dim]
    return "(" + " UNION ALL ".join(parts) + ")", params


def _money(pico: int) -> str:
    return str(Decimal(pico).scaleb(-12).normalize()) if pico else "0"


def _hit_rate(sums: dict[str, int]) -> float | None:
    """Cache-read share of callers' prompt tokens; None with none (not 0: nothing was asked)."""
    prompt = sums["uncached_input"] + sums["cache_read"] + sums["cache_write"] - sums["gateway_row_prompt"]
    return (sums["cache_read"] - sums["gateway_row_cache_read"]) / prompt if prompt else None


def _requests(sums: dict[str, int]) -> int:
    return sums["requests"] - sums["gateway_rows"]


def _figures(sums: dict[str, int], latency: dict[int, int] | None = None, ttft: dict[int, int] | None = None) -> dict:
    return {
        "requests": _requests(sums), "errors": sums["errors"] - sums["gateway_row_errors"], "unpriced": sums["unpriced"],
        "spend_usd": _money(sums["spend_pico"]), "spend_without_cache_usd": _money(sums["without_cache_pico"]),
        "savings_usd": _money(sums["savings_pico"]),
        "hit_rate": _hit_rate(sums),
        "tokens": {k: sums[k] for k in ("uncached_input", "cache_read", "cache_write", "output")},
        "latency_p50_ms": percentile(latency or {}, 50), "latency_p95_ms": percentile(latency or {}, 95),
        "ttft_p95_ms": percentile(ttft or {}, 95), "cost_check": cost_check(sums),
        # Apart from savings_usd (prompt caching): requests answered by the response cache, not sent at all.
        "response_cache": {"hits": sums["response_hits"], "avoided_usd": _money(sums["response_avoided_pico"]),
                           "shadow_hits": sums["shadow_hits"],
                           "shadow_avoidable_usd": _money(sums["shadow_avoidable_pico"])},
        # Keep-alive refreshes: bought (in spend) against what the reads they kept alive saved.
        "keepalive": {"refreshes": sums["keepalive_refreshes"], "bought_usd": _money(sums["keepalive_bought_pico"]),
                      "saved_usd": _money(sums["keepalive_saved_pico"])},
        # Balanced routes: prefixes answered where they were cold (gateway/sticky.py), and the re-writes' cost.
        "flips": {"count": sums["flips"], "cost_usd": _money(sums["flip_cost_pico"])},
    }


def cost_check(sums: dict[str, int]) -> dict:
    """The provider's own reported cost against the price table's, over the requests that have both and over
    those of them that differ by over 1%, and the requests priced from the provider's report alone."""
    return {"compared": sums["compared"], **_against(sums["provider_cost_pico"], sums["table_cost_pico"]),
            "disagreements": sums["cost_disagreements"],
            "disagreeing": _against(sums["disagreeing_provider_pico"], sums["disagreeing_table_pico"]),
            "priced_by_provider": sums["priced_by_provider"]}


def _against(provider: int, table: int) -> dict:
    # The difference is relative to the table's figure; None where the table priced those requests at nothing.
    return {"provider_usd": _money(provider), "table_usd": _money(table), "difference_usd": _money(provider - table),
            "difference": (provider - table) / table if table else None}


def percentile(histogram: dict[int, int], q: float) -> float | None:
    """Nearest-rank percentile of a latency histogram (bin -> count); None when it is empty."""
    total = sum(histogram.values())
    if not total:
        return None
    rank, seen = max(1, math.ceil(q / 100 * total)), 0
    for b in sorted(histogram):
        seen += histogram[b]
        if seen >= rank:
            return bin_ms(b)
    raise AssertionError("unreachable")


_SUM_SQL = ", ".join(f"coalesce(sum({s}), 0)" for s in SUMS)


def _histograms(db: sqlite3.Connection, since: float, until: float, by: str | None) -> dict[str, dict[str, dict[int, int]]]:
    """{group name: {"l": latency histogram, "t": ttft histogram}} (one group, "", without `by`)."""
    sub, params = _rows("rollup_hist", since, until, by or "", "name, kind, bin, n", res=VALUE_HIST_RES if by else None)
    out: dict[str, dict[str, dict[int, int]]] = defaultdict(lambda: {"l": {}, "t": {}})
    # SQL text: table, schema and column names are this module's constants and the subquery is built from them; values are bound.
    for group, kind, b, n in db.execute(f"SELECT name, kind, bin, sum(n) FROM {sub} GROUP BY name, kind, bin", params):  # nosec B608
        out[group][kind][b] = n
    return out


def totals(db: sqlite3.Connection, since: float, until: float) -> dict:
    sub, params = _rows("rollups", since, until, "", ", ".join(SUMS))
    # SQL text: table, schema and column names are this module's constants and the subquery is built from them; values are bound.
    sums = dict(zip(SUMS, db.execute(f"SELECT {_SUM_SQL} FROM {sub}", params).fetchone(), strict=True))  # nosec B608
    hist = _histograms(db, since, until, None)[""]
    return _figures(sums, hist["l"], hist["t"])


# What a time-series point reads: summing only these keeps the chart's query as cheap as the rollups grow.
_POINT_SUMS = ("requests", "gateway_rows", "uncached_input", "cache_read", "cache_write", "gateway_row_cache_read",
               "gateway_row_prompt", "spend_pico", "without_cache_pico", "savings_pico")


def timeseries(db: sqlite3.Connection, since: float, until: float, step: float) -> list[dict]:
    """One point per `step` seconds from `since`: spend, savings and hit rate in that bucket (with steps of
    an hour or more, whole hours are read from hour rollups and placed by their start)."""
    n = max(1, math.ceil((until - since) / step))
    sub, params = _rows("rollups", since, until, "", "bucket, " + ", ".join(_POINT_SUMS), res=MINUTE if step < HOUR else None)
    points = [dict.fromkeys(_POINT_SUMS, 0) for _ in range(n)]
    # SQL text: table, schema and column names are this module's constants and the subquery is built from them; values are bound.
    query = f"SELECT CAST((bucket - ?) / ? AS INTEGER) AS i, {', '.join(f'coalesce(sum({s}), 0)' for s in _POINT_SUMS)} FROM {sub} GROUP BY i"  # nosec B608
    for i, *sums in db.execute(query, [since, step, *params]):
        points[min(max(i, 0), n - 1)] = dict(zip(_POINT_SUMS, sums, strict=True))
    out = []
    for i, s in enumerate(points):
        out.append({"t": since + i * step, "requests": _requests(s), "spend_usd": _money(s["spend_pico"]),
                    "savings_usd": _money(s["savings_pico"]), "spend_without_cache_usd": _money(s["without_cache_pico"]),
                    "hit_rate": _hit_rate(s)})
    return out


def breakdown(db: sqlite3.Connection, since: float, until: float, by: str) -> list[dict]:
    """The same figures per route / model / key / target / provider / tenant, biggest spend first."""
    if by not in GROUPINGS:
        raise ValueError(f"breakdown by must be one of {', '.join(GROUPINGS)}, got {by!r}")
    sub, params = _rows("rollups", since, until, by, "name, " + ", ".join(SUMS))
    hist = _histograms(db, since, until, by)
    rows = []
    # SQL text: table, schema and column names are this module's constants and the subquery is built from them; values are bound.
    for name, *sums in db.execute(f"SELECT name, {_SUM_SQL} FROM {sub} GROUP BY name", params):  # nosec B608
        h = hist[name]
        rows.append({"name": name, **_figures(dict(zip(SUMS, sums, strict=True)), h["l"], h["t"])})
    rows.sort(key=lambda r: (-Decimal(r["spend_usd"]), -r["requests"], r["name"]))
    return rows


def route_hit_rates(db: sqlite3.Connection, since: float, until: float) -> dict[str, tuple[int, float | None]]:
    """{route: (callers' answered requests, their hit rate)} over the window (what the hit-rate alerts compare)."""
    sub, params = _rows("rollups", since, until, "route", "name, " + ", ".join(SUMS))
    out = {}
    # SQL text: table, schema and column names are this module's constants and the subquery is built from them; values are bound.
    query = (f"SELECT name, sum(requests) - sum(gateway_rows) - sum(errors) + sum(gateway_row_errors), "  # nosec B608
             f"sum(cache_read) - sum(gateway_row_cache_read), "
             f"sum(uncached_input) + sum(cache_read) + sum(cache_write) - sum(gateway_row_prompt) FROM {sub} GROUP BY name")
    for route, answered, read, prompt in db.execute(query, params):
        out[route] = (answered, read / prompt if prompt else None)
    return out
