"""What one ledger record may hold: counts and amounts that every store can sum and copy.

Rollups and the shared stores keep tokens and money as 64-bit integers (money in picodollars: at most about
$9.2 million). A record past that (a provider's impossible usage the parsers did not see, a caller's estimate of
10**18 output tokens, a declared price of billions) could be written to SQLite, but then neither rolled up nor
copied: every tick would retry it, and no later record would be rolled up either. Such a record is kept with
its counts and amounts dropped and a line saying why (`storable`).
"""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING

from prefixgate.usage import MAX_COUNT

if TYPE_CHECKING:
    from prefixgate.ledger import LedgerRecord

# One request's cost (or savings, or what a cache avoided) in USD: 10**18 picodollars, so that a handful of them
# still sum within 64 bits.
MAX_RECORD_USD = Decimal(10**6)
COUNTS = ("uncached_input", "cache_read", "output", "flip_tokens", "provider_missed_tokens")
AMOUNTS = ("cost_usd", "cost_without_cache_usd", "savings_usd", "provider_cost_usd", "avoided_usd",
           "keepalive_saved_usd", "flip_cost_usd")


def unstorable(rec: LedgerRecord) -> str:
    """Why `rec` holds a count or amount no store can sum, or ""."""
    counts = [(name, getattr(rec, name)) for name in COUNTS]
    counts += [(f"cache_writes[{ttl}]", n) for ttl, n in rec.cache_writes.items()]
    for name, n in counts:
        if n is not None and not (isinstance(n, int) and 0 <= n <= MAX_COUNT):
            return f"{name} is {n!r}"
    for name in AMOUNTS:
        amount = getattr(rec, name)
        if amount is None:
            continue
        try:
            value = Decimal(amount)
        except (InvalidOperation, TypeError):
            return f"{name} is {amount!r}"
        if not (value.is_finite() and abs(value) <= MAX_RECORD_USD):
            return f"{name} is {amount}"
    return ""


def storable(rec: LedgerRecord) -> LedgerRecord:
    """`rec`, or where it holds what no store can sum, a copy without its counts and amounts that says why."""
    why = unstorable(rec)
    if not why:
        return rec
    return replace(rec, **dict.fromkeys(("uncached_input", "cache_read", "output", "flip_tokens"), 0),
                   provider_missed_tokens=None, cache_writes={}, **dict.fromkeys(AMOUNTS, None),
                   explanation=[*rec.explanation, f"ledger: tokens and cost dropped: {why}, more than any store can sum"])
