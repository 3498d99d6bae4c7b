"""Whether a checkpoint pays, and with which TTL. Costs are per token, relative to plain input (1.0);
r is the read multiplier, w_t the write multiplier for TTL t, p_t the learned chance that the
prefix is used again within t.

Two shapes of prefix need two models:
- A *recurring* prefix (tools and system, a shared document) is the same tokens on every request:
  each request reads it (r) or, after a gap longer than t, writes it again (w_t). Steady state:
  `p_t * r + (1 - p_t) * w_t` against 1. For Sonnet (r = 0.1, w_5m = 1.25, w_1h = 2) 5m pays from
  p_5m > 0.22, and 1h beats 5m when requests often come back after 5 minutes but within the hour.
- A *growing* prefix (a conversation) is written once per turn for the next turn to read: this
  turn's new tokens cost the premium w_t - 1 now, and the next turn saves (1 - r) on the whole
  conversation with probability p_t. A long conversation can pay for 1h; a short one rarely does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from prefixgate.cache_planner.lifetime import SplitChoice, choose_split, p_kept, ttl_options
from prefixgate.cache_planner.reuse import BOUNDS, ReuseStats, SessionReturns
from prefixgate.cost import Price
from prefixgate.ir import ttl_seconds


@dataclass(frozen=True)
class Choice:
    ttl: str | None           # None: do not mark
    expected_cost: float      # per token, relative to plain input
    reason: str


def _multipliers(price: Price, ttl: str) -> tuple[float, float]:
    """(read, write) prices relative to plain input."""
    return float(price.cache_read / price.input), float(price.cache_write.get(ttl, price.input) / price.input)


def expected_cost(stats: ReuseStats, price: Price, ttl: str) -> float:
    """Expected cost per token of a recurring prefix with a `ttl` checkpoint, relative to plain input (1.0)."""
    if price.input <= 0:
        return 1.0
    read, write = _multipliers(price, ttl)
    p = stats.p_within(ttl_seconds(ttl))
    return p * read + (1 - p) * write


def _cheapest(stats: ReuseStats | SessionReturns, ttls: tuple[str, ...], cost: Callable[[str, float], float], what: str,
              why_not: str) -> Choice:
    """The cheapest of no checkpoint (cost 1) and each TTL; `cost(ttl, p)` with p = P(reuse within ttl)."""
    best = Choice(None, 1.0, "no checkpoint")
    for ttl in ttls:
        p = stats.p_within(ttl_seconds(ttl))
        c = cost(ttl, p)
        if c < best.expected_cost:
            best = Choice(ttl, c, f"p({what}<{ttl})={p:.2f}")
    if best.ttl is None:
        ps = ", ".join(f"p({what}<{t})={stats.p_within(ttl_seconds(t)):.2f}" for t in ttls)
        best = Choice(None, 1.0, f"{why_not} ({ps})")
    return best


def choose_ttl(stats: ReuseStats, price: Price, ttls: tuple[str, ...], keepalive: bool = False) -> Choice:
    """For a recurring prefix: the cheapest of no checkpoint and a checkpoint with each TTL in `ttls`.

    `keepalive`: the route keeps its entries through idle gaps, so its operator expects it back after them.
    Then the route's first write, with no evidence yet, takes the longest TTL: an entry keeps its first write's
    TTL for as long as it is hit (a hit never lengthens it), and while conversations read longer entries past it
    a lapsed one is not written again until a session starts, so a short first write would be paid for once
    per lapse, with no way to correct it once the route's gaps are known."""
    if price.input <= 0:
        return Choice(None, 1.0, "free model: nothing to save")
    if keepalive and not stats.requests and len(ttls) > 1:
        longest = max(ttls, key=ttl_seconds)
        return Choice(longest, expected_cost(stats, price, longest),
                      "first write on a keep-alive route: it keeps this TTL for as long as it is hit")
    return _cheapest(stats, ttls, lambda ttl, p: expected_cost(stats, price, ttl), "reuse",
                     "reuse too rare to pay the write")


class _Kept:
    """A route's reuse evidence as keep-alive sees it: a return after the TTL counts by the share of the re-write
    the refreshes until then save (`lifetime.p_kept`), or an upgrade through the reply (`upgrade`)."""

    def __init__(self, stats: ReuseStats | SessionReturns, read: float, miss: float,
                 upgrade: tuple[float, float] | None, refresh: float) -> None:
        self.stats, self.read, self.miss, self.upgrade, self.refresh = stats, read, miss, upgrade, refresh

    def p_within(self, seconds: float) -> float:
        return p_kept(self.stats.p_within, seconds, self.read, self.miss, BOUNDS, upgrade=self.upgrade,
                      refresh=self.refresh)


