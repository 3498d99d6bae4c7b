"""Whether a checkpoint pays, and with which TTL.

Per token of a prefix, relative to the plain input price: with TTL t, a request that finds the
entry pays the read multiplier r, one that does not pays the write multiplier w_t (and writes it
again). With p_t the learned chance that the next use comes within t, the expected cost is
`p_t * r + (1 - p_t) * w_t`; without a checkpoint it is 1. We pick the cheapest. For Anthropic
Sonnet (r = 0.1, w_5m = 1.25, w_1h = 2) a 5m checkpoint pays from p_5m > 0.22, and 1h beats 5m
when traffic often comes back after 5 minutes but within the hour.
"""

from __future__ import annotations

from dataclasses import dataclass

from prefixgate.cache_planner.reuse import ReuseStats

from prefixgate.cost import Price
from prefixgate.ir import ttl_seconds


@dataclass(frozen=True)
class Choice:
    ttl: str | None           # None: do not mark
    expected_cost: float      # per token, relative to plain input
    reason: str


def choose_ttl(stats: ReuseStats, price: Price, ttls: tuple[str, ...]) -> Choice:
    """The cheapest of no checkpoint and a checkpoint with each TTL in `ttls`."""
    if price.input <= 0:
        return Choice(None, 1.0, "free model: nothing to save")
    read = float(price.cache_read / price.input)
    best = Choice(None, 1.0, "no checkpoint")
    for ttl in ttls:
        write = float(price.cache_write.get(ttl, price.input) / price.input)
        p = stats.p_within(ttl_seconds(ttl))
        cost = p * read + (1 - p) * write
        if cost < best.expected_cost:
            best = Choice(ttl, cost, f"p(reuse<{ttl})={p:.2f}")
    if best.ttl is None:
        ps = ", ".join(f"p(reuse<{t})={stats.p_within(ttl_seconds(t)):.2f}" for t in ttls)
        best = Choice(None, 1.0, f"reuse too rare to pay the write ({ps})")
    return best
