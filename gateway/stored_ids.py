"""Each provider-side id the gateway relays, with an expiry: who owns it (`ownership`: the principal that created
it), for a stored response or interaction its home (the upstream that answered it), and the prompt tokens it
puts before a request naming it (`tokens`).

A `resp_...` id belongs to the upstream organisation (and key) that created it, so a follow-up naming it
(`previous_response_id`, GET, DELETE, `input_items`, `cancel`) must go back there or it 404s; with several
replicas of one upstream (or accounts), chained requests are pinned to the one that holds the chain. An id
whose home is not known goes to the route's normal choice (which, for one upstream, is the same place).

One row per (kind, id) in the ledger's SQLite file (a restart keeps it; the most recent `MAX_REMEMBERED` homes
also in memory) and, with `redis_url`, one hash per (kind, id) in Redis, shared with every gateway replica (a
follow-up behind a load balancer lands on any of them). While Redis is down this replica answers from its own
file, and what it could not share then is shared once Redis answers again (`shared_later`). What an older
version kept (its own tables, its own Redis key names) is read too: `stored_ids_migrate`.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import TypeVar

from prefixgate.gateway import stored_ids_migrate as legacy
from prefixgate.gateway.shared_later import SharedLater
from prefixgate.redis_outage import RetryWindow, outage_of

T = TypeVar("T")
log = logging.getLogger("prefixgate.gateway")
# How long an id is remembered when the resource's own lifetime is not known (OpenAI keeps stored responses
# 30 days); a resource outliving its record becomes nobody's, which refuses, never leaks.
DEFAULT_TTL_S = 31 * 86400
MAX_REMEMBERED = 100_000
PRUNE_EVERY = 1000
OWNER, HOME, TOKENS = "owner", "home", "tokens"     # the fields of an id's Redis hash


class StoredIds:
    """(kind, id) -> owner and home; `allows` and `only_own` are the checks endpoints make."""

    REDIS_PREFIX = "prefixgate:stored:"

    def __init__(self, sqlite_path: str, redis_url: str = "", clock: Callable[[], float] = time.time,
                 limit: int = MAX_REMEMBERED) -> None:
        self.limit = limit
        self._clock = clock
        self._homes: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._begun: OrderedDict[tuple[str, str], str] = OrderedDict()    # owners `begin` knows, not yet in the file
        self._lock = threading.Lock()
        self._db = sqlite3.connect(sqlite_path, timeout=10, check_same_thread=False, isolation_level=None, uri=True)
        # As the ledger's appends: a commit is a write to the WAL, not an fsync (it survives the process, not a power cut).
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS stored_ids (kind TEXT NOT NULL, id TEXT NOT NULL, owner TEXT, "
                         "home TEXT, expires REAL NOT NULL, tokens INTEGER, PRIMARY KEY (kind, id))")
        self._db.execute("CREATE INDEX IF NOT EXISTS stored_ids_expires ON stored_ids (expires)")
        legacy.migrate(self._db)
        self._recorded = 0
        self._redis = None
        if redis_url:
            import redis.asyncio as aioredis

            self._redis = aioredis.from_url(redis_url, socket_timeout=0.5, socket_connect_timeout=0.5)
            self._window = RetryWindow(log, "stored ids: redis unreachable (%s); owners and homes another replica "
                                       "recorded are unknown here (their ids refused) and this replica's are shared once it answers",
                                       "stored ids: redis answers again", outage=outage_of(redis_url))
            self._shared = SharedLater(self._redis, self._window, clock)

    def record(self, kind: str, ident: object, owner: str | None, ttl_s: float = DEFAULT_TTL_S,
               home: str | None = None, tokens: int | None = None) -> None:
        """`owner` created (kind, ident), which lives on upstream `home` and puts `tokens` prompt tokens before a
        request that names it (a stored response: its prompt and answer; an explicit cache: its contents; what a
        budget reserves for them, gateway/unseen_prompt.py); remembered for `ttl_s`. A field not given (None) keeps
        what the row had: no owner is kept for an open gateway's None. One row upsert and one Redis write: in this
        replica's file when this returns (a follow-up may come at once); in Redis a moment later."""
        if tokens is not None and tokens < 0:
            tokens = None
        if not isinstance(ident, str) or not ident or (owner is None and home is None and tokens is None):
            return
        if home is not None:
            self._keep(kind, ident, home)
        with self._lock:
            self._db.execute("INSERT INTO stored_ids (kind, id, owner, home, tokens, expires) VALUES (?, ?, ?, ?, ?, ?) "
                             "ON CONFLICT (kind, id) DO UPDATE SET owner = coalesce(excluded.owner, owner), "
                             "home = coalesce(excluded.home, home), tokens = coalesce(excluded.tokens, tokens), "
                             "expires = excluded.expires", (kind, ident, owner, home, tokens, self._clock() + ttl_s))
            self._recorded += 1
            if self._recorded % PRUNE_EVERY == 1:       # expired rows refuse anyway; pruning only bounds the file
                self._db.execute("DELETE FROM stored_ids WHERE expires < ?", (self._clock(),))
            self._begun.pop((kind, ident), None)
        self._share(kind, ident, ttl_s, ((OWNER, owner), (HOME, home), (TOKENS, tokens)))

    def begin(self, kind: str, ident: object, owner: str | None, home: str, ttl_s: float = DEFAULT_TTL_S) -> None:
        """(kind, ident), which `owner` is having made on upstream `home` (a stream's first event names it), is known
        at once: in this replica's memory, and in Redis a moment later, for a follow-up that names it before it is done;
        its row is written once, by `record` when it is done, with its tokens. A replica that dies meanwhile loses it
        from its file: the id is then nobody's there (refused, never leaked), as an id recorded nowhere."""
        if not isinstance(ident, str) or not ident:
            return
        self._keep(kind, ident, home)
        if owner is not None:
            with self._lock:
                self._begun[(kind, ident)] = owner
                while len(self._begun) > self.limit:
                    self._begun.popitem(last=False)
        self._share(kind, ident, ttl_s, ((OWNER, owner), (HOME, home)))

    def _share(self, kind: str, ident: str, ttl_s: float, fields: tuple[tuple[str, object], ...]) -> None:
        if self._redis is not None:
            self._shared.set(self._key(kind, ident), {name: str(value) for name, value in fields if value is not None},
                             ttl_s)

    async def tokens(self, kind: str, ident: str) -> int | None:
        """The tokens `record` kept for (kind, ident), this replica's or another's; None: never recorded."""
        found = await self._field(kind, ident, TOKENS)
        return int(found) if found is not None else None

    async def owner(self, kind: str, ident: str) -> str | None:
        return await self._field(kind, ident, OWNER, legacy.owner_key(kind, ident))

    async def allows(self, kind: str, ident: str, caller: str | None) -> bool:
        """Whether `caller` (a principal) may see or touch (kind, ident)."""
        return caller is None or await self.owner(kind, ident) == caller

    async def only_own(self, kind: str, items: Iterable[T], ident_of: Callable[[T], str], caller: str | None) -> list[T]:
        """The items of a list call that `caller` owns (a page's owners asked of Redis in one round trip)."""
        items = list(items)
        if caller is None:
            return items
        owners = await self._owners(kind, [ident_of(item) for item in items])
        return [item for item, owner in zip(items, owners, strict=True) if owner == caller]

    async def _owners(self, kind: str, idents: list[str]) -> list[str | None]:
        """`owner` of each of `idents`: Redis's (one pipeline), else this replica's file."""
        shared: list[str | None] = [None] * len(idents)
        if self._redis is not None and idents:
            pipe = self._redis.pipeline(transaction=False)
            for ident in idents:
                pipe.hget(self._key(kind, ident), OWNER).get(legacy.owner_key(kind, ident))
            found = await self._window.ask(pipe.execute) or []
            for i, (value, older) in enumerate(zip(found[::2], found[1::2], strict=True)):
                either = value if value is not None else older
                shared[i] = either.decode() if either is not None else None
        return [owner if owner is not None else self._local(kind, ident, OWNER)
                for ident, owner in zip(idents, shared, strict=True)]

    def home_of(self, kind: str, ident: object) -> str | None:
        """The home this replica knows (`find_home` first asks the other replicas)."""
        if not isinstance(ident, str) or not ident:
            return None
        home = self._homes.get((kind, ident))
        if home is None:
            home = self._local(kind, ident, HOME)
            if home is not None:
                self._keep(kind, ident, home)
        return home

    async def find_home(self, kind: str, ident: object) -> str | None:
        """The home of (kind, ident): this replica's, else the one another replica shared (kept here after)."""
        home = self.home_of(kind, ident)
        if home is not None or self._redis is None or not isinstance(ident, str) or not ident:
            return home
        home = await self._shared_field(kind, ident, HOME, legacy.home_key(ident))
        if home is not None:
            self._keep(kind, ident, home)
        return home     # None: the route's normal choice, as without Redis

    async def forget(self, kind: str, ident: str) -> None:
        """(kind, ident) is deleted: nobody's from now on (where it lived is still known)."""
        with self._lock:
            self._db.execute("UPDATE stored_ids SET owner = NULL WHERE kind = ? AND id = ?", (kind, ident))
            self._begun.pop((kind, ident), None)
        if self._redis is not None:
            # An older replica's name for the owner too: read as a fallback, it would own the id again.
            await self._shared.unset(self._key(kind, ident), OWNER, legacy.owner_key(kind, ident))

    async def aclose(self) -> None:
        if self._redis is not None:
            await self._shared.drain()
        with self._lock:
            self._db.close()
        if self._redis is not None:
            await self._redis.aclose()

    def _key(self, kind: str, ident: str) -> str:
        return f"{self.REDIS_PREFIX}{kind}:{ident}"

    async def _field(self, kind: str, ident: str, field: str, legacy_key: str | None = None) -> str | None:
        """`field` of (kind, ident): as the replicas shared it in Redis, else this replica's file."""
        if self._redis is not None:
            found = await self._shared_field(kind, ident, field, legacy_key)
            if found is not None:
                return found
        found = self._local(kind, ident, field)
        return str(found) if found is not None else None

    async def _shared_field(self, kind: str, ident: str, field: str, legacy_key: str | None) -> str | None:
        """`field` as the replicas shared it, else under the key an older version wrote (if it had one); None when
        Redis does not answer (this replica's own file still does)."""
        pipe = self._redis.pipeline(transaction=False).hget(self._key(kind, ident), field)  # type: ignore[union-attr]
        if legacy_key is not None:
            pipe.get(legacy_key)
        answer = await self._window.ask(pipe.execute)
        value = next((found for found in answer or () if found is not None), None)
        return value.decode() if value is not None else None

    def _local(self, kind: str, ident: str, field: str) -> str | None:
        with self._lock:
            # SQL text: the column is one of this module's field names; values are bound.
            row = self._db.execute(f"SELECT {field} FROM stored_ids WHERE kind = ? AND id = ? AND expires >= ?",  # nosec B608
                                   (kind, ident, self._clock())).fetchone()
            if field == OWNER and (row is None or row[0] is None):
                return self._begun.get((kind, ident))
        return row[0] if row else None

    def _keep(self, kind: str, ident: str, home: str) -> None:
        self._homes[(kind, ident)] = home
        self._homes.move_to_end((kind, ident))
        while len(self._homes) > self.limit:
            self._homes.popitem(last=False)