def _kept(stats: ReuseStats | SessionReturns, price: Price, ttls: tuple[str, ...], fresh: int, total: int,
          upgrade: bool, base: int = 0) -> _Kept:
    """`stats` as keep-alive sees them, for a conversation of `total` tokens past a static prefix of `base` (kept
    by its own entry: only `total` is at stake). A refresh re-sends and reads both. With `upgrade`, a
    short-lived entry can be rewritten through the next reply with the longest TTL: it costs a read of the
    prefix plus, on the reply (about as long as this turn's new tokens, `fresh`), the long write and its read
    less the short write the next turn would have paid."""
    read = float(price.cache_read / price.input)
    refresh = read * (total + base) / total if total > 0 else read
    up = None
    if upgrade and len(ttls) > 1 and total > 0:
        short, long = min(ttls, key=ttl_seconds), max(ttls, key=ttl_seconds)
        extra = _multipliers(price, long)[1] + read - _multipliers(price, short)[1]
        up = (float(ttl_seconds(long)), refresh + extra * fresh / total)
    return _Kept(stats, read, _miss(price, ttls), up, refresh)


def _miss(price: Price, ttls: tuple[str, ...]) -> float:
    """After a miss the next turn writes the whole prefix again, at the cheapest write price offered at least."""
    return min(_multipliers(price, ttl)[1] for ttl in ttls) if ttls else 1.0


def choose_growing_ttl(stats: ReuseStats | SessionReturns, price: Price, ttls: tuple[str, ...], carried: int, fresh: int,
                       keepalive: bool = False, upgrade: bool = False, base: int = 0) -> Choice:
    """For a growing prefix: `carried` tokens were read from cache this request, `fresh` are written now, past a
    static prefix of `base` tokens with an entry of its own. `keepalive`: refreshes will keep the entry through a
    break when that pays; `upgrade`: or an upgrade through the reply."""
    total = carried + fresh
    if price.input <= 0 or total <= 0:
        return Choice(None, 1.0, "nothing to save")
    miss = _miss(price, ttls)
    if keepalive and ttls:
        stats = _kept(stats, price, ttls, fresh, total, upgrade, base)  # type: ignore[assignment]

    def cost(ttl: str, p: float) -> float:
        return growing_cost(price, ttl, p, carried, fresh, miss) / total

    choice = _cheapest(stats, ttls, cost, "next turn", f"the next turn is too unlikely to pay for writing {fresh} tokens")
    if choice.ttl is not None:
        choice = Choice(choice.ttl, choice.expected_cost, f"{choice.reason}, {fresh} new of {total} tokens")
    return choice


def growing_cost(price: Price, ttl: str, p: float, carried: int, fresh: int, miss: float = 1.0) -> float:
    """Expected cost, in plain-input tokens, of a growing prefix marked with `ttl`: `carried` tokens
    read now, `fresh` written now, and the whole read by the next turn with probability `p` (credited
    here, as that turn's saving is this checkpoint's doing) instead of sent again at `miss` per token."""
    read, write = _multipliers(price, ttl)
    total = carried + fresh
    return total + fresh * (write - 1) - p * total * (miss - read)


def recurring_cost(stats: ReuseStats, price: Price, ttl: str, size: int) -> float:
    """Expected cost, in plain-input tokens, of `size` tokens of a recurring prefix marked with `ttl`."""
    return size * expected_cost(stats, price, ttl)


def split_conversation(stats: ReuseStats | SessionReturns, price: Price, ttls: tuple[str, ...], base: int, carried: int, anchor: int,
                       end: int, keepalive: bool = False, upgrade: bool = False) -> SplitChoice:
    """For a growing prefix (tokens past the static `base`: `carried` read, the first new block ending at
    `anchor`, the prefix at `end`): one checkpoint at the end, or the longest TTL through the first new block and a
    shorter one after it (`lifetime.choose_split`)."""
    returns = _kept(stats, price, ttls, end - base - carried, end - base, upgrade, base) if keepalive and ttls else stats
    return choose_split(returns.p_within, ttl_options(price, ttls, ttl_seconds), carried, anchor - base, end - base)
