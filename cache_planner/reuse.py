"""How often a cached prefix would be read again, and after how long: the planner's evidence for
whether a checkpoint pays and which TTL to give it.

Every position where a checkpoint could go is a *reuse opportunity*, keyed by its chained prefix
hash and tagged with its level (static prefix, document, conversation). For each level a route
learns two things from its requests, whether or not a checkpoint was actually placed:

- the reuse *rate*: the share of requests with a candidate at that level whose prefix contained an
  earlier request's opportunity of that level (a follow-up turn, the same system prompt again);
- the *gap* distribution: the time since that opportunity was last touched (a hit refreshes a
  provider's TTL, so gaps run from the last touch).

P(read again within t) = rate x P(gap <= t | reused). Both start from a weak prior, so a route's
first requests get the benefit of the doubt and a route whose prefixes never repeat (one-off
prompts, batch items) stops being marked after two or three requests, with no waiting for a TTL.

A conversation is also a *session* with a pace of its own: people read and answer at different speeds, and
one who has just taken a break is more likely to take another. Each open conversation opportunity carries its
session's latest gaps (`SessionGaps`), and the route learns its gap distribution *per context* as well as
overall: the context of a gap is what the session had shown before it (`context`: the median of its recent
gaps, in steps of the shortest bound, and whether its last gap went past that bound). `SessionReturns`
answers for a session from its context's counts, with the route's overall distribution as a prior of
`CONTEXT_PRIOR` gaps: a context seen rarely says little, one seen often speaks for itself, and where sessions
do not differ every context's counts converge to the overall ones.

Gateway replicas sharing Redis share this evidence (`reuse_shared`): a tracker with `shared` set times each gap
from the opportunity's latest use on any replica, with that session's gaps, and its counts are the route's totals
over all replicas.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Protocol

# Gap bounds we answer questions about: the providers' TTLs (5m, 30m, 1h, 12h, 24h), and breaks of hours,
# which a 1h entry kept alive by refreshes can outlast (`lifetime.p_kept`).
BOUNDS = (300.0, 1800.0, 3600.0, 7200.0, 10800.0, 21600.0, 43200.0, 86400.0)
OPEN_LIMIT = 512
PRIOR_WEIGHT = 1.0
PRIOR_RATE = 0.5   # an unknown route: as likely to repeat as not
PRIOR_SOON = 0.8   # when a prefix does repeat, it usually repeats soon
SESSION_LEVEL = "conversation"
SHARED_RECENT = 32     # a request's last prefix keys asked about elsewhere: a turn adds fewer blocks
RECENT = 5             # a session's latest gaps kept for its context
CONTEXT_PRIOR = 16.0   # the route's overall distribution weighs this many gaps in a context's estimate
# A session's pace, as the median of its recent gaps over the shortest bound: at most these shares, or beyond.
PACE_STEPS = (0.25, 0.5, 1.0)


@dataclass(frozen=True)
class SessionGaps:
    """One session's latest gaps (seconds, oldest first, at most `RECENT`)."""

    recent: tuple[float, ...] = ()

    def then(self, gap: float) -> SessionGaps:
        return SessionGaps((*self.recent, gap)[-RECENT:])

    def context(self) -> str:
        """What the session has shown of its timing: '' before its first gap, else its pace step and 'late'
        when its last gap went past the shortest bound."""
        if not self.recent:
            return ""
        ordered = sorted(self.recent)
        median = ordered[len(ordered) // 2] / BOUNDS[0]
        pace = next((i for i, step in enumerate(PACE_STEPS) if median <= step), len(PACE_STEPS))
        return f"{pace}{'late' if self.recent[-1] > BOUNDS[0] else ''}"


@dataclass
class ReuseStats:
    """Evidence for one level of one route."""

    requests: float = 0.0
    reuses: float = 0.0
    within: list[float] = field(default_factory=lambda: [0.0] * len(BOUNDS))
    gap_sum: float = 0.0
    contexts: dict[str, list[float]] = field(default_factory=dict)  # context -> [gaps, within each bound...]

    @property
    def reuses_per_hour(self) -> float:
        """How often the prefix comes back, from the mean gap between reuses (0 without evidence)."""
        return 3600.0 * self.reuses / self.gap_sum if self.reuses and self.gap_sum > 0 else 0.0

    def rate(self) -> float:
        return (self.reuses + PRIOR_WEIGHT * PRIOR_RATE) / (self.requests + PRIOR_WEIGHT)

    def soon(self, i: int) -> float:
        """P(gap <= BOUNDS[i] | reused)."""
        return (self.within[i] + PRIOR_WEIGHT * PRIOR_SOON) / (self.reuses + PRIOR_WEIGHT)

    def p_within(self, seconds: float) -> float:
        """Estimated probability that a prefix written now is read again within `seconds`."""
        return self.rate() * self.soon(_bound(seconds))

    def add(self, other: ReuseStats) -> None:
        """Count `other`'s evidence in too."""
        self.requests += other.requests
        self.reuses += other.reuses
        self.gap_sum += other.gap_sum
        self.within = [a + b for a, b in zip(self.within, other.within, strict=True)]
        for context, counts in other.contexts.items():
            mine = self.contexts.setdefault(context, [0.0] * (1 + len(BOUNDS)))
            self.contexts[context] = [a + b for a, b in zip(mine, counts, strict=True)]

    def note_session_gap(self, session: SessionGaps, gap: float) -> None:
        """A gap of a session whose gaps so far were `session`: count it in that context."""
        counts = self.contexts.setdefault(session.context(), [0.0] * (1 + len(BOUNDS)))
        counts[0] += 1
        for i, bound in enumerate(BOUNDS):
            counts[1 + i] += gap <= bound


def _bound(seconds: float) -> int:
    return next((i for i, b in enumerate(BOUNDS) if seconds <= b), len(BOUNDS) - 1)


class SessionReturns:
    """P(a session's next request within t): the route's return rate times P(gap <= t) in the session's context,
    the route's overall P(gap <= t) standing in for `CONTEXT_PRIOR` gaps."""

    def __init__(self, stats: ReuseStats, session: SessionGaps) -> None:
        self.stats = stats
        self.counts = stats.contexts.get(session.context(), [0.0] * (1 + len(BOUNDS)))

    def p_within(self, seconds: float) -> float:
        i = _bound(seconds)
        soon = (self.counts[1 + i] + CONTEXT_PRIOR * self.stats.soon(i)) / (self.counts[0] + CONTEXT_PRIOR)
        return self.stats.rate() * soon


@dataclass(frozen=True)
class Touch:
    """An opportunity's latest use on any replica: its level, when, and (a conversation's) its session's gaps."""

    level: str
    at: float
    gaps: tuple[float, ...] = ()


class Sharing(Protocol):
    """Where a route's replicas share their evidence (`reuse_shared.SharedRoute`)."""

    def seen(self, keys: list[str]) -> dict[str, Touch]: ...
    def touch(self, touches: dict[str, Touch]) -> None: ...
    def counted(self, tracker: ReuseTracker) -> None: ...


class ReuseTracker:
    """Open opportunities of one route and the per-level statistics they resolve into."""

    def __init__(self) -> None:
        self.open: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self.stats: dict[str, ReuseStats] = {}
        self.sessions: dict[str, SessionGaps] = {}   # open conversation opportunity -> its session's gaps
        self.shared: Sharing | None = None           # other replicas' evidence, when they share it
        self.unshared: dict[str, ReuseStats] = {}    # per level, what this replica counted since it last shared

    def session(self, key: str) -> SessionGaps:
        """The gaps so far of the session whose conversation opportunity is `key` (none known: a new one)."""
        return self.sessions.get(key, SessionGaps())

    def level(self, name: str) -> ReuseStats:
        stats = self.stats.get(name)
        if stats is None:
            stats = self.stats[name] = ReuseStats()
        return stats

    def observe(self, now: float, prefix_keys: list[str], candidates: dict[str, str],
                renamed: str | None = None) -> list[tuple[int, str]]:
        """Record a request: resolve the opportunities its prefix contains and open `candidates`
        (prefix key -> level). Returns (block index, level) of each reused opportunity.

        `renamed`: this request's static prefix key when the rewrite has just learned to move a value out of
        it: the latest static opportunity was this prefix with the value still in, so it counts as this key's
        (the value's change is no evidence that the static text does not recur)."""
        if renamed is not None and renamed not in self.open:
            latest = next((k for k in reversed(self.open) if self.open[k][0] == "static"), None)
            if latest is not None:
                self.open[renamed] = self.open.pop(latest)
        if self.shared is not None:
            self._merge(self.shared.seen(list(dict.fromkeys([*candidates, *prefix_keys[-SHARED_RECENT:]]))))
        reused: list[tuple[int, str]] = []
        latest_gap: dict[str, float] = {}  # per level, the gap of the longest reused prefix
        session = SessionGaps()            # the gaps so far of the conversation this request continues
        used: list[str] = []               # the opportunities this request touched (reused, then opened)
        # The few keys of this prefix that are open, found in C, in prefix order (a key is one block's
        # chained hash, so it appears once): an agent's request has a thousand blocks and a handful open.
        open_here = self.open.keys() & prefix_keys
        if len(open_here) > 8:
            at = dict(zip(prefix_keys, range(len(prefix_keys)), strict=False))
            found = sorted((at[key], key) for key in open_here)
        else:
            found = sorted((prefix_keys.index(key), key) for key in open_here)
        for index, key in found:
            entry = self.open[key]
            level, touched = entry
            if now - touched > BOUNDS[-1]:
                continue  # too old to say anything about any TTL we choose between
            latest_gap[level] = now - touched
            if level == SESSION_LEVEL:
                session = self.session(key)
            self.open[key] = (level, now)
            self.open.move_to_end(key)
            reused.append((index, level))
            used.append(key)
        open_levels = {level for level, _ in self.open.values()}
        for level in set(candidates.values()):
            # A request is evidence about a level's reuse rate only if there was something to reuse.
            if level not in open_levels:
                continue
            evidence = ReuseStats(requests=1)
            if level in latest_gap:
                gap = latest_gap[level]
                evidence.reuses, evidence.gap_sum = 1, gap
                evidence.within = [float(gap <= bound) for bound in BOUNDS]
                if level == SESSION_LEVEL:
                    evidence.note_session_gap(session, gap)
                    session = session.then(gap)
            self._count(level, evidence)
        for key, level in candidates.items():
            if key not in self.open:
                self.open[key] = (level, now)
                used.append(key)
            if level == SESSION_LEVEL and session.recent:
                self.sessions[key] = session
        if self.shared is not None:
            self.shared.touch({key: Touch(*self.open[key], self.session(key).recent) for key in used})
        while len(self.open) > OPEN_LIMIT:
            gone, _ = self.open.popitem(last=False)
            self.sessions.pop(gone, None)
        return reused

    def _merge(self, seen: dict[str, Touch]) -> None:
        """Opportunities used on other replicas since this one last did: they were touched then, with those gaps."""
        for key, touch in seen.items():
            mine = self.open.get(key)
            if mine is None or touch.at > mine[1]:
                self.open[key] = (touch.level, touch.at)
                if touch.gaps:
                    self.sessions[key] = SessionGaps(touch.gaps[-RECENT:])
                else:
                    self.sessions.pop(key, None)

    def _count(self, level: str, evidence: ReuseStats) -> None:
        self.level(level).add(evidence)
        if self.shared is not None:
            self.unshared.setdefault(level, ReuseStats()).add(evidence)
            self.shared.counted(self)

    def take_unshared(self) -> dict[str, ReuseStats]:
        """What this replica counted since it last shared, handed over to be shared (and counted here no more)."""
        taken, self.unshared = self.unshared, {}
        return taken

    def shared_totals(self, totals: dict[str, ReuseStats]) -> None:
        """Every replica's counts as Redis holds them: this replica's view is those plus what it has not shared yet."""
        for level, stats in totals.items():
            pending = self.unshared.get(level)
            if pending is not None:
                stats.add(pending)
            self.stats[level] = stats

    def to_dict(self) -> dict:
        return {
            "open": [[k, level, t] for k, (level, t) in self.open.items()],
            "stats": {name: [s.requests, s.reuses, s.within, s.gap_sum, s.contexts] for name, s in self.stats.items()},
            "sessions": {k: list(s.recent) for k, s in self.sessions.items()},
        }

    @classmethod
    def from_dict(cls, data: dict) -> ReuseTracker:
        tracker = cls()
        for key, level, touched in data.get("open", []):
            tracker.open[key] = (level, touched)
        for name, (requests, reuses, within, gap_sum, *contexts) in data.get("stats", {}).items():
            kept = {k: list(v) for k, v in (contexts[0] if contexts else {}).items() if len(v) == 1 + len(BOUNDS)}
            tracker.stats[name] = ReuseStats(requests, reuses, _rebinned(list(within)), gap_sum, kept)
        for key, recent in data.get("sessions", {}).items():
            if key in tracker.open:
                tracker.sessions[key] = SessionGaps(tuple(recent)[-RECENT:])
        return tracker


OLD_BOUNDS = (300.0, 1800.0, 3600.0, 43200.0, 86400.0)


def _rebinned(within: list[float]) -> list[float]:
    """Counts saved under the earlier bounds (`OLD_BOUNDS`), read as the counts within the next bound they knew."""
    if len(within) == len(BOUNDS):
        return within
    if len(within) != len(OLD_BOUNDS):
        return [0.0] * len(BOUNDS)
    return [within[next(i for i, old in enumerate(OLD_BOUNDS) if old >= bound)] for bound in BOUNDS]
