"""Per-key rate limits and budgets, over a counter store shared by every gateway replica.

Requests per minute are counted on admission (increment, then check, so concurrent replicas cannot
both take the last slot). Budgets bind too: admission reserves the request's estimated cost, and `settle`
swaps the reservation for what the upstream billed once the response is in; a key is refused once what it
spent plus what is reserved reaches its budget, so concurrent requests overshoot a budget by at most one
request per key, however many replicas admit them. A request that may run to the model's own output limit holds its
worst case instead, or as much of it as the budget has left (fleet-wide: `least_usd`), refused below a minimal
answer, and goes upstream bounded by what it holds (gateway/estimate.py): such requests never overshoot it. Before
each target a request's reservation is repriced at what it may cost there (`rehold`: more granted as admission grants,
less always), so a failover to a dearer target holds what it may spend. The spent
counter only ever gets one add per request, the real cost, made `once` (a timed-out add to Redis may or may not have
applied: the store resends it with a mark that makes it count once either way). A reservation is a hold beside it instead, checked and placed in one
step with the spend (`CounterStore.reserve`, a Lua script in Redis), that expires after `HOLD_S` unless the
replica that placed it renews it: every `HOLD_S / 3` while its request runs (a 20-minute stream keeps its hold),
so only a replica that dies mid-request leaves anything held, and for `HOLD_S` at most (one shutting down
releases what it still holds). While the store cannot hold (Redis down) reservations bind per replica.
Money is counted in integer nanodollars: sums and the budget comparison are exact (a key that has spent
exactly its budget is refused). Tokens per minute are only known afterwards.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Protocol

from prefixgate.errors import RateLimited, RequestError
from prefixgate.policies.periods import Window, resets, window
from prefixgate.policies.schema import Budget, CallerKey

NANO = Decimal(10) ** 9
# How long a reservation holds a key's budget for every replica unless its replica renews it (a third of this apart):
# short enough that one a dead replica left behind soon frees the budget.
HOLD_S = 900
UNBOUNDED_NANO = 2**53     # a budget `Limits.hold` passes the store: exact in Redis's Lua numbers, never reached
THIRTY_DAYS_S = 30 * 86400     # what a budget's "month" was before calendar months (`Limits.carry_thirty_days`)
RATE_WINDOW_S = 60      # requests and tokens per minute count in minute windows; a budget window ending sooner
                        # than this is waited out like one


# `CounterStore.reserve` refused: the budget is spent (until its window resets), or held by running requests (until
# they end and settle at what they cost, often far less than the worst case an uncapped answer holds).
SPENT, HELD = -1, -2
# What a refusal while running requests hold the budget asks a caller to wait before trying again.
HELD_RETRY_S = 5.0


class CounterStore(Protocol):
    async def add(self, key: str, amount: float, ttl_s: int, once: str = "") -> float:
        """Add to a counter that expires `ttl_s` after creation; return the new value. With `once` (an id) the add
        counts at most once, however often it is sent (a store that resends one in doubt)."""
        ...

    async def get(self, key: str) -> float: ...

    async def reserve(self, counter: str, hold: str, nano: int, budget_nano: int, hold_s: int,
                      least: int = 0, replaces: tuple[str, int] | None = None) -> int:
        """Hold `nano` of `counter`'s budget (under the id `hold`, for `hold_s`) where every replica sees it, unless
        what `counter` holds plus what is held already reaches `budget_nano`. With `least`, hold only as much of
        `nano` as that leaves of the budget, refused where that is under `least`. With `replaces` (a hold's id and
        nanodollars), that hold counts as gone, and goes once this one is placed (a refusal leaves it). The nanodollars
        held (`nano` where holds are not shared: one process, or the shared store down, and the replica's own
        reservations bind), or, refused, `SPENT` (what `counter` holds leaves no room) or `HELD` (running requests'
        holds take the room)."""
        ...

    async def unreserve(self, counter: str, hold: str, nano: int) -> None:
        """Drop a hold `reserve` placed (a hold already gone is fine)."""
        ...

    async def renew(self, counter: str, holds: list[tuple[str, int]], hold_s: int) -> None:
        """Hold each of `holds` (id, nanodollars: as `reserve` placed them) for `hold_s` from now; one already gone
        (released, or expired) stays gone."""
        ...

    async def carry(self, mark: str, source: str, target: str, ttl_s: int, made: str = "") -> None:
        """Add what counter `source` holds to `target` (created with `ttl_s`) unless `mark` (or `made`, a mark an
        earlier version wrote for the same carry) says it was carried: the mark is written with the add, in one step,
        and kept, so the carry is made once however many replicas ask."""
        ...


def nanodollars(usd: Decimal | float | str) -> int:
    """Dollars as whole nanodollars, rounded up (a budget never rounds a cost away)."""
    return math.ceil(Decimal(str(usd)) * NANO)


def budget_window(key: CallerKey, now: float) -> Window:
    """The window of the key's budget that `now` falls in (a day or month on the key's calendar)."""
    budget = _budget(key)
    return window(budget.period, now, budget.timezone)


def _budget(key: CallerKey) -> Budget:
    """The key's budget; only a budgeted key's spend is counted, so a key without one here is a caller's bug."""
    if key.budget is None:
        raise RuntimeError(f"key {key.name!r} has no budget to count against")
    return key.budget


