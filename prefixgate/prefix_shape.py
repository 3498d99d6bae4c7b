"""A request's prefix shape: one short entry per segment, kept in the ledger (gateway and SDK records
alike) so the dashboard can name the first segment that differs between consecutive requests of a
route, and what in it is volatile.

An entry is `role:hash:set_hash:tokens:kinds`. `hash` covers the segment's blocks in order, `set_hash`
the same blocks sorted (equal set hashes with unequal hashes mean the blocks were reordered: tools
serialised in another order), `tokens` is the segment's size, and `kinds` the volatile-span detectors
that fire in a leading (tools, system) segment, comma-separated. Only the first MAX_SEGMENTS segments
are kept: a prefix broken later than that is rare and the record stays small.

The volatile-span detectors belong to the cache planner, a component core must not import: callers
pass them in (`prefix_shape(conv, provider, volatile_spans)`).
"""

from __future__ import annotations

import hashlib
import sys
from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import accumulate
from typing import Protocol

from prefixgate import tokens
from prefixgate.ir import Conversation, Segment, ShapeRecord, equal_run
from prefixgate.reuse import memo as reuse_memo
from prefixgate.reuse import weigh


class Span(Protocol):
    kind: str


SpanFinder = Callable[[str], Iterable[Span]]

MAX_SEGMENTS = 64
LEADING_ROLES = ("tools", "schema", "system", "developer")
# Entries by segment content: a conversation re-sends its earlier turns and its system prompt with every
# request, so most segments were shaped before.
_ENTRIES = reuse_memo("prefix_shapes")
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class SegmentShape:
    index: int
    role: str
    hash: str
    set_hash: str
    tokens: int
    kinds: tuple[str, ...]

    @property
    def leading(self) -> bool:
        """Part of the request-level prefix (tools, schemas, system prompt) rather than a turn."""
        return self.role in LEADING_ROLES


def _digest(parts: list[str]) -> str:
    return hashlib.blake2b("|".join(parts).encode(), digest_size=6).hexdigest()


def prefix_shape(conv: Conversation, provider: str, volatile_spans: SpanFinder) -> list[str]:
    """The ledger entries for `conv` as sent upstream (see the module docstring); `volatile_spans`
    finds the volatile spans of a text (the planner's detectors)."""
    # Sizes are for display: a local model's own tokenizer may not be registered, so it counts as cl100k.
    encoding = "cl100k_base" if provider == "local" else tokens.encoding_for(provider, conv.model)
    segments = conv.segments[:MAX_SEGMENTS]
    # An agent's next request starts with the segments of the one it resends (`ir.Carry`): the leading
    # segments with the same roles and block contents have the same entries.
    roles, sizes = [seg.role for seg in segments], [len(seg.blocks) for seg in segments]
    keys = conv.block_keys([b for seg in segments for b in seg.blocks])
    carried = conv.carry.earlier.prefix_shape if conv.carry is not None else None
    same = 0
    if carried is not None and carried.encoding == encoding:
        whole = bisect_right(list(accumulate(sizes)), equal_run(carried.keys, keys))
        same = min(whole, equal_run(carried.roles, roles), equal_run(carried.sizes, sizes))
        out = carried.entries[:same]
    else:
        out = []
    leading = all(role in LEADING_ROLES for role in roles[:same])
    out.extend(_entries(segments[same:], encoding, volatile_spans, leading))
    if conv.carry is not None:
        held = 8 * (len(roles) + len(sizes) + len(out)) + sum(map(sys.getsizeof, out[same:]))
        conv.carry.leave("prefix_shape", ShapeRecord(encoding, roles, sizes, keys, out), held)
    return list(out)


def _entries(segments: list[Segment], encoding: str, volatile_spans: SpanFinder, leading: bool) -> list[str]:
    out = []
    for seg in segments:
        leading = leading and seg.role in LEADING_ROLES
        keys = [b.key for b in seg.blocks]
        # A tuple, not a joined string: block keys keep their hashes, so the lookup hashes nothing long.
        memo = (encoding, seg.role, leading, *keys)
        entry = _ENTRIES.get(memo)
        if entry is None:
            entry = _entry(seg.role, keys, seg, encoding, leading, volatile_spans)
            _ENTRIES.put(memo, entry, weigh((memo, entry)))
        out.append(entry)
    return out


def _entry(role: str, keys: list[str], seg: Segment, encoding: str, leading: bool, volatile_spans: SpanFinder) -> str:
    if leading:
        # The leading prefix is what a miss loses (the dashboard's misses view prices it): count it properly.
        size = sum(tokens.block_tokens(b, encoding) for b in seg.blocks)
        kinds = sorted({s.kind for b in seg.blocks if b.text for s in volatile_spans(b.text)})
    else:
        # A turn's size is only displayed: a character estimate is enough and costs nothing.
        size, kinds = sum(len(b.text) for b in seg.blocks) // CHARS_PER_TOKEN, []
    ordered = _digest(keys)
    unordered = ordered if len(keys) < 2 else _digest(sorted(keys))
    return f"{role}:{ordered}:{unordered}:{size}:{','.join(kinds)}"


def parse_shape(entries: list[str]) -> list[SegmentShape]:
    """Entries back into shapes; malformed entries (a hand-edited ledger) are skipped."""
    out = []
    for i, entry in enumerate(entries):
        parts = entry.split(":")
        if len(parts) != 5 or not parts[3].isdigit():
            continue
        role, h, set_h, size, kinds = parts
        out.append(SegmentShape(i, role, h, set_h, int(size), tuple(k for k in kinds.split(",") if k)))
    return out


def first_difference(before: list[SegmentShape], after: list[SegmentShape]) -> SegmentShape | None:
    """The first segment of `after` that differs from `before` at the same position (a segment that
    `before` lacks counts only when it is leading: a conversation that grew by a turn is not a change)."""
    for i, seg in enumerate(after):
        if i >= len(before):
            return seg if seg.leading else None
        if seg.hash != before[i].hash or seg.role != before[i].role:
            return seg
    return None
