"""A Redis's outage as every client of it in this process sees it.

A gateway talks to one Redis through several clients on a request's way (budget and rate counters, the planner's
store, sticky pins, stored ids, file quotas, explicit caches, the response cache, keep-alive), each with a 0.5 s socket
timeout. Were each to keep its own retry window, a frozen Redis would cost a request one timeout per client it
touches (CI saw a 1.0 s request: counters, then the planner), and windows started at different moments would make
consecutive requests wait in turn (0.5 s, then 0.5 s again): against docs/reliability.md's "at most one request per
second a 0.5 s timeout". So every client of one Redis server consults one `Outage`: the first call to fail starts a
window in which no client calls Redis.

`RetryWindow` is one client's view of it: its own failure count and its `down`/`up` lines, logged once an outage. A
client calls Redis through it: `ask` (None while it rests or fails), `call` (raising, for a client that tells a miss
from an outage), `ask_now` (redis-py's synchronous client, on a thread of its own) or `ask_quick` (a synchronous
client the event loop calls: the planner's store on a request's way).

Nor does a client try Redis again at the window's end: every request in flight then would wait its timeout (8
concurrent callers, Redis frozen 6 s: 32 requests of 0.4 s or more). For a server `url` names, a failure leaves Redis
`down` until a call answers, and a thread pings it after each window while clients ask (`Outage.probe`); the clients
answer from the replica until the ping answers, so a frozen Redis costs a request a timeout only if it was in flight
when Redis froze, whatever the concurrency. Without a `url` (no server to ping) the first call after the window tries.

A synchronous call on the event loop holds every request on the replica while it waits, not one. So a quick client
times out after `QUICK_TIMEOUT_S`, and a quick call that timed out (no verdict on the server: a loaded runner's Redis
can be that slow) leaves Redis to the probe for the quick clients only (`doubted`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar
from urllib.parse import urlsplit

from redis.exceptions import RedisError, ResponseError

T = TypeVar("T")
# What an unreachable or failing Redis raises (timeouts are RedisError subclasses; refusals OSError).
ERRORS = (RedisError, OSError)


class Resting(Exception):
    """Redis not called: it rests after a call of this process failed (that client logged the outage)."""


class Outage:
    """Until when every client of one Redis leaves it alone (monotonic seconds); for a server `url` names, whether
    they all wait for the probe's ping (`down`: a call failed and none has answered since), or the event loop's quick
    clients do (`doubted`: down, or a quick call timed out)."""

    def __init__(self, url: str = "") -> None:
        self.until = 0.0
        self.url = url
        self.down = False
        self.doubted = False
        self.retry_s = 1.0      # the probe's window after a ping that failed: the last failed client's
        self._asked = False     # a client found Redis down (a quick one: in doubt) since the probe's last ping
        self._probe: threading.Thread | None = None
        self._lock = threading.Lock()   # failures come from the event loop and from writer threads

    def resting(self) -> bool:
        if self.down:
            self.probe()
            return True
        return time.monotonic() < self.until

    def failed(self, retry_s: float) -> None:
        """A client's call failed: every client rests `retry_s`, and (a server `url` names) until the probe answers."""
        self._rest(retry_s)
        if self.url:
            self.probe()

    def _rest(self, retry_s: float) -> None:
        # Never shortened: a client retrying sooner (retry_s 0) does not end the window another started.
        with self._lock:
            self.until = max(self.until, time.monotonic() + retry_s)
            self.retry_s = retry_s or self.retry_s
            self.down = self.doubted = bool(self.url)

    def answered(self) -> None:
        self.down = self.doubted = False

    def doubt(self) -> None:
        self.doubted = True
        self.probe()

    def probe(self) -> None:
        """A client found Redis down or in doubt: ping it after the window, on a thread (one at a time), until it
        answers or a window passes in which no client asked (the next one to ask starts it again)."""
        with self._lock:
            self._asked = True
            if self._probe is None:
                self._probe = threading.Thread(target=self._probing, name="prefixgate-redis-probe", daemon=True)
                self._probe.start()

    def _probing(self) -> None:
        import redis

        client = redis.Redis.from_url(self.url, socket_timeout=PROBE_TIMEOUT_S, socket_connect_timeout=PROBE_TIMEOUT_S)
        try:
            while True:
                while (wait := self.until - time.monotonic()) > 0:
                    time.sleep(wait)
                with self._lock:
                    if not (self.doubted and self._asked):
                        self._probe = None
                        return
                    self._asked = False
                try:
                    client.ping()
                except ERRORS:
                    self._rest(self.retry_s)    # still down: every client rests another window
                else:
                    self.answered()             # each client logs `up` once a call of its own answers
        except Exception:
            # Not an outage but a bug: the clients try Redis at a window's end themselves, rather than wait on a probe
            # that cannot answer (or start one that fails on every call).
            logging.getLogger(__name__).exception("redis probe failed; clients call redis after each window")
            self.answered()
        finally:
            client.close()
            with self._lock:
                if self._probe is threading.current_thread():   # it ended on an error: the next ask starts another
                    self._probe = None


# A quick client's timeout (its socket's and its connection's). Redis on loopback answered the planner's calls in
# 0.2 ms (p50), 0.4 ms (p99) and under 2 ms (max of 3,000, appendfsync always) on the shared 2-core VM, and with six
# busy processes besides in 24 ms (p99) and 144 ms (max of 13,000): a loaded CI runner's. Half the usual timeout, and
# one such wait an outage where the usual one was one a second; one that fires on a live Redis costs the planner's
# calls until the probe's ping answers (`RetryWindow.failed`'s `rest`), no other client anything.
QUICK_TIMEOUT_S = 0.25
PROBE_TIMEOUT_S = 0.5    # the probe waits off the loop: as long as every other client