def spend_counter(key: CallerKey, now: float) -> tuple[str, int, float]:
    """(counter, ttl, window start) of the key's budget window at `now`."""
    current = budget_window(key, now)
    return f"spend:{key.name}:{current.id}", current.ttl, current.start


@dataclass(frozen=True)
class Reservation:
    """What admission set aside against a key's budget, until `settle` replaces it with the real cost."""

    counter: str = ""
    nano: int = 0
    hold: str = ""      # its id in the store's shared holds


class Limits:
    def __init__(self, store: CounterStore, clock=time.time) -> None:
        self.store = store
        self.clock = clock
        self.reserved: dict[str, int] = {}      # budget counter -> nanodollars reserved by requests in flight here
        # The holds not yet released, by id (a second release is a no-op), renewed in the store while any is live.
        self._live: dict[str, Reservation] = {}
        self._unholding: set[asyncio.Task] = set()
        self._settling: set[asyncio.Task] = set()     # settled costs on their way to the store
        self._renewing: asyncio.Task | None = None

    async def admit(self, key: CallerKey, estimate_usd: Decimal = Decimal(0), least_usd: Decimal | None = None
                    ) -> Reservation:
        """Reserve `estimate_usd` of the key's budget (with `least_usd`: as much of it as the budget has left, at least
        that) and count the request against its rate; raise a 429 RequestError with Retry-After: kind `rate_limit` if
        the key is over a rate limit, or what its budget has left is held by its running requests (worth retrying
        then), `quota` if it had already spent its budget (refused however often it is sent until the window
        resets)."""
        now = self.clock()
        held = Reservation()
        budget = least = 0
        if key.budget is not None:
            counter, _, _ = spend_counter(key, now)
            spent = await self.store.get(counter)
            budget = nanodollars(key.budget.usd)
            # From here to the reservation nothing awaits: concurrent admissions see each other's reservations.
            free = budget - math.ceil(spent)
            room = free - self.reserved.get(counter, 0)
            nano = nanodollars(estimate_usd)
            if least_usd is not None:
                least = max(1, nanodollars(least_usd))
                nano = min(nano, room)
            if room <= 0 or nano < least:
                raise _spent(key, now) if free <= 0 or free < least else _held(key)
            held = Reservation(counter, nano, uuid.uuid4().hex)
            self._hold(held)
        try:
            if held.counter:
                granted = await self.store.reserve(held.counter, held.hold, held.nano, budget, HOLD_S, least)
                if granted < 0:     # what other replicas hold or spent meanwhile
                    raise _spent(key, now) if granted == SPENT else _held(key)
                if granted < held.nano:         # an up-to hold, cut to what they left
                    self.release(held, in_store=False)
                    held = replace(held, nano=granted)
                    self._hold(held)
            await self._rate(key, now)
        except BaseException:   # refused, or cancelled (the caller hung up): the caller never gets `held` to settle
            self.release(held)
            raise
        return held

    async def rehold(self, key: CallerKey, held: Reservation, usd: Decimal, least_usd: Decimal | None = None
                     ) -> Reservation:
        """`held` repriced at `usd`, once the request's target and body as sent are known: a reservation replacing it.
        Less is never refused (the planner's marks ask for a cheaper write than admission assumed). More (a fallback
        target dearer than the one admission priced) is granted as `admit` grants, where what the key spent and its
        other requests hold leave any room (so it overshoots by at most this one request, while the requests after
        it see the whole hold; with `least_usd`: as much of `usd` as they leave, at least that), else refused with
        `admit`'s 429, `held` left as it was."""
        nano = nanodollars(usd)
        if key.budget is None or not held.counter or nano == held.nano:
            return held
        now = self.clock()
        budget, least = UNBOUNDED_NANO, 0
        if nano > held.nano:
            spent = await self.store.get(held.counter)
            budget = nanodollars(key.budget.usd)
            free = budget - math.ceil(spent)
            room = free - self.reserved.get(held.counter, 0) + held.nano
            if least_usd is not None:
                least = max(1, nanodollars(least_usd))
                nano = min(nano, room)
            if room <= 0 or nano < least:
                raise _spent(key, now) if free <= 0 or free < least else _held(key)
        moved = Reservation(held.counter, nano, uuid.uuid4().hex)
        self._hold(moved)       # nothing awaits from the check to here, as in `admit`
        self.release(held, in_store=False)
        try:
            granted = await self.store.reserve(held.counter, moved.hold, nano, budget, HOLD_S, least,
                                               replaces=(held.hold, held.nano))
        except BaseException:   # cancelled, the store's replacing `held` or not: `moved` goes, `held` is settled
            self.release(moved)
            self._hold(held)
            raise
        if granted < 0:         # what other replicas hold or spent meanwhile; `held` still there
            self.release(moved, in_store=False)
            self._hold(held)
            raise _spent(key, now) if granted == SPENT else _held(key)
        if granted < moved.nano:        # an up-to hold, cut to what they left
            self.release(moved, in_store=False)
            moved = replace(moved, nano=granted)
            self._hold(moved)
        return moved

    async def hold(self, key: CallerKey, usd: Decimal) -> Reservation:
        """Hold `usd` of the key's budget whatever it has left, for what the key may have spent already and the
        gateway cannot price yet (an explicit cache whose creation got no answer): its other requests see it
        until `settle` or `release`."""
        if key.budget is None or usd <= 0:
            return Reservation()
        counter, _, _ = spend_counter(key, self.clock())
        held = Reservation(counter, nanodollars(usd), uuid.uuid4().hex)
        self._hold(held)
        try:    # a budget no hold reaches: the store places it, room or not
            await self.store.reserve(counter, held.hold, held.nano, UNBOUNDED_NANO, HOLD_S)
        except BaseException:
            self.release(held)
            raise
        return held

    def _hold(self, held: Reservation) -> None:
        """Count `held` among this replica's reservations (and renew it while it lasts)."""
        if held.nano:   # `release` drops a counter at zero: one kept at zero would stay for every window
            self.reserved[held.counter] = self.reserved.get(held.counter, 0) + held.nano
            self._live[held.hold] = held
            if self._renewing is None:
                self._renewing = asyncio.get_running_loop().create_task(self._renew())

    async def _rate(self, key: CallerKey, now: float) -> None:
        limit = key.rate_limit
        if limit is None:
            return
        minute = window("minute", now)
        wid, ttl, left = minute.id, minute.ttl, minute.left(now)
        if limit.tokens_per_minute:
            used = await self.store.get(f"tpm:{key.name}:{wid}")
            if used >= limit.tokens_per_minute:
                raise RequestError(f"key {key.name!r} is over its {limit.tokens_per_minute} tokens per minute",
                                   status=429, kind="rate_limit", retry_after=left,
                                   limited=RateLimited("tokens", limit.tokens_per_minute, left, now + left))
        if limit.requests_per_minute:
            count = await self.store.add(f"rpm:{key.name}:{wid}", 1, ttl)
            if count > limit.requests_per_minute:
                raise RequestError(f"key {key.name!r} is over its {limit.requests_per_minute} requests per minute",
                                   status=429, kind="rate_limit", retry_after=left,
                                   limited=RateLimited("requests", limit.requests_per_minute, left, now + left))

    def release(self, held: Reservation, in_store: bool = True) -> None:
        """Give back what admission reserved (`in_store` False: here only). Idempotent (a request's safety net may
        release what its record already settled): a second release would take another request's reservation off the
        counter."""
        if held.nano and self._live.pop(held.hold, None) is not None:
            if not self._live and self._renewing is not None:
                self._renewing.cancel()     # nothing left to renew (and nothing pending when the gateway stops)
                self._renewing = None
            left = self.reserved.get(held.counter, 0) - held.nano
            if left:
                self.reserved[held.counter] = left
            else:
                self.reserved.pop(held.counter, None)
            if not in_store:
                return
            # Not awaited: a caller may be cancelled here (a hang-up); a hold that stays expires after HOLD_S.
            task = asyncio.get_running_loop().create_task(self.store.unreserve(held.counter, held.hold, held.nano))
            self._unholding.add(task)
            task.add_done_callback(self._unholding.discard)

    async def aclose(self) -> None:
        """This replica is going away: release what it still holds now (a rolling restart would otherwise keep
        those holds from every replica for `HOLD_S`), and stop renewing. Costs being settled reach the store first."""
        if self._settling:      # a request cancelled mid-settle (shutdown): its cost, then its hold's release
            await asyncio.gather(*self._settling, return_exceptions=True)
        for held in list(self._live.values()):
            self.release(held)
        if self._renewing is not None:
            self._renewing.cancel()
            await asyncio.gather(self._renewing, return_exceptions=True)
            self._renewing = None
        if self._unholding:     # sent before the store's connection closes
            await asyncio.gather(*self._unholding, return_exceptions=True)

    async def _renew(self) -> None:
        """While requests admitted here run, push their shared holds' expiry on: a request that outlasts `HOLD_S`
        (a long reasoning stream) kept its hold only that long, and other replicas then spent what it held."""
        while True:
            await asyncio.sleep(HOLD_S / 3)
            by_counter: dict[str, list[tuple[str, int]]] = {}
            for held in list(self._live.values()):
                by_counter.setdefault(held.counter, []).append((held.hold, held.nano))
            for counter, holds in by_counter.items():
                await self.store.renew(counter, holds, HOLD_S)

    async def settle(self, key: CallerKey, held: Reservation, tokens: int, cost_usd: Decimal) -> None:
        """Replace the reservation with what the request cost (in the window it ends in), and count its tokens against
        the key's tokens-per-minute. Both reach the store even where the caller is cancelled meanwhile (a hang-up, a
        shutdown): the ledger has the cost, so the shared budget must too, and a rate limit missing the tokens would
        let the key spend them again. They are added by a task of their own, the reservation released once the cost
        is in (never a moment with neither), and `aclose` waits for it."""
        now = self.clock()
        spends = key.budget is not None and bool(cost_usd)
        counts = key.rate_limit is not None and bool(key.rate_limit.tokens_per_minute) and bool(tokens)
        if not spends and not counts:
            self.release(held)
            return
        adding = asyncio.get_running_loop().create_task(self._settle(key, held, tokens if counts else 0,
                                                                     cost_usd if spends else Decimal(0), now))
        self._settling.add(adding)
        adding.add_done_callback(self._settling.discard)
        await asyncio.shield(adding)

    async def _settle(self, key: CallerKey, held: Reservation, tokens: int, cost_usd: Decimal, now: float) -> None:
        try:
            if cost_usd:
                counter, ttl, _ = spend_counter(key, now)
                await self.store.add(counter, nanodollars(cost_usd), ttl, once=held.hold or uuid.uuid4().hex)
        finally:
            self.release(held)
        if tokens:
            minute = window("minute", now)
            await self.store.add(f"tpm:{key.name}:{minute.id}", tokens, minute.ttl)

    async def restore(self, key: CallerKey, spent_nano: int) -> None:
        """Start the key's current budget window at `spent_nano` (what the ledger says it spent)."""
        if key.budget is not None and spent_nano:
            counter, ttl, _ = spend_counter(key, self.clock())
            await self.store.add(counter, spent_nano, ttl)

    async def carry_thirty_days(self, key: CallerKey) -> None:
        """Add to the key's calendar month what its counter for the 30-day "month" (before fcf06ea: a window of 30
        days from the epoch, named by its index) holds, where that window began within this calendar month: else a
        shared store's month budgets start again at the upgrade. Once per key, whichever replica starts first: its
        mark is written with the add (`CounterStore.carry`), so later starts cost one round trip that writes nothing.
        This (and its marks) can go once no fleet upgrades from a version before fcf06ea: 30 days after an upgrade
        the window it carries from has ended, and no replica writes such counters any more."""
        if key.budget is None or key.budget.period != "month":
            return
        now = self.clock()
        month, index = budget_window(key, now), int(now // THIRTY_DAYS_S)
        if index * THIRTY_DAYS_S >= month.start:    # one begun before the month also holds the month before's spend
            # 6cf7fce marked its carry once per calendar month: a fleet upgrading from it has made November's.
            await self.store.carry(f"carried:{key.name}", f"spend:{key.name}:{index}", f"spend:{key.name}:{month.id}",
                                   month.ttl, made=f"carried:{key.name}:{month.id}")


def _spent(key: CallerKey, now: float) -> RequestError:
    budget = _budget(key)
    current = budget_window(key, now)
    left = current.left(now)
    # A window that resets within a minute (a per-minute budget, a day's last seconds) is waited out like a rate
    # limit (of OpenAI type `tokens`, as a held budget's below); a longer one refuses until it resets, and SDKs are
    # told not to retry (they would sleep out its days).
    waited = 0 < left <= RATE_WINDOW_S
    return RequestError(f"key {key.name!r} has spent its budget of ${budget.usd:g} per {budget.period}; "
                        f"{resets(current, budget.timezone)}", status=429, kind="rate_limit" if waited else "quota",
                        retry_after=left or None, limited=RateLimited("tokens") if waited else None)


def _held(key: CallerKey) -> RequestError:
    # Not the spent-budget refusal, which SDKs are told never to retry: the key has budget left, held for the worst
    # case of requests still running (an uncapped answer holds the model's whole output limit), and it comes back as
    # they settle at what they cost. A rate limit's retryable 429 says that. To an OpenAI caller its type is `tokens`,
    # not `insufficient_quota` (OpenAI's spent credit or monthly spend, which callers give up on, and the gateway's
    # spent budget): OpenAI's rate-limit guide counts a request's max_tokens against its tokens per minute when it is
    # admitted, and a lower max_tokens is its advice, as it is here. No x-ratelimit-* headers: no token count to give.
    budget = _budget(key)
    return RequestError(f"key {key.name!r} has budget left of its ${budget.usd:g} per {budget.period}, but "
                        "its running requests hold it (each may cost up to its output limit); retry when they end, "
                        "or set an output limit to hold less", status=429, kind="rate_limit", retry_after=HELD_RETRY_S,
                        limited=RateLimited("tokens"))
