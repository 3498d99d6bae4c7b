"""A model's prices over time: base and long-context rows, dated changes and time-of-day windows.

The shape follows pydantic's genai-prices (where most rows come from): a model has a list of periods, each
in force from a UTC date and optionally only between two UTC times of day; the LAST period in force at the
request's time wins, and the first one applies when none is. Within a period a long-context tier prices the
whole request once its prompt (uncached + read + written) is above the tier's `above`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time
from decimal import Decimal

from prefixgate.cost import Price


@dataclass(frozen=True)
class PriceSpec:
    """One price row with its provenance; `above` > 0 makes it a long-context tier for prompts above it."""

    price: Price
    source: str
    as_of: str
    note: str = ""
    above: int = 0

    def scaled(self, factor: Decimal, note: str) -> PriceSpec:
        p = self.price
        price = Price(input=p.input * factor, output=p.output * factor, cache_read=p.cache_read * factor,
                      cache_write={ttl: v * factor for ttl, v in p.cache_write.items()},
                      storage_per_hour=p.storage_per_hour * factor)
        return replace(self, price=price, note=f"{self.note}; {note}" if self.note else note)


@dataclass(frozen=True)
class PricePeriod:
    """One entry of a model's schedule: its base row and long-context tiers, in force from `since` (UTC
    date; None: always) and, with `hours`, only from hours[0] to hours[1] UTC (the window may wrap midnight)."""

    base: PriceSpec
    long_context: tuple[PriceSpec, ...] = ()
    since: date | None = None
    hours: tuple[time, time] | None = None

    def active(self, at: datetime) -> bool:
        at = at.astimezone(UTC) if at.tzinfo else at.replace(tzinfo=UTC)
        if self.since is not None and at.date() < self.since:
            return False
        if self.hours is None:
            return True
        start, end, now = self.hours[0], self.hours[1], at.time()
        return (now >= start or now < end) if end < start else start <= now < end

    def row_for(self, prompt_tokens: int) -> PriceSpec:
        """The row for a request whose whole prompt has this many tokens (the highest tier it is above)."""
        chosen = self.base
        for tier in self.long_context:
            if prompt_tokens > tier.above and tier.above >= chosen.above:
                chosen = tier
        return chosen

    def scaled(self, factor: Decimal, note: str) -> PricePeriod:
        return replace(self, base=self.base.scaled(factor, note),
                       long_context=tuple(t.scaled(factor, note) for t in self.long_context))


def period_at(periods: tuple[PricePeriod, ...], at: datetime | None, *, windows: bool = True) -> PricePeriod:
    """The period in force at `at` (now when None): the last active one, else the first. Without
    `windows`, time-of-day periods are skipped: the day's standard price, as a catalogue lists it."""
    at = at or datetime.now(UTC)
    for period in reversed(periods):
        if (windows or period.hours is None) and period.active(at):
            return period
    return periods[0]
