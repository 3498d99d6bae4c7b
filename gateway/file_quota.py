"""What each party (`ownership.principal`: a tenant, or a key without one) stores through the gateway's Files
endpoints, against its key's `uploads` limit in the policy (`max_mb`, `max_files`): behind the gateway's one
provider key every tenant fills one organisation's storage, so one tenant must not take it all.

A file counts from the provider's answer to its upload (its size as the provider gives it) until it is deleted
through the gateway, expires (its `expires_at`, Gemini's 48 hours), or is found deleted at the provider
(`files_upstream.forget_if_gone`: its 404 to a call for the file through the gateway; `files_gone`: a model
request's refusal naming it). A file Claude's code
execution wrote in the tenant's answer is in the same storage and counts too, from that answer
(`written_files`): 0 bytes until the provider's metadata gives its size (`adjust`). An upload is refused before a
byte is sent when the party's files would pass the count, or its stored bytes and the upload's length the size (a
chunked body is measured as it is spooled, before it is sent). An upload in flight holds its length and one
file until it ends, so uploads started at once on any replicas are counted against one another (an OpenAI
Upload's declared `bytes` from its create until it is completed, cancelled or expires: `upload_hold`).

Kept in the ledger's SQLite file and, with `redis_url`, in Redis (one hash and one expiry index per party,
changed by scripts so replicas agree); while Redis does not answer this replica counts from its own file, and
the changes Redis missed (it rested, `prefixgate/redis_outage.py`, or did not answer) are sent to it in order once it
answers: an upload or a deletion is never left out of what the other replicas count.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import NamedTuple

from prefixgate.errors import RequestError
from prefixgate.gateway.shared_first import started
from prefixgate.policies.schema import UploadLimit
from prefixgate.redis_outage import RetryWindow, outage_of

log = logging.getLogger("prefixgate.gateway")
PREFIX = "prefixgate:files:stored:"
BYTES, COUNT = "#bytes", "#count"      # a party's totals, beside one field per file id (its bytes)
MIB = 1024 * 1024
MAX_MISSED = 100_000    # the newest changes Redis missed that are kept for it
HELD = "~"          # how a hold's id begins (a provider's file id never does)
HOLD_S = 3600.0     # a hold left by a replica that died mid-upload stops counting after this
# A file lives until it is deleted unless it says when it expires; it counts (and its owner is remembered) that
# long (an owner forgotten earlier would make the tenant's own file a 404: refused, never leaked).
FILE_TTL_S = 10 * 365 * 86400
# `0 - b`, never `-b`: an empty file's -0 is no integer to HINCRBY, which would stop the script after its HDEL
# and leave the file counted for good.
# KEYS: the party's hash, its expiry index. ARGV: now. Drops the expired files, answers the totals.
_USAGE = f"""
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1])) do
  local b = redis.call('HGET', KEYS[1], id)
  if b then
    redis.call('HDEL', KEYS[1], id)
    redis.call('HINCRBY', KEYS[1], '{BYTES}', 0 - tonumber(b))
    redis.call('HINCRBY', KEYS[1], '{COUNT}', -1)
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[1])
return redis.call('HMGET', KEYS[1], '{BYTES}', '{COUNT}')
"""
# ARGV: file id, bytes, expires. Counted once, however often it is added.
_ADD = f"""
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 1 then
  redis.call('HINCRBY', KEYS[1], '{BYTES}', ARGV[2])
  redis.call('HINCRBY', KEYS[1], '{COUNT}', 1)
end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return 1
"""
# ARGV: file id.
_REMOVE = f"""
local b = redis.call('HGET', KEYS[1], ARGV[1])
if b then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('HINCRBY', KEYS[1], '{BYTES}', 0 - tonumber(b))
  redis.call('HINCRBY', KEYS[1], '{COUNT}', -1)
end
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
"""
# ARGV: file id, bytes to add (negative: to take off, down to 0). Only a file still counted; answers the change made.
_ADJUST = f"""
local b = redis.call('HGET', KEYS[1], ARGV[1])
if not b then
  return 0
