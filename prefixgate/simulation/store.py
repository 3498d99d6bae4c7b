"""The mechanism under every provider's cache: prefix entries with a lifetime, in isolated scopes.

A scope is one provider cache the provider keeps apart from the others (provider + model + workspace,
plus the machine for OpenAI's routing). Entries are keyed by a prefix hash and know how many prompt
tokens they cover; provider modules decide which keys to look up, write and refresh.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass


@dataclass
class Entry:
    tokens: int
    ttl: str
    ttl_s: float
    written_at: float
    visible_at: float
    expires_at: float

    def usable(self, now: float) -> bool:
        return self.visible_at <= now < self.expires_at

    def refresh(self, now: float) -> None:
        self.expires_at = max(self.expires_at, now + self.ttl_s)


class CacheStore:
    def __init__(self) -> None:
        self._scopes: dict[Hashable, dict[str, Entry]] = {}
        self._ops = 0

    def get(self, scope: Hashable, key: str, now: float) -> Entry | None:
        """The entry for `key` if it is readable at `now` (written, visible, not expired)."""
        entry = self._scopes.get(scope, {}).get(key)
        return entry if entry is not None and entry.usable(now) else None

    def put(self, scope: Hashable, key: str, tokens: int, ttl: str, ttl_s: float, now: float,
            visible_after_s: float = 0.0) -> Entry:
        """Write (or rewrite) an entry; an expired one is replaced, a live one keeps the longer lifetime."""
        self._maybe_sweep(now)
        entries = self._scopes.setdefault(scope, {})
        old = entries.get(key)
        if old is not None and now < old.expires_at:
            old.refresh(now)
            if ttl_s > old.ttl_s:
                old.ttl, old.ttl_s, old.expires_at = ttl, ttl_s, max(old.expires_at, now + ttl_s)
            return old
        entry = Entry(tokens, ttl, ttl_s, now, now + visible_after_s, now + ttl_s)
        entries[key] = entry
        return entry

    def clear(self) -> int:
        """Drop every entry (an eviction); returns how many there were."""
        n = sum(len(entries) for entries in self._scopes.values())
        self._scopes.clear()
        return n

    def entries(self, scope: Hashable) -> dict[str, Entry]:
        return self._scopes.get(scope, {})

    def _maybe_sweep(self, now: float) -> None:
        # Expired entries are dead weight in long replays; drop them every few thousand writes.
        self._ops += 1
        if self._ops % 4096:
            return
        for scope, entries in list(self._scopes.items()):
            for key in [k for k, e in entries.items() if e.expires_at <= now]:
                del entries[key]
            if not entries:
                del self._scopes[scope]
