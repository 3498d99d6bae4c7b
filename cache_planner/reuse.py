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
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

# Gap bounds we answer questions about: the providers' TTLs (5m, 30m, 1h, 12h, 24h), and breaks of hours,
# which a 1h entry kept alive by refreshes can outlast (`lifetime.p_kept`).
BOUNDS = (300.0, 1800.0, 3600.0, 7200.0, 10800.0, 21600.0, 43200.0, 86400.0)
OPEN_LIMIT = 512
PRIOR_WEIGHT = 1.0
PRIOR_RATE = 0.5   # an unknown route: as likely to repeat as not
PRIOR_SOON = 0.8   # when a prefix does repeat, it usually repeats soon


@dataclass
class ReuseStats:
    """Evidence for one level of one route."""

    requests: float = 0.0
    reuses: float = 0.0
    within: list[float] = field(default_factory=lambda: [0.0] * len(BOUNDS))
    gap_sum: float = 0.0

    @property
    def reuses_per_hour(self) -> float:
        """How often the prefix comes back, from the mean gap between reuses (0 without evidence)."""
        return 3600.0 * self.reuses / self.gap_sum if self.reuses and self.gap_sum > 0 else 0.0

    def p_within(self, seconds: float) -> float:
        """Estimated probability that a prefix written now is read again within `seconds`."""
        rate = (self.reuses + PRIOR_WEIGHT * PRIOR_RATE) / (self.requests + PRIOR_WEIGHT)
        i = next((i for i, b in enumerate(BOUNDS) if seconds <= b), len(BOUNDS) - 1)
        soon = (self.within[i] + PRIOR_WEIGHT * PRIOR_SOON) / (self.reuses + PRIOR_WEIGHT)
        return rate * soon


class ReuseTracker:
    """Open opportunities of one route and the per-level statistics they resolve into."""

    def __init__(self) -> None:
        self.open: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self.stats: dict[str, ReuseStats] = {}

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
        reused: list[tuple[int, str]] = []
        latest_gap: dict[str, float] = {}  # per level, the gap of the longest reused prefix
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
            self.open[key] = (level, now)
            self.open.move_to_end(key)
            reused.append((index, level))
        open_levels = {level for level, _ in self.open.values()}
        for level in set(candidates.values()):
            # A request is evidence about a level's reuse rate only if there was something to reuse.
            if level not in open_levels:
                continue
            stats = self.level(level)
            stats.requests += 1
            if level in latest_gap:
                stats.reuses += 1
                stats.gap_sum += latest_gap[level]
                for i, bound in enumerate(BOUNDS):
                    stats.within[i] += latest_gap[level] <= bound
        for key, level in candidates.items():
            if key not in self.open:
                self.open[key] = (level, now)
        while len(self.open) > OPEN_LIMIT:
            self.open.popitem(last=False)
        return reused

    def to_dict(self) -> dict:
        return {
            "open": [[k, level, t] for k, (level, t) in self.open.items()],
            "stats": {name: [s.requests, s.reuses, s.within, s.gap_sum] for name, s in self.stats.items()},
        }

    @classmethod
    def from_dict(cls, data: dict) -> ReuseTracker:
        tracker = cls()
        for key, level, touched in data.get("open", []):
            tracker.open[key] = (level, touched)
        for name, (requests, reuses, within, gap_sum) in data.get("stats", {}).items():
            tracker.stats[name] = ReuseStats(requests, reuses, _rebinned(list(within)), gap_sum)
        return tracker


OLD_BOUNDS = (300.0, 1800.0, 3600.0, 43200.0, 86400.0)


def _rebinned(within: list[float]) -> list[float]:
    """Counts saved under the earlier bounds (`OLD_BOUNDS`), read as the counts within the next bound they knew."""
    if len(within) == len(BOUNDS):
        return within
    if len(within) != len(OLD_BOUNDS):
        return [0.0] * len(BOUNDS)
    return [within[next(i for i, old in enumerate(OLD_BOUNDS) if old >= bound)] for bound in BOUNDS]
