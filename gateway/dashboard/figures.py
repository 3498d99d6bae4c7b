"""The dashboard's figures over a set of ledger records: totals, a time series and breakdowns.

Money adds up in `Decimal` from the ledger's decimal strings and leaves as strings, so the totals the
page shows are exactly the ledger's. Hit rate is by tokens: cache reads over all prompt tokens.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal

from prefixgate.ledger import LedgerRecord

ZERO = Decimal(0)
GROUPINGS = ("route", "model", "key", "target", "provider", "tenant")


@dataclass
class Figures:
    requests: int = 0
    errors: int = 0
    unpriced: int = 0            # answered requests whose model has no known price
    spend: Decimal = ZERO
    spend_without_cache: Decimal = ZERO
    savings: Decimal = ZERO
    uncached_input: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    ttfts_ms: list[float] = field(default_factory=list)

    def add(self, rec: LedgerRecord) -> None:
        self.requests += 1
        if rec.status != 200:
            self.errors += 1
        if rec.cost_usd is None:
            if rec.status == 200:
                self.unpriced += 1
        else:
            self.spend += Decimal(rec.cost_usd)
            self.spend_without_cache += Decimal(rec.cost_without_cache_usd or rec.cost_usd)
            self.savings += Decimal(rec.savings_usd or 0)
        self.uncached_input += rec.uncached_input
        self.cache_read += rec.cache_read
        self.cache_write += sum(rec.cache_writes.values())
        self.output += rec.output
        self.latencies_ms.append(rec.latency_ms)
        if rec.ttft_ms is not None:
            self.ttfts_ms.append(rec.ttft_ms)

    @property
    def prompt_tokens(self) -> int:
        return self.uncached_input + self.cache_read + self.cache_write

    @property
    def hit_rate(self) -> float | None:
        """Cache-read share of prompt tokens; None with no prompt tokens (not 0: nothing was asked)."""
        return self.cache_read / self.prompt_tokens if self.prompt_tokens else None

    def to_dict(self) -> dict:
        return {
            "requests": self.requests, "errors": self.errors, "unpriced": self.unpriced,
            "spend_usd": str(self.spend), "spend_without_cache_usd": str(self.spend_without_cache),
            "savings_usd": str(self.savings), "hit_rate": self.hit_rate,
            "tokens": {"uncached_input": self.uncached_input, "cache_read": self.cache_read,
                       "cache_write": self.cache_write, "output": self.output},
            "latency_p50_ms": percentile(self.latencies_ms, 50), "latency_p95_ms": percentile(self.latencies_ms, 95),
            "ttft_p95_ms": percentile(self.ttfts_ms, 95),
        }


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def totals(records: Iterable[LedgerRecord]) -> Figures:
    fig = Figures()
    for rec in records:
        fig.add(rec)
    return fig


def timeseries(records: Iterable[LedgerRecord], since: float, until: float, step: float) -> list[dict]:
    """One point per `step` seconds from `since`: spend, savings and hit rate in that bucket."""
    n = max(1, math.ceil((until - since) / step))
    buckets = [Figures() for _ in range(n)]
    for rec in records:
        i = int((rec.ts - since) // step)
        if 0 <= i < n:
            buckets[i].add(rec)
    return [{"t": since + i * step, "requests": b.requests, "spend_usd": str(b.spend),
             "savings_usd": str(b.savings), "spend_without_cache_usd": str(b.spend_without_cache),
             "hit_rate": b.hit_rate} for i, b in enumerate(buckets)]


def breakdown(records: Iterable[LedgerRecord], by: str) -> list[dict]:
    """The same figures per route / model / key / target / provider / tenant, biggest spend first."""
    if by not in GROUPINGS:
        raise ValueError(f"breakdown by must be one of {', '.join(GROUPINGS)}, got {by!r}")
    groups: dict[str, Figures] = {}
    for rec in records:
        groups.setdefault(getattr(rec, by), Figures()).add(rec)
    rows = [{"name": name, **fig.to_dict()} for name, fig in groups.items()]
    rows.sort(key=lambda r: (-Decimal(r["spend_usd"]), -r["requests"], r["name"]))
    return rows
