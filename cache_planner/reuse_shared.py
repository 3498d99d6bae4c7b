"""The reuse evidence gateway replicas share through Redis: when each opportunity was last used anywhere, and the
route's counts.

Behind a balancer that is not sticky a conversation's turns alternate between replicas. A replica learning only from
the requests it answered would time each gap from the turn *it* last saw (twice the real gap with two replicas) and
price its TTLs on those (an hour's premium where 5 minutes would do); one just started would know nothing. So:

- each request *touches* the opportunities it opened or reused (`ReuseTracker.observe`): their level, when, and a
  conversation's latest gaps. Before it is planned, a request reads (one MGET) the touches of its candidates and
  its last `reuse.SHARED_RECENT` prefix keys (a turn adds fewer blocks, so the turn another replica answered is
  among them): its gap runs from the latest use anywhere, in the context of that session's gaps;
- what each replica counts (`ReuseStats`) is added to the route's hash in Redis, and the totals read back, at most
  once per `every_s` a route, by a writer thread (`prefixgate.summed_counts`): nothing but the one read waits on
  Redis.

Keys are hashes of the route and prefix key (no tenant, key or credential in Redis), and expire: a touch once a gap
from it would say nothing (`reuse.BOUNDS[-1]`), a route's counts after a day without requests. While Redis does not
answer, each replica learns from its own requests (the single-replica behaviour) and says so once in its log.
"""

from __future__ import annotations

import hashlib
import logging
import queue
import threading
import time

from prefixgate.cache_planner.reuse import BOUNDS, ReuseStats, ReuseTracker, Touch
from prefixgate.redis_outage import RetryWindow, outage_of
from prefixgate.summed_counts import SummedCounts

log = logging.getLogger("prefixgate.planner")

TOUCH = "reuse:touch:"      # after the planner store's prefix ("prefixgate:route:"), as its other keys
COUNTS = "reuse:counts:"
COUNTS_TTL_S = 86400
IDLE_EXIT_S = 5.0       # the writer thread ends after this long with nothing to write (the next write starts it)


def retry_window(url: str, retry_s: float) -> RetryWindow:
    """The planner store's window on the Redis at `url` (every client of it in this process rests together): Redis
    left alone `retry_s` after a failure, the sharing's outage logged once."""
    return RetryWindow(log, "planner: redis unreachable (%s); each replica learns reuse gaps from its own requests "
                       "until it answers (a conversation alternating between replicas shows each longer gaps)",
                       "planner: redis answers again; replicas share reuse gaps", retry_s, outage_of(url))