_OUTAGES: dict[str, Outage] = {}
_LOCK = threading.Lock()


def outage_of(url: str) -> Outage:
    """The process's one `Outage` for the server `url` names (its databases share a server's fate)."""
    parts = urlsplit(url)
    server = parts.path if parts.scheme == "unix" else f"{parts.hostname}:{parts.port or 6379}"
    with _LOCK:
        return _OUTAGES.setdefault(server, Outage(url))


class RetryWindow:
    """One client's calls to Redis: left alone while `outage` rests, a failure resting it (and every other client of
    that server) for `retry_s`; `down` and `up` logged once an outage. Without an `outage`, one of its own."""

    def __init__(self, log: logging.Logger, down: str, up: str, retry_s: float = 1.0,
                 outage: Outage | None = None) -> None:
        self.log, self.down_message, self.up_message, self.retry_s = log, down, up, retry_s
        self.outage = outage if outage is not None else Outage()
        self.failures = 0
        self._retrying: asyncio.Task | None = None
        self._again = False     # `retry` asked while `done` ran: it may have looked before what was kept then
        self.outages = 0        # times this client logged Redis going down (a failure after it last answered)
        self._down = False
        self._refused = False   # a refused command logged (once a client: each request may send it)

    def resting(self) -> bool:
        return self.outage.resting()

    def failed(self, e: BaseException | None = None, rest: bool = True) -> None:
        """A call failed: every client leaves Redis alone for the window and then until the probe's ping answers.
        `rest` false: a quick call's short timeout, which is no verdict on the server; only the quick clients leave
        it alone until the ping (with every client's timeout) says whether it is down."""
        self.failures += 1
        if isinstance(e, ResponseError):
            # Redis answered, refusing this command (a script's error, a command an older Redis lacks): the
            # server is up, so no other client rests for it (a budget's counters for a response cache's refusal).
            if not self._refused:
                self._refused = True
                self.log.warning("redis refused a command (%s: %s); this client goes on without it", type(e).__name__, e)
            return
        if rest or not self.outage.url:     # no server to probe: the window decides
            self.outage.failed(self.retry_s)
        else:
            self.outage.doubt()
        if e is not None and not self._down:     # without `e`: a call that neither logs nor reports answers
            self._down = True
            self.outages += 1
            if self.down_message:               # none: its client logs what it does instead
                self.log.warning(self.down_message, type(e).__name__)

    def answered(self) -> None:
        self.outage.answered()
        if self._down:
            self._down = False
            if self.up_message:
                self.log.warning(self.up_message)

    async def ask(self, call: Callable[[], Awaitable[T]]) -> T | None:
        """`call`'s answer from Redis; None while Redis rests, or when it does not answer (which rests it)."""
        try:
            return await self.call(call)
        except (Resting, *ERRORS):
            return None

    async def call(self, call: Callable[[], Awaitable[T]]) -> T:
        """`ask` for a client that tells a miss from an outage: `Resting` raised while Redis rests, and what Redis
        raised when it does not answer (which rests it)."""
        if self.resting():
            raise Resting("redis: left alone for a moment after it did not answer")
        with self._asking():
            return await call()

    def ask_quick(self, call: Callable[[], T]) -> T | None:
        """`ask_now` for a synchronous client the event loop calls (timing out after `QUICK_TIMEOUT_S`): Redis also
        left alone after a quick call of its own timed out, until a call answers (`Outage.probe` pings it)."""
        if self.outage.doubted:
            self.outage.probe()
            return None
        if self.resting():
            return None
        try:
            with self._asking(rest=False):
                return call()
        except ERRORS:
            return None

    def ask_now(self, call: Callable[[], T]) -> T | None:
        """`ask` for a synchronous client off the event loop (redis-py's own: the planner's writer threads)."""
        if self.resting():
            return None
        try:
            with self._asking():
                return call()
        except ERRORS:
            return None

    @contextmanager
    def _asking(self, rest: bool = True) -> Iterator[None]:
        try:
            yield
        except ERRORS as e:
            self.failed(e, rest)
            raise
        self.answered()

    def retry(self, done: Callable[[], Awaitable[bool]]) -> None:
        """Call `done` after each window, in the background, until it is true (one task and one `done` a client):
        what it kept while Redis rested (or did not answer) is sent once Redis answers, though nothing else calls
        the client (a quiet replica's would wait for ever). `stop` ends it."""
        self._again = True
        if self._retrying is None or self._retrying.done():
            self._retrying = asyncio.get_running_loop().create_task(self._retry(done))

    async def stop(self) -> None:
        if self._retrying is not None:
            self._retrying.cancel()
            await asyncio.gather(self._retrying, return_exceptions=True)

    async def rested(self, patience_s: float = math.inf) -> None:
        """Back once Redis may be called again, a moment from now at the soonest: its window over and, after a
        failure, the probe's ping answered (polled: the probe is a thread); or once `patience_s` has passed."""
        give_up = time.monotonic() + patience_s
        while True:
            await asyncio.sleep(min(max(self.outage.until - time.monotonic(), 0.0) + 0.05,
                                    max(give_up - time.monotonic(), 0.0)))
            if not self.resting() or time.monotonic() >= give_up:
                return

    async def _retry(self, done: Callable[[], Awaitable[bool]]) -> None:
        while True:
            self._again = False
            flushed = await done()
            if flushed and not self._again:
                return
            if flushed or self.resting():
                await self.rested()
            else:
                # Unflushed with Redis not resting: it answered, refusing a command; try again a window later, not in
                # a spin of 50 ms retries of a command it will refuse again.
                await asyncio.sleep(self.retry_s)
