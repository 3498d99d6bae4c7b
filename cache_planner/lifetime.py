"""Cache lifetime: the idle gaps of a route's sessions, learned online, and the two decisions they price.

A *session* is one stream of requests that reuse the same cached prefix (a conversation, an agent's run, the
static prefix of a route). Its *gap* is the idle time from one request (or cache hit) to the next. A
`GapModel` holds, for one (route, session shape), a histogram of observed gaps plus the sessions still open,
and answers survival questions with a Kaplan-Meier estimate: a session that has not come back is *censored*
at its current idle time (it may yet return), and one idle past `HORIZON_S`, or dropped from the bounded
open set, counts as never returning. A prior of `PRIOR_WEIGHT` pseudo-sessions, spread over the catalogue's
TTLs and the breaks past them, answers for a route that has shown nothing yet. Memory is bounded: `len(GAP_EDGES)` bins, at most
`OPEN_LIMIT` open sessions per model, `GapBook.max_models` models (LRU); counts halve past `MAX_WEIGHT`,
so the model follows a route whose rhythm changes.

The decisions (all costs in the caller's unit: tokens of plain input, or money; only ratios matter):

- `choose_write_ttl(model, options, carried, fresh)`: which TTL (or none) a write should carry so that the
  cost of this write plus the next request's read (hit) or re-send (miss) of the prefix is lowest.
- `keepalive(model, idle, expires_in, ttl_s, rewrite_cost, read_cost, refresh_cost)`: whether to refresh an
  entry about to expire. Refreshing at each expiry for as long as it pays is solved exactly by backward
  induction over the refresh points up to the horizon: at a refresh point the choice is *stop* (expected loss
  P(return later | idle so far) x (rewrite - read)) or *refresh* (refresh_cost plus the next point's value if
  the session is still away). With a single point this is the rule "refresh only when P(return before the
  next refresh point) x (rewrite - read) > refresh_cost". Never when a refresh costs as much as a re-write,
  and never on a model that has seen no session come back (a route where nothing repeats).

Public API (stable):
    GAP_EDGES, HORIZON_S
    class GapModel:  observe(session, now, previous=None, returned=True, context="") -> float | None; close(session, now);
                     survival(t, now=None); p_within(t, now=None); p_return(after, before, now=None); returns; sessions;
                     given(context, now=None) -> GapModel | Given (the same questions, for one context's idle times)
    class GapBook:   model(route, shape) -> GapModel; observe(route, shape, session, now, previous=None, returned=True,
                     context="")
    TtlOption(name, seconds, write, read, storage_per_hour=0.0); ttl_options(price, ttls, seconds)
    TtlChoice(ttl, expected_cost, reason); write_cost(model, option, carried, fresh, now=None, miss=1.0)
    choose_write_ttl(model, options, carried, fresh, now=None) -> TtlChoice
    SplitChoice(anchor, end, expected_cost, reason); choose_split(p_within, options, carried, anchor, end)
    p_kept(p_within, ttl_s, read, miss, edges=GAP_EDGES, margin_s=..., upgrade=None, refresh=None) -> float
    KeepAlive(refresh, at, expected_saving, reason)
    keepalive(model, idle, expires_in, ttl_s, rewrite_cost, read_cost, refresh_cost, now=None, margin_s=...)
    turn_context(turns) -> str (a conversation's context for `GapModel.given`)
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from prefixgate.cost import Price

# Bin edges in seconds (the providers' TTLs among them: 5m, 30m, 1h, 12h, 24h); the last bin is (12h, 24h].
GAP_EDGES: tuple[float, ...] = (15, 30, 60, 120, 180, 240, 300, 420, 600, 900, 1200, 1800, 2700, 3600, 5400,
                                7200, 10800, 14400, 21600, 28800, 43200, 86400)
HORIZON_S = GAP_EDGES[-1]
OPEN_LIMIT = 256
MAX_WEIGHT = 4096.0
PRIOR_WEIGHT = 1.0
# The prior's shape: of a pseudo-session, this share returns within the shortest TTL offered (at half of it),
# this share after it, log-uniformly up to `PRIOR_SPAN` times the longest TTL, and the rest never. A session
# away past the shortest TTL is as likely to come back as gone, and its breaks run from minutes to a working
# day's long ones (a meeting, lunch: up to three hours). Until a route has shown sessions that end, an hour-long
# entry is then refreshed when it holds a prefix worth it; a route's own returns and ends soon outweigh this.
PRIOR_SOON, PRIOR_LATER = 0.4, 0.3
PRIOR_SPAN = 3.0
# A refresh goes out this long before the entry would expire (a request in flight must still find it).
REFRESH_MARGIN_S = 30.0
# A model's overall idle times weigh this many in one context's estimate (`GapModel.given`, as `reuse.CONTEXT_PRIOR`).
CONTEXT_PRIOR = 16.0


def _bin(seconds: float) -> int:
    return min(bisect_left(GAP_EDGES, seconds), len(GAP_EDGES) - 1)


class _Survival:
    """The questions asked of a survival curve `survival(t, now)`: of a gap model, or of one of its contexts."""

    def survival(self, t: float, now: float | None = None) -> float:
        raise NotImplementedError

    def p_within(self, t: float, now: float | None = None) -> float:
        """P(the session comes back within `t` seconds)."""
        return 1.0 - self.survival(t, now)

    def p_return(self, after: float, before: float, now: float | None = None) -> float:
        """P(the session comes back in (after, before] | it has not by `after`)."""
        alive = self.survival(after, now)
        return 0.0 if alive <= 0 else max(alive - self.survival(before, now), 0.0) / alive


@dataclass
class GapModel(_Survival):
    """Idle gaps of one (route, session shape). `prior_ttls`: the TTLs offered there, seconds, shortest first."""

    prior_ttls: tuple[float, ...] = (300.0, 3600.0)
    returned: list[float] = field(default_factory=lambda: [0.0] * len(GAP_EDGES))   # gaps ending in each bin
    censored: list[float] = field(default_factory=lambda: [0.0] * len(GAP_EDGES))   # idle times never followed
    open: OrderedDict[str, float] = field(default_factory=OrderedDict)               # session -> last touch
    returns: float = 0.0      # observed returns (the prior not counted)
    # Replicas add their counts up (gateway/keepalive_shared.py): what this one counted since it last shared them,
    # as `fields` names them; None: counted here alone.
    unshared: dict[str, float] | None = None

    def __post_init__(self) -> None:
        self._prior_returned = [0.0] * len(GAP_EDGES)
        self._prior_censored = [0.0] * len(GAP_EDGES)
        soon = self.prior_ttls[0]
        later = max(min(self.prior_ttls[-1] * PRIOR_SPAN, HORIZON_S), soon * 2)
        self._prior_returned[_bin(soon / 2)] += PRIOR_WEIGHT * PRIOR_SOON
        lo = soon
        for i, edge in enumerate((*GAP_EDGES[:-1], HORIZON_S)):
            if lo < later and edge > soon:
                hi = min(edge, later)
                self._prior_returned[i] += PRIOR_WEIGHT * PRIOR_LATER * math.log(hi / lo) / math.log(later / soon)
                lo = hi
        self._prior_censored[-1] += PRIOR_WEIGHT * (1 - PRIOR_SOON - PRIOR_LATER)
        self._memo: tuple[int, float | None, list[float]] | None = None
        self._version = 0
        self._context_of: dict[str, str] = {}        # open session -> the context its idle time started in
        self._contexts: dict[str, tuple[list[float], list[float]]] = {}   # context -> (returned, censored)

    @property
    def sessions(self) -> float:
        """Sessions observed to end or return (the prior not counted)."""
        return sum(self.returned) + sum(self.censored)

    def observe(self, session: str, now: float, previous: str | None = None, returned: bool = True,
                context: str = "", since: tuple[float, str] | None = None) -> float | None:
        """A request of `session` at `now`: returns the gap since its previous one (None for a new session).
        `previous`: the id the session had until now (a conversation's entry key changes every turn).
        `returned=False`: the idle time ended without the event this model is about (it is censored there).
        `context`: what the session has shown by now, for the idle time that starts (`given`).
        `since`: (when, context) of the session's latest request seen elsewhere (another replica answered it):
        the idle time ran from then when that is later than this model's own view."""
        last = self.open.pop(session, None)
        ended = self._context_of.pop(session, "")
        if previous is not None and previous != session:
            earlier = self.open.pop(previous, None)
            ended = self._context_of.pop(previous, ended)
            last = earlier if last is None else max(last, earlier or last)
        if since is not None and since[0] <= now and (last is None or since[0] > last):
            last, ended = since
        gap = None
        if last is not None:
            gap = max(now - last, 0.0)
            if gap > HORIZON_S:
                self._end(ended, False, HORIZON_S)
                gap = None
            elif returned:
                self._end(ended, True, gap)
                self.returns += 1
                self._unshared("n")
            else:
                self._end(ended, False, gap)
        self.open[session] = now
        if context:
            self._context_of[session] = context
        self._version += 1
        self._expire(now)
        while len(self.open) > OPEN_LIMIT:
            gone, touched = self.open.popitem(last=False)
            self._end(self._context_of.pop(gone, ""), False, max(now - touched, 0.0))
        return gap

    def close(self, session: str, now: float, counted: bool = True) -> None:
        """`session` will not come back (deleted, compacted away): censor it at its idle time. `counted=False`: it
        came back elsewhere (another replica answered it and counts that return), so this idle time is no evidence."""
        last = self.open.pop(session, None)
        context = self._context_of.pop(session, "")
        self._version += 1
        if last is not None and counted:
            self._end(context, False, max(now - last, 0.0))

    def _end(self, context: str, returned: bool, seconds: float) -> None:
        """An idle time that started in `context` ended after `seconds`: a return, or censored there."""
        kind = "r" if returned else "c"
        if context:
            counts = self._contexts.setdefault(context, ([0.0] * len(GAP_EDGES), [0.0] * len(GAP_EDGES)))
            counts[0 if returned else 1][_bin(seconds)] += 1.0
            self._unshared(f"x{kind}|{context}|{_bin(seconds)}")
        self._unshared(f"{kind}|{_bin(seconds)}")
        self._add(self.returned if returned else self.censored, seconds)

    def _unshared(self, name: str) -> None:
        if self.unshared is not None:
            self.unshared[name] = self.unshared.get(name, 0.0) + 1.0

    def take_unshared(self) -> dict[str, float]:
        """What this replica counted since it last shared, handed over to be added to every replica's counts: by
        name, `r|bin` and `c|bin` returned and censored idle times, `xr|context|bin` and `xc|context|bin` those of a
        context, `n` the returns."""
        taken, self.unshared = self.unshared or {}, {}
        return taken

    def give_back(self, taken: dict[str, float]) -> None:
        """What `take_unshared` handed over and could not be shared: shared at the next try."""
        for name, n in taken.items():
            self.unshared[name] = self.unshared.get(name, 0.0) + n  # type: ignore[index]

    def shared_totals(self, totals: dict[str, float]) -> None:
        """Every replica's counts (named as in `take_unshared`, added up in Redis): this model's are those and what
        it has not shared yet. A name this version does not know is left out."""
        self.returned, self.censored = [0.0] * len(GAP_EDGES), [0.0] * len(GAP_EDGES)
        self.returns, self._contexts = 0.0, {}
        for name, n in [*totals.items(), *(self.unshared or {}).items()]:
            kind, *context, at = name.split("|") if "|" in name else (name, "")
            if name == "n":
                self.returns += n
            elif kind in ("r", "c", "xr", "xc") and len(context) == (kind[0] == "x") and at.isdigit() \
                    and int(at) < len(GAP_EDGES):
                pair = (self._contexts.setdefault(context[0], ([0.0] * len(GAP_EDGES), [0.0] * len(GAP_EDGES)))
                        if context else (self.returned, self.censored))
                pair[kind[-1] == "c"][int(at)] += n
        self._version += 1

    def _add(self, counts: list[float], seconds: float) -> None:
        self._version += 1
        counts[_bin(seconds)] += 1.0
        # Shared counts are halved where they are added up (the replicas' sum past `MAX_WEIGHT`).
        if self.unshared is None and sum(self.returned) + sum(self.censored) > MAX_WEIGHT:
            self.returned = [c / 2 for c in self.returned]
            self.censored = [c / 2 for c in self.censored]
            self.returns /= 2
            self._contexts = {k: ([c / 2 for c in r], [c / 2 for c in e]) for k, (r, e) in self._contexts.items()}

    def _expire(self, now: float) -> None:
        while self.open:
            session, touched = next(iter(self.open.items()))
            if now - touched <= HORIZON_S:
                break
            del self.open[session]
            self._end(self._context_of.pop(session, ""), False, HORIZON_S)

    def _counts(self, now: float | None) -> tuple[list[float], list[float]]:
        """Returned and censored idle times per bin, the prior and (with `now`) the open sessions included."""
        returned = [a + b for a, b in zip(self.returned, self._prior_returned, strict=True)]
        censored = [a + b for a, b in zip(self.censored, self._prior_censored, strict=True)]
        if now is not None:
            for touched in self.open.values():
                censored[_bin(max(now - touched, 0.0))] += 1.0
        return returned, censored

    def _curve(self, now: float | None) -> list[float]:
        """S at each bin's upper edge: Kaplan-Meier over returns, censored sessions and (with `now`) open ones."""
        if self._memo is not None and self._memo[0] == self._version and self._memo[1] == now:
            return self._memo[2]
        out = _kaplan_meier(*self._counts(now))
        self._memo = (self._version, now, out)
        return out

    def given(self, context: str, now: float | None = None) -> GapModel | Given:
        """The model for an idle time that starts in `context`: that context's own idle times, with the model's
        overall ones (prior included) standing in for `CONTEXT_PRIOR` of them. No context: the model itself."""
        if not context:
            return self
        returned, censored = self._counts(now)
        total = sum(returned) + sum(censored)
        empty = [0.0] * len(GAP_EDGES)
        own_returned, own_censored = self._contexts.get(context, (empty, empty))
        own_censored = list(own_censored)
        if now is not None:
            for session, touched in self.open.items():
                if self._context_of.get(session) == context:
                    own_censored[_bin(max(now - touched, 0.0))] += 1.0
        w = CONTEXT_PRIOR / total if total > 0 else 0.0
        curve = _kaplan_meier([a + w * b for a, b in zip(own_returned, returned, strict=True)],
                              [a + w * b for a, b in zip(own_censored, censored, strict=True)])
        return Given(curve, self.returns)

    def survival(self, t: float, now: float | None = None) -> float:
        """P(no return within `t` seconds of idle), never returning included; linear within a bin."""
        return _survival(self._curve(now), t)


@dataclass(frozen=True)
class Given(_Survival):
    """A gap model's answers for the idle times of one context (`GapModel.given`), as of when it was asked."""

    curve: list[float]
    returns: float

    def survival(self, t: float, now: float | None = None) -> float:
        return _survival(self.curve, t)


def _kaplan_meier(returned: list[float], censored: list[float]) -> list[float]:
    """S at each bin's upper edge, from the returns and censored idle times per bin."""
    at_risk = sum(returned) + sum(censored)
    survival, out = 1.0, []
    for events, lost in zip(returned, censored, strict=True):
        if at_risk > 0:
            # Censored in a bin: at risk for about half of it.
            survival *= 1 - events / max(at_risk - lost / 2, events)
        out.append(survival)
        at_risk -= events + lost
    return out


def _survival(curve: list[float], t: float) -> float:
    """S(t) from a curve at the bin edges, linear within a bin."""
    if t <= 0:
        return 1.0
    i = _bin(t)
    if t >= GAP_EDGES[-1]:
        return curve[-1]
    lo = GAP_EDGES[i - 1] if i else 0.0
    before = curve[i - 1] if i else 1.0
    return before + (curve[i] - before) * (t - lo) / (GAP_EDGES[i] - lo)


class GapBook:
    """The gap models of many (route, shape) keys, least recently used dropped past `max_models`."""

    def __init__(self, max_models: int = 1024, prior_ttls: Callable[[str], tuple[float, ...]] | None = None,
                 shared: bool = False) -> None:
        self.max_models = max_models
        self._prior_ttls = prior_ttls
        self.shared = shared    # its models' counts are added up with other replicas' (`GapModel.unshared`)
        self._models: OrderedDict[tuple[str, str], GapModel] = OrderedDict()

    def models(self) -> list[tuple[tuple[str, str], GapModel]]:
        """Every (route, shape) and its model, least recently used first."""
        return list(self._models.items())

    def model(self, route: str, shape: str) -> GapModel:
        key = (route, shape)
        found = self._models.get(key)
        if found is None:
            found = GapModel(self._prior_ttls(route)) if self._prior_ttls else GapModel()
            found.unshared = {} if self.shared else None
            self._models[key] = found
            while len(self._models) > self.max_models:
                self._models.popitem(last=False)
        self._models.move_to_end(key)
        return found

    def observe(self, route: str, shape: str, session: str, now: float, previous: str | None = None,
                returned: bool = True, context: str = "", since: tuple[float, str] | None = None) -> float | None:
        return self.model(route, shape).observe(session, now, previous, returned, context, since)


@dataclass(frozen=True)
class TtlOption:
    """One lifetime a write may ask for: its write and read price per token, and storage per token-hour
    (explicit caches), in the same unit as the costs it is compared with (plain input = 1.0 is usual)."""

    name: str
    seconds: float
    write: float
    read: float
    storage_per_hour: float = 0.0


def ttl_options(price: Price, ttls: Iterable[str], seconds: Callable[[str], float]) -> list[TtlOption]:
    """The options of `ttls` under `price`, relative to plain input (a provider without a write price for a
    TTL bills the write as plain input)."""
    if price.input <= 0:
        return []
    base = price.input
    return [TtlOption(t, float(seconds(t)), float(price.write_price(t) / base), float(price.cache_read / base),
                      float(price.storage_per_hour / base)) for t in ttls]


@dataclass(frozen=True)
class TtlChoice:
    ttl: str | None           # None: no checkpoint pays
    expected_cost: float      # in the options' unit, per the call (this write and the next request's read)
    reason: str


def _expected_stay(model: GapModel, seconds: float, now: float | None) -> float:
    """E[min(gap, seconds)] in hours: how long an explicit cache is stored before it is used or expires."""
    points = [0.0, *[e for e in GAP_EDGES if e < seconds], seconds]
    area = sum((b - a) * (model.survival(a, now) + model.survival(b, now)) / 2 for a, b in zip(points, points[1:], strict=False))
    return area / 3600.0


def write_cost(model: GapModel, option: TtlOption | None, carried: int, fresh: int, now: float | None = None,
               miss: float = 1.0) -> float:
    """Expected cost of writing `fresh` tokens after `carried` read ones with `option` (None: unmarked), plus
    the next request's cost for the whole prefix: a read if it comes within the TTL, `miss` per token otherwise
    (what it pays to send the prefix again: plain input, or the cheapest write if it will be written again).
    A session that never returns costs nothing more."""
    total = carried + fresh
    storage = 0.0
    if option is not None and option.storage_per_hour:
        storage = option.storage_per_hour * total * _expected_stay(model, option.seconds, now)
    return _single(lambda t: model.p_within(t, now), option, carried, fresh, miss) + storage


def _single(p_within: Callable[[float], float], option: TtlOption | None, carried: int, fresh: int,
            miss: float) -> float:
    total = carried + fresh
    returns = p_within(HORIZON_S)
    if option is None:
        return fresh + returns * total * miss
    hit = p_within(option.seconds)
    return fresh * option.write + hit * total * option.read + (returns - hit) * total * miss


def _miss(options: list[TtlOption]) -> float:
    """What the next request pays per token for a prefix it cannot read: it writes it again, at the cheapest
    write price offered (plain input where writes are free or nothing is offered)."""
    return max(min((o.write for o in options), default=1.0), 1.0)


def choose_write_ttl(model: GapModel, options: Iterable[TtlOption], carried: int, fresh: int,
                     now: float | None = None) -> TtlChoice:
    """The cheapest of no checkpoint and each option, by `write_cost`."""
    options = list(options)
    miss = _miss(options)
    best = TtlChoice(None, write_cost(model, None, carried, fresh, now, miss), "no checkpoint")
    ps = []
    for option in options:
        p = model.p_within(option.seconds, now)
        ps.append(f"p(back<{option.name})={p:.2f}")
        cost = write_cost(model, option, carried, fresh, now, miss)
        if cost < best.expected_cost - 1e-12:
            best = TtlChoice(option.name, cost, f"p(back<{option.name})={p:.2f}")
    if best.ttl is None:
        best = TtlChoice(None, best.expected_cost, f"the next request is too unlikely to come in time ({', '.join(ps)})")
    return best


def p_kept(p_within: Callable[[float], float], ttl_s: float, read: float, miss: float,
           edges: Iterable[float] = GAP_EDGES, margin_s: float = REFRESH_MARGIN_S,
           upgrade: tuple[float, float] | None = None, refresh: float | None = None) -> float:
    """With keep-alive: the chance the next request reads the entry, counting a return after the TTL by the share
    of the re-write (`miss` per token, against `read`) that the refreshes keeping it until then save; each
    refresh costs `refresh` per token (default `read`: it reads the prefix once; more when the prefix it re-sends
    is longer than the part at stake, as a conversation's refresh reads the static prefix too). A return in
    (a, b] is priced as if at b (the refreshes it needs at most). `upgrade` (long TTL seconds, cost per token):
    at its first expiry the entry may instead be rewritten to live the long TTL (`keepalive.upgrade_body`), then
    refreshed at that TTL; the cheaper of the two counts."""
    p = p_within(ttl_s)
    if miss <= read or ttl_s <= margin_s:
        return p
    refresh = read if refresh is None else refresh
    low = ttl_s
    for edge in (e for e in edges if e > ttl_s):
        cost = refresh * math.ceil((edge - ttl_s) / (ttl_s - margin_s))
        if upgrade is not None and upgrade[0] > ttl_s:
            long_s, up = upgrade
            cost = min(cost, up + refresh * max(0, math.ceil((edge - long_s) / (long_s - margin_s))))
        p += (p_within(edge) - p_within(low)) * max(0.0, (miss - read - cost) / (miss - read))
        low = edge
    return p


@dataclass(frozen=True)
class SplitChoice:
    anchor: str | None        # TTL of a checkpoint at the end of the first new block; None: none there
    end: str | None           # TTL of the checkpoint at the end of the prefix; None: no checkpoint pays
    expected_cost: float
    reason: str


def choose_split(p_within: Callable[[float], float], options: Iterable[TtlOption], carried: int, anchor: int,
                 end: int) -> SplitChoice:
    """For a growing prefix read through `carried` tokens, whose new part's first block ends at `anchor` and
    whose last at `end`: one checkpoint at the end (as `choose_write_ttl`), or a long-lived one at `anchor` and
    a short-lived one at `end`. The split pays when the first new block is small (a tool call) and the rest
    large (its result): after a gap longer than the short TTL but within the long one, only the part past the
    anchor is sent again. `p_within(t)`: P(the next request comes within t seconds)."""
    options = sorted(options, key=lambda o: o.seconds)
    miss = _miss(options)
    fresh = end - carried
    best = SplitChoice(None, None, _single(p_within, None, carried, fresh, miss), "no checkpoint")
    for option in options:
        cost = _single(p_within, option, carried, fresh, miss)
        if cost < best.expected_cost - 1e-12:
            best = SplitChoice(None, option.name, cost, f"p(back<{option.name})={p_within(option.seconds):.2f}")
    if not carried < anchor < end:
        return best
    returns = p_within(HORIZON_S)
    for short, long in ((a, b) for i, a in enumerate(options) for b in options[i + 1:] if b.seconds > a.seconds):
        soon, later = p_within(short.seconds), p_within(long.seconds)
        cost = ((anchor - carried) * long.write + (end - anchor) * short.write + soon * end * short.read
                + (later - soon) * (anchor * long.read + (end - anchor) * miss) + (returns - later) * end * miss)
        if cost < best.expected_cost - 1e-12:
            best = SplitChoice(long.name, short.name, cost, f"p(back<{short.name})={soon:.2f}, p(back<{long.name})="
                               f"{later:.2f}: {long.name} through the first new block, {short.name} after it")
    return best


@dataclass(frozen=True)
class KeepAlive:
    refresh: bool              # refresh at `at` (False: let the entry expire)
    at: float | None           # idle seconds at which to send the refresh
    expected_saving: float     # of the refresh plan over letting the entry expire (cost unit of the call)
    reason: str


def keepalive(model: GapModel | Given, idle: float, expires_in: float, ttl_s: float, rewrite_cost: float, read_cost: float,
              refresh_cost: float, now: float | None = None, margin_s: float = REFRESH_MARGIN_S) -> KeepAlive:
    """Whether to refresh an entry the session last touched `idle` seconds ago and that expires in `expires_in`
    seconds; each refresh extends it by `ttl_s`. Costs are of the whole prefix: `rewrite_cost` what the next
    request pays if the entry is gone, `read_cost` if it is there, `refresh_cost` one refresh."""
    gain = rewrite_cost - read_cost
    if model.returns <= 0:
        return KeepAlive(False, None, 0.0, "no session on this route has come back: nothing repeats")
    if refresh_cost >= rewrite_cost:
        return KeepAlive(False, None, 0.0, "a refresh would cost as much as writing the prefix again")
    if gain <= 0 or ttl_s <= margin_s:
        return KeepAlive(False, None, 0.0, "nothing to save by keeping the entry")
    first = idle + max(expires_in - margin_s, 0.0)
    step = ttl_s - margin_s
    points = []
    a = first
    while a < HORIZON_S:
        points.append(a)
        a += step
    if not points:
        return KeepAlive(False, None, 0.0, "past the horizon: the session is not expected back")
    # Backward induction on unconditional costs: value[k] is the expected cost from refresh point k on.
    end = model.survival(HORIZON_S, now)
    later = 0.0
    stop = refresh = 0.0
    for k in range(len(points) - 1, -1, -1):
        here = points[k]
        stop = max(model.survival(here + margin_s, now) - end, 0.0) * gain
        if k + 1 < len(points):
            refresh = model.survival(here, now) * refresh_cost + later
        else:
            refresh = model.survival(here, now) * refresh_cost + max(model.survival(here + ttl_s, now) - end, 0.0) * gain
        later = min(stop, refresh)
    alive = model.survival(first, now)
    p_next = model.p_return(first, first + ttl_s, now)
    saving = (stop - refresh) / alive if alive > 0 else 0.0
    window = f"P(back within the next {ttl_s / 60:.0f} min | away {first / 60:.0f} min)={p_next:.2f}"
    if refresh < stop:
        return KeepAlive(True, first, saving, f"{window}; refreshing saves {saving:.4g} over letting it expire")
    return KeepAlive(False, first, 0.0, f"{window} does not pay a refresh of {refresh_cost:.4g} against a re-write "
                                        f"saving of {gain:.4g}")


def turn_context(turns: int) -> str:
    """A conversation's context for its gap model: how many requests it has made, in doubling steps (1, 2-3,
    4-7, 8-15, 16+). Whether a session goes on after a break depends on how long it has gone on: the route
    learns that from its own sessions, shrunk to its overall gaps where a step has shown few."""
    return f"turn{1 << min(max(turns, 1).bit_length() - 1, 4)}"
