"""One store for every memo of the request path: keyed by content, bounded by the memory its values hold,
one least-recently-used queue for all of them.

A `Memo` is a named part of the store (the resent bodies, parsed segments, token counts...). Its keys say
what a value follows from (the exact bytes or a content hash), so an entry is never stale, only old. Each
entry is charged what its value really holds (`sizing.weigh`: the parsed objects, not the bytes they came
from), and the whole store keeps at most `max_bytes`: the least recently used entry goes first, whichever
memo it belongs to, as vLLM's prefix cache keeps one free-block queue for every request. A value that
grows after it is stored (a resent body's carried planner values) is charged more through `grow`.

Reads take no lock (one dict operation each, atomic under the GIL); writes take the store's lock. Each memo
counts its hits, misses, evictions, entries and bytes: `/metrics` shows them as `prefixgate_memo_*`.
`keep(0)` empties the store and turns every memo off (a lookup misses, a store is dropped).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

# What the store itself holds per entry beside the value and its key: its OrderedDict slot and node, the
# (memo, key) tuple and the entry object (tracemalloc over 100k entries: 217 bytes, the int value included).
ENTRY_BYTES = 200
DEFAULT_BYTES = 24 << 20


class _Entry:
    __slots__ = ("memo", "value", "nbytes")

    def __init__(self, memo: Memo, value: Any, nbytes: int) -> None:
        self.memo, self.value, self.nbytes = memo, value, nbytes


class Store:
    """Every memo's entries in one LRU queue, at most `max_bytes` of them (0: none kept)."""

    def __init__(self, max_bytes: int = DEFAULT_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[Memo, Hashable], _Entry] = OrderedDict()
        self._lock = threading.RLock()
        self.bytes = 0
        self.memos: dict[str, Memo] = {}

    def memo(self, name: str, on_evict: Callable[[Hashable, Any], None] | None = None) -> Memo:
        """The memo `name` of this store (made on first use; a name is one memo)."""
        found = self.memos.get(name)
        if found is None:
            found = self.memos[name] = Memo(self, name, on_evict)
        return found

    def resize(self, max_bytes: int) -> None:
        with self._lock:
            self.max_bytes = max_bytes
            self._shrink()

    def clear(self) -> None:
        with self._lock:
            while self._entries:
                self._evict(count=False)

    def _put(self, memo: Memo, key: Hashable, value: Any, nbytes: int) -> None:
        nbytes += ENTRY_BYTES
        with self._lock:
            ident = (memo, key)
            old = self._entries.pop(ident, None)
            if old is not None:
                self._account(old, -1)
            entry = _Entry(memo, value, nbytes)
            self._entries[ident] = entry
            self._account(entry, 1)
            self._shrink()

    def _grow(self, memo: Memo, key: Hashable, nbytes: int) -> None:
        with self._lock:
            entry = self._entries.get((memo, key))
            if entry is None:
                return
            self._entries.move_to_end((memo, key))     # in use: what grows is the request being served
            entry.nbytes += nbytes
            self.bytes += nbytes
            memo.bytes += nbytes
            self._shrink()

    def _pop(self, memo: Memo, key: Hashable) -> Any:
        with self._lock:
            entry = self._entries.pop((memo, key), None)
            if entry is None:
                return None
            self._account(entry, -1)
            return entry.value

    def _account(self, entry: _Entry, sign: int) -> None:
        self.bytes += sign * entry.nbytes
        entry.memo.bytes += sign * entry.nbytes
        entry.memo.entries += sign

    def _shrink(self) -> None:
        while self._entries and self.bytes > self.max_bytes:
            self._evict(count=True)

    def _evict(self, count: bool) -> None:
        (memo, key), entry = self._entries.popitem(last=False)
        self._account(entry, -1)
        if count:
            memo.evictions += 1
        if memo.on_evict is not None:
            memo.on_evict(key, entry.value)


class Memo:
    """One kind of remembered work in the store: `get` a value by its content key, `put` one with what it
    holds in bytes."""

    def __init__(self, store: Store, name: str, on_evict: Callable[[Hashable, Any], None] | None) -> None:
        self.store, self.name, self.on_evict = store, name, on_evict
        self.hits = self.misses = self.evictions = self.entries = self.bytes = 0
        self.disabled = False       # this memo alone off (bench/memo_pays.py measures what each one saves)

    @property
    def on(self) -> bool:
        return self.store.max_bytes > 0 and not self.disabled

    def get(self, key: Hashable) -> Any:
        """The value under `key`, made the most recently used; None (a miss) when there is none."""
        ident = (self, key)
        entries = self.store._entries
        entry = entries.get(ident)
        if entry is None:
            self.misses += 1
            return None
        try:
            entries.move_to_end(ident)
        except KeyError:        # evicted by another thread since: the value is right all the same
            pass
        self.hits += 1
        return entry.value

    def peek(self, key: Hashable) -> Any:
        """The value under `key` without counting a hit or a miss or touching its place in the queue."""
        entry = self.store._entries.get((self, key))
        return None if entry is None else entry.value

    def put(self, key: Hashable, value: Any, nbytes: int) -> None:
        """Remember `value` under `key`, charged `nbytes` (what it holds: `sizing.weigh`). Dropped when the
        store is off or the value alone is past its bound."""
        if 0 < nbytes + ENTRY_BYTES <= self.store.max_bytes and not self.disabled:
            self.store._put(self, key, value, nbytes)

    def grow(self, key: Hashable, nbytes: int) -> None:
        """Charge the entry under `key` `nbytes` more (its value came to hold more); evicts past the bound."""
        if nbytes:
            self.store._grow(self, key, nbytes)

    def charged(self, key: Hashable) -> int:
        """The bytes the entry under `key` is charged (0 when there is none)."""
        entry = self.store._entries.get((self, key))
        return 0 if entry is None else entry.nbytes - ENTRY_BYTES

    def pop(self, key: Hashable) -> Any:
        """Forget the entry under `key` (not counted as an eviction); its value, or None."""
        return self.store._pop(self, key)

    def figures(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "evictions": self.evictions,
                "entries": self.entries, "bytes": self.bytes}


# The process's store: every memo of the request path lives in it, bounded by one setting
# (`resent_bodies_mb`, also `reuse_mb`).
STORE = Store()


def memo(name: str, on_evict: Callable[[Hashable, Any], None] | None = None) -> Memo:
    return STORE.memo(name, on_evict)


def keep(max_bytes: int) -> None:
    """Bound every memo together to `max_bytes` (0: keep nothing; every request does all its own work)."""
    STORE.resize(max_bytes)