end
local changed = math.max(0, tonumber(b) + tonumber(ARGV[2])) - tonumber(b)
redis.call('HINCRBY', KEYS[1], ARGV[1], changed)
redis.call('HINCRBY', KEYS[1], '{BYTES}', changed)
return changed
"""


class Stored(NamedTuple):
    bytes: int
    files: int


class FileQuota:
    """A party's stored files and bytes: `check` before an upload, `add` after it, `remove` on its deletion."""

    def __init__(self, sqlite_path: str, redis_url: str = "", clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._db = sqlite3.connect(sqlite_path, timeout=10, check_same_thread=False, isolation_level=None, uri=True)
        self._db.execute("CREATE TABLE IF NOT EXISTS stored_files (owner TEXT NOT NULL, id TEXT NOT NULL, "
                         "bytes INTEGER NOT NULL, expires REAL NOT NULL, PRIMARY KEY (owner, id))")
        self._redis = None
        # (script, owner, its ARGV): changes Redis missed, oldest first; `_sending` keeps them in order.
        self._missed: deque[tuple[object, str, list]] = deque(maxlen=MAX_MISSED)
        self._sending = asyncio.Lock()
        if redis_url:
            import redis.asyncio as aioredis

            self._redis = aioredis.from_url(redis_url, socket_timeout=0.5, socket_connect_timeout=0.5)
            self._usage = self._redis.register_script(_USAGE)
            self._add = self._redis.register_script(_ADD)
            self._remove = self._redis.register_script(_REMOVE)
            self._adjust = self._redis.register_script(_ADJUST)
            self._window = RetryWindow(log, "file quotas: redis unreachable (%s); each replica counts the files it "
                                       "stored itself until it answers", "file quotas: redis answers again",
                                       outage=outage_of(redis_url))

    async def stored(self, owner: str) -> Stored:
        """What `owner` stores now (expired files not counted)."""
        if self._redis is not None and await self._caught_up():
            found = await self._window.ask(lambda: self._usage(keys=self._keys(owner), args=[self._clock()]))
            if found is not None:
                return Stored(*(int(v or 0) for v in found))
        with self._lock:
            row = self._db.execute("SELECT coalesce(sum(bytes), 0), count(*) FROM stored_files WHERE owner = ? "
                                   "AND expires >= ?", (owner, self._clock())).fetchone()
        return Stored(int(row[0]), int(row[1]))

    async def reserve(self, owner: str | None, limit: UploadLimit | None, size: int | None) -> str | None:
        """A hold on `size` bytes and one file for an upload starting now (its id, for `release`), counted like a
        stored file until released or `HOLD_S` pass, so uploads in flight at once are counted against one
        another; a 403 when it would take `owner` past `limit` (None: no limit, no hold)."""
        if owner is None or limit is None:
            return None
        hold, size = HELD + secrets.token_hex(8), size or 0
        await self.add(owner, hold, size, HOLD_S)
        now = await self.stored(owner)      # this hold included: of two racing, neither passes the limit
        if limit.max_files and now.files > limit.max_files:
            await self.release(owner, hold)
            raise _refused(f"{now.files - 1} files stored or being uploaded, the most this key's tenant may keep is "
                           f"{limit.max_files} (uploads.max_files)")
        if limit.max_mb and now.bytes > limit.max_mb * MIB:
            await self.release(owner, hold)
            raise _refused(f"{now.bytes - size:,} bytes stored or being uploaded, and this upload's {size:,} more "
                           f"would pass the {limit.max_mb:g} MiB ({int(limit.max_mb * MIB):,} bytes) this key's "
                           "tenant may keep (uploads.max_mb)")
        return hold

    async def release(self, owner: str | None, hold: str | None) -> None:
        """An upload's hold is done with (the file it made, if any, was `add`ed)."""
        if hold is not None:
            await self.remove(owner, hold)

    def add(self, owner: str | None, ident: str, size: int, ttl_s: float) -> asyncio.Task[None]:
        """`ident` counted as `size` bytes for `ttl_s` (added again: its expiry moves, its size stays: `adjust`), in a
        task the request being handled answers only once it is done (shared_first.py), awaited or not: an upload
        another replica is asked for at once must see the file."""
        task = asyncio.get_running_loop().create_task(self._added(owner, ident, size, ttl_s))
        started(task)
        return task

    async def _added(self, owner: str | None, ident: str, size: int, ttl_s: float) -> None:
        if owner is None:
            return
        expires = self._clock() + ttl_s
        with self._lock:
            self._db.execute("INSERT INTO stored_files VALUES (?, ?, ?, ?) ON CONFLICT (owner, id) DO UPDATE SET "
                             "expires = excluded.expires", (owner, ident, size, expires))
        if self._redis is not None:
            await self._send(self._add, owner, [ident, size, expires])

    async def remove(self, owner: str | None, ident: str) -> None:
        if owner is None:
            return
        with self._lock:
            self._db.execute("DELETE FROM stored_files WHERE owner = ? AND id = ?", (owner, ident))
        if self._redis is not None:
            await self._send(self._remove, owner, [ident])

    async def size_of(self, owner: str | None, ident: str) -> int | None:
        """The bytes `owner`'s file `ident` counts as (another replica's upload too); None: not one of its files."""
        if owner is None or ident.startswith(HELD):
            return None
        if self._redis is not None and await self._caught_up():
            found = await self._window.ask(lambda: self._redis.hget(self._keys(owner)[0], ident))  # type: ignore[union-attr]
            if found is not None:
                return int(found)
        with self._lock:
            row = self._db.execute("SELECT bytes FROM stored_files WHERE owner = ? AND id = ? AND expires >= ?",
                                   (owner, ident, self._clock())).fetchone()
        return int(row[0]) if row else None

    async def adjust(self, owner: str | None, ident: str, by: int) -> int:
        """`by` bytes more (or fewer, down to 0) for a counted file or hold; the change made (0 once it no longer
        counts): a written file's size once learnt, an Upload's declared bytes as its Parts arrive."""
        if owner is None:
            return 0
        with self._lock:
            row = self._db.execute("SELECT bytes FROM stored_files WHERE owner = ? AND id = ?", (owner, ident)).fetchone()
            changed = max(0, row[0] + by) - row[0] if row else 0
            self._db.execute("UPDATE stored_files SET bytes = bytes + ? WHERE owner = ? AND id = ?", (changed, owner, ident))
        if self._redis is not None:
            shared = await self._send(self._adjust, owner, [ident, by])
            if shared is not None:
                return int(shared)
        return changed

    async def aclose(self) -> None:
        with self._lock:
            self._db.close()
        if self._redis is not None:
            await self._window.stop()
            await self._redis.aclose()

    async def _send(self, script: object, owner: str, args: list) -> int | None:
        """Redis's answer to the change `script` makes, sent after those it missed; None while it rests or does not
        answer: then kept, and sent once it answers (`_caught_up`), though this replica be called no more."""
        async with self._sending:
            self._missed.append((script, owner, args))
            answer = await self._resent()
        if self._missed:
            self._window.retry(self._caught_up)
        return answer

    async def _caught_up(self) -> bool:
        """Whether Redis has every change this replica made (those it missed sent first)."""
        if self._missed:
            async with self._sending:
                await self._resent()
        return not self._missed

    async def _resent(self) -> int | None:
        """The changes Redis missed, sent oldest first: the last one's answer, None while some remain."""
        answer = None
        while self._missed and not self._window.resting():
            script, owner, args = self._missed[0]
            answer = await self._window.ask(partial(script, keys=self._keys(owner), args=args))  # type: ignore[arg-type]
            if answer is None and script is not self._adjust:
                return None         # kept: a file added or removed twice counts once
            # An adjust that did not answer is in doubt (it may yet run when Redis wakes): never sent twice.
            self._missed.popleft()
        return answer if not self._missed else None

    def _keys(self, owner: str) -> list[str]:
        return [f"{PREFIX}{owner}", f"{PREFIX}{owner}:expires"]


def upload_hold(upload_id: str) -> str:
    """What an OpenAI Upload in flight is counted under, from its create until it is completed, cancelled or expires."""
    return HELD + upload_id


def _refused(why: str) -> RequestError:
    return RequestError(f"upload refused: {why}; delete files to upload more", field="file", status=403,
                        kind="permission")


def file_size(made: dict) -> int:
    """A provider's File's size: OpenAI's `bytes`, Anthropic's `size_bytes`, Gemini's `sizeBytes` (a string)."""
    size = made.get("bytes", made.get("size_bytes", made.get("sizeBytes")))
    try:
        return max(0, int(size))
    except (TypeError, ValueError):
        return 0
