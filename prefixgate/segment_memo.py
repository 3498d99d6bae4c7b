"""Parsed segments memoised by their exact JSON, so a request that repeats the last one's messages
costs little more than reading them.

An agent resends its whole conversation on every turn; all but the newest messages are the same as
last time. Parsing a message into a `Segment` (validating it, finding each block's text, kind and
checkpoint) and hashing its blocks (`Block.key`) is the same work every time, so a dialect parser asks
the memo first. The identity is the message's compact JSON (orjson, a C pass over the bytes): equal
bytes are an equal JSON value, so a memoised answer is never stale; any difference, even one byte of
one block, is a different entry. A hit hands out a fresh copy of the memoised segment (the caller may
annotate or edit it), whose blocks already carry their content hashes and token counts and point at
this request's JSON.

Bounded: the entries live in the reuse store (`prefixgate.reuse`, memo "segments"), each charged its
identity's bytes and what its template holds (blocks, texts, hashes, facts), and go least recently used
first with every other memo's past the store's bound.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import orjson

from prefixgate.ir import Block, Segment
from prefixgate.reuse import memo, weigh

# A message shorter than this parses in about what a lookup costs (its JSON written, a copy of the memoised
# segment made): remembering it would only churn the memo with every short message of every conversation.
MIN_BYTES = 256


class SegmentMemo:
    def __init__(self, name: str = "segments") -> None:
        self.memo = memo(name)

    @property
    def hits(self) -> int:
        return self.memo.hits

    def segment(self, kind: str, native: Any, owner: Any, parts: list, build: Callable[..., Segment], *args: Any) -> Segment:
        """`build(*args)`'s segment for the wire JSON `native`, memoised under (`kind`, its bytes).

        `kind` tells apart what parses differently though its JSON is the same (a tools list and a
        system prompt's blocks). `build` must depend on `native` alone (its arguments may name where
        `native` sits, for its error messages), and make one block per item of `parts`, in order; what it
        refuses it refuses on every call, as nothing invalid is memoised. A copy from the memo is pointed
        at this request's own objects (`owner` as the segment's native, `parts` as its blocks'), as a
        fresh parse would be: callers find a block's place in the body by the identity of its native
        (the linter's line numbers)."""
        if not self.memo.on:
            return build(*args)
        try:
            ident = (kind, orjson.dumps(native))
        except TypeError:           # a value orjson cannot write (an integer past 64 bits): no memo
            return build(*args)
        if len(ident[1]) < MIN_BYTES:
            return build(*args)
        hit = self.memo.get(ident)
        if hit is not None:
            return hit.copy_for(owner, parts)
        seg = build(*args)
        if len(seg.blocks) != len(parts):
            return seg              # not one block per part: this segment cannot be re-pointed, so not memoised
        for block in seg.blocks:
            block.key  # noqa: B018 -- hashed once here; every copy handed out carries it
            block.facts()           # one dict for every copy's token counts (tokens.block_tokens)
        # orjson's output keeps the capacity it grew to (often several times its length): keep an exact
        # copy, or the memo would hold that much more than it counts.
        ident = (kind, bytes(memoryview(ident[1])))
        template = _template(seg)
        self.memo.put(ident, template, _weight(ident, template))
        return seg


def segments_bytes(segments: list[Segment]) -> int:
    """What parsed segments hold beside their native JSON and its texts: each segment and its blocks, a fixed
    size each (as `_weight` counts them)."""
    seg_bytes, block_bytes = _sizes()
    return sum(seg_bytes + (block_bytes + 8) * len(seg.blocks) for seg in segments)


def _sizes() -> list[int]:
    if not _SIZES:
        block = Block("text", None, text="")
        block.key  # noqa: B018 -- as a memoised block carries it
        block.facts()["cl100k_base"] = 100_000
        _SIZES.extend((weigh(Segment("user", [], native=None)), weigh(block) - weigh("")))
    return _SIZES


def _weight(ident: tuple[str, bytes], template: Segment) -> int:
    """What an entry holds: its identity's bytes, the segment and its blocks (a fixed size each, measured once
    with `reuse.weigh`) and the blocks' texts. A walk over every entry's objects would cost more than most
    parses it saves."""
    seg_bytes, block_bytes = _sizes()
    return (sys.getsizeof(ident[1]) + seg_bytes + (block_bytes + 8) * len(template.blocks)
            + sum(sys.getsizeof(b.text) for b in template.blocks))


_SIZES: list[int] = []


def _template(seg: Segment) -> Segment:
    """What the memo keeps of a segment: everything but its native JSON, which each hit points at that
    request's own objects (keeping the first request's would hold a second copy of every message)."""
    template = seg.copy()
    template.native = None
    for block in template.blocks:
        block.native = None
    return template
