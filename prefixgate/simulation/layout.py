"""A prompt as its provider's cache sees it: positions (block boundaries) with prefix hashes and token counts.

Prefix hashes chain each block's native JSON with the cache markers removed: moving a breakpoint does not
change the prompt's bytes, so it must not change the key either.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from prefixgate.compact_json import compact
from prefixgate.ir import CACHE_MARKERS, canonical_native

MARKER_KEYS = CACHE_MARKERS


@dataclass(frozen=True)
class Position:
    key: str        # hash of the whole prefix through this block
    end: int        # prompt tokens through this block
    kind: str       # the IR block kind (runs of tool calls / results count as one lookback position)
    segment: int    # index of the segment (message) the block belongs to


@dataclass(frozen=True)
class Breakpoint:
    position: int   # index into Layout.positions
    ttl: str
    field: str      # where the marker sits in the native body, for error messages


@dataclass
class Layout:
    positions: list[Position] = field(default_factory=list)
    breakpoints: list[Breakpoint] = field(default_factory=list)
    # Tokens after the last position that never cache (e.g. OpenAI's reply priming).
    trailing_tokens: int = 0

    @property
    def total(self) -> int:
        return (self.positions[-1].end if self.positions else 0) + self.trailing_tokens

    def tokens_through(self, index: int) -> int:
        return self.positions[index].end if index >= 0 else 0


class PrefixHasher:
    """Builds positions one block at a time, chaining hashes; `salt` mixes request-level context in."""

    def __init__(self, scope: str) -> None:
        self._h = hashlib.sha256(scope.encode())
        self._tokens = 0
        self.positions: list[Position] = []

    def salt(self, value: Any) -> None:
        self._h.update(b"\x00salt:" + canonical(value).encode())

    def add(self, native: Any, tokens: int, kind: str, segment: int) -> int:
        self._h.update(b"\x00block:" + canonical(canonical_native(native)).encode())
        self._tokens += tokens
        self.positions.append(Position(self._h.copy().hexdigest()[:32], self._tokens, kind, segment))
        return len(self.positions) - 1


def canonical(value: Any) -> str:
    # Key order is kept: providers hash exact bytes, so reordered JSON keys are a different prefix.
    return value if isinstance(value, str) else compact(value)