def _hash(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


class SharedReuse:
    """Every route's shared evidence for one planner: `client` (redis-py, sync, quick: a request's reads, on the event
    loop), `writer` (the writer thread's), its keys' `prefix`, one writer thread. `window` is the planner store's: Redis
    left alone after a failure is left alone by every call on a request's way (`RetryWindow.ask_quick`)."""

    def __init__(self, client: object, writer: object, prefix: str, window: RetryWindow,
                 every_s: float = 1.0) -> None:
        self.client, self.writer, self.window = client, writer, window
        self.touches, self.counts = prefix + TOUCH, prefix + COUNTS
        self.summed = SummedCounts(writer, window, COUNTS_TTL_S, every_s, reader=client)
        self._writes: queue.SimpleQueue[tuple[str, dict[str, Touch]]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def route(self, name: str) -> SharedRoute:
        return SharedRoute(self, _hash(name))

    def pull(self, route: str, tracker: ReuseTracker) -> None:
        """Read the route's counts now (a route this replica has just started planning)."""
        totals = self.summed.read(self.counts + route)
        if totals is not None:
            # Counts shared less than a second ago may not be in yet, where the route's state the planner store
            # loaded has them: the fuller of the two stands until this replica's next share reads the totals again.
            known = tracker.stats
            tracker.shared_totals({level: stats for level, stats in _totals(totals).items()
                                   if level not in known or stats.requests >= known[level].requests})

    # ---- the writer thread ------------------------------------------------------------------------------

    def _wake(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="prefixgate-reuse-share", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        quiet_since = time.monotonic()
        every_s = self.summed.every_s
        while True:
            touches: dict[str, Touch] = {}
            try:
                route, batch = self._writes.get(timeout=every_s / 4)
                touches.update({_hash(route, k): t for k, t in batch.items()})
                while not self._writes.empty():
                    route, batch = self._writes.get_nowait()
                    touches.update({_hash(route, k): t for k, t in batch.items()})
            except queue.Empty:
                pass
            if touches:
                self._send_touches(touches)
            counting = self.summed.pending()
            self.summed.flush(time.monotonic())
            if touches or counting:
                quiet_since = time.monotonic()
            with self._lock:
                if time.monotonic() - quiet_since > IDLE_EXIT_S and self._writes.empty() and not self.summed.pending():
                    self._thread = None
                    return

    def _send_touches(self, touches: dict[str, Touch]) -> None:
        self.window.ask_now(lambda: self._sent(touches))

    def _sent(self, touches: dict[str, Touch]) -> list[object]:
        pipe = self.writer.pipeline(transaction=False)  # type: ignore[attr-defined]
        for place, t in touches.items():
            pipe.set(self.touches + place, f"{t.at!r} {t.level} {','.join(map(repr, t.gaps))}", px=int(BOUNDS[-1] * 1000))
        return pipe.execute()


class _RouteCounts:
    """A route's tracker as summed counts: its counts per level as the route hash's fields."""

    def __init__(self, tracker: ReuseTracker) -> None:
        self.tracker = tracker

    def take_unshared(self) -> dict[str, float]:
        return {name: n for level, stats in self.tracker.take_unshared().items() for name, n in _fields(level, stats).items()}

    def give_back(self, taken: dict[str, float]) -> None:
        for level, stats in _totals(taken).items():    # kept for the next try, and still counted here meanwhile
            self.tracker.unshared.setdefault(level, ReuseStats()).add(stats)

    def shared_totals(self, totals: dict[str, float]) -> None:
        self.tracker.shared_totals(_totals(totals))


class SharedRoute:
    """One route's share (`reuse.Sharing`): what its tracker asks and tells."""

    def __init__(self, owner: SharedReuse, route: str) -> None:
        self.owner, self.route = owner, route

    def seen(self, keys: list[str]) -> dict[str, Touch]:
        owner = self.owner
        if not keys:
            return {}
        found = owner.window.ask_quick(lambda: owner.client.mget([owner.touches + _hash(self.route, k) for k in keys]))  # type: ignore[attr-defined]
        if found is None:
            return {}
        return {k: touch for k, raw in zip(keys, found, strict=True) if raw and (touch := _touch(raw)) is not None}

    def touch(self, touches: dict[str, Touch]) -> None:
        if touches:
            self.owner._writes.put((self.route, touches))
            self.owner._wake()

    def counted(self, tracker: ReuseTracker) -> None:
        self.owner.summed.counted(self.owner.counts + self.route, _RouteCounts(tracker))
        self.owner._wake()


def _touch(raw: bytes) -> Touch | None:
    try:
        at, level, gaps = raw.decode().split(" ")
        return Touch(level, float(at), tuple(float(g) for g in gaps.split(",") if g))
    except ValueError:
        return None


def _fields(level: str, stats: ReuseStats) -> dict[str, float]:
    """A level's counts as the route hash's fields ('|' never occurs in a level or a context)."""
    out = {f"{level}|requests": stats.requests, f"{level}|reuses": stats.reuses, f"{level}|gap_sum": stats.gap_sum}
    out.update({f"{level}|within|{i}": n for i, n in enumerate(stats.within)})
    for context, counts in stats.contexts.items():
        out.update({f"{level}|context|{context}|{i}": n for i, n in enumerate(counts)})
    return out


def _totals(raw: dict[str, float]) -> dict[str, ReuseStats]:
    """The route hash's fields back as counts per level (a field this version does not know is left out)."""
    totals: dict[str, ReuseStats] = {}
    for name, value in raw.items():
        level, _, rest = name.partition("|")
        stats = totals.setdefault(level, ReuseStats())
        parts, n = rest.split("|"), float(value)
        if parts[0] in ("requests", "reuses", "gap_sum") and len(parts) == 1:
            setattr(stats, parts[0], n)
        elif parts[0] == "within" and len(parts) == 2 and parts[1].isdigit() and int(parts[1]) < len(BOUNDS):
            stats.within[int(parts[1])] = n
        elif parts[0] == "context" and len(parts) == 3 and parts[2].isdigit() and int(parts[2]) <= len(BOUNDS):
            stats.contexts.setdefault(parts[1], [0.0] * (1 + len(BOUNDS)))[int(parts[2])] = n
    return totals
