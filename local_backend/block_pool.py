"""The KV block pool: reference counts, an O(1) LRU free list, and the prefix cache's hash -> block map.

Mechanism only; which blocks a sequence gets is the KVCacheManager's business.
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import cbor2


def _sha256_cbor(value: Any) -> bytes:
    return hashlib.sha256(cbor2.dumps(value, canonical=True)).digest()


# vLLM's `sha256_cbor` chain (v1/core/kv_cache_utils.py), so a router fed by our KV events and by vLLM's
# replicas compares like with like: the root's parent is H(PYTHONHASHSEED or "vllm-none-hash").
NONE_HASH = _sha256_cbor(os.environ.get("PYTHONHASHSEED") or "vllm-none-hash")


def hash_block(parent: bytes | None, token_ids: list[int], salt: str | None = None) -> bytes:
    """A block's hash, chained through its parent's, so equal hashes mean equal whole prefixes.

    H((parent digest, tokens, extra keys)) as vLLM 0.33 computes it; a cache salt is block 0's extra key.
    """
    extra = (("cache_salt", salt),) if salt and parent is None else None
    return _sha256_cbor((parent or NONE_HASH, tuple(token_ids), extra))


def published_hash(block_hash: bytes) -> int:
    """The hash as vLLM's events carry it (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1): the digest's last 8 bytes."""
    return int.from_bytes(block_hash[-8:], "big")


class Block:
    __slots__ = ("block_id", "ref_count", "hash", "token_ids")

    def __init__(self, block_id: int) -> None:
        self.block_id = block_id
        self.ref_count = 0
        self.hash: bytes | None = None
        self.token_ids: tuple[int, ...] | None = None

    def __repr__(self) -> str:
        return f"Block({self.block_id}, ref={self.ref_count}, cached={self.hash is not None})"


@dataclass
class PrefixCacheStats:
    requests: int = 0
    queries: int = 0  # prompt tokens looked up
    hits: int = 0  # of which found in the cache


class BlockPool:
    NULL_BLOCK = 0  # never handed out: padding in gathered block tables points at it

    def __init__(self, num_blocks: int) -> None:
        if num_blocks < 2:
            raise ValueError(f"a block pool needs 2 blocks at least (block 0 is padding), not {num_blocks}")
        self.blocks = [Block(i) for i in range(num_blocks)]
        # Free blocks, evicted from the head. Blocks that still carry a hash sit in LRU order behind plain
        # free ones, so a cached prefix survives until the pool genuinely needs its memory.
        self.free: OrderedDict[int, None] = OrderedDict((i, None) for i in range(1, num_blocks))
        self.cached: dict[bytes, int] = {}
        self.stats = PrefixCacheStats()
        # KV cache events in vLLM's schema (kv_events.py publishes them), or None when nobody listens.
        self.events: list[dict[str, Any]] | None = None

    @property
    def num_blocks(self) -> int:
        return len(self.blocks) - 1

    @property
    def num_free(self) -> int:
        return len(self.free)

    @property
    def num_used(self) -> int:
        return self.num_blocks - len(self.free)

    def lookup(self, block_hash: bytes, token_ids: list[int]) -> Block | None:
        block_id = self.cached.get(block_hash)
        if block_id is None:
            return None
        block = self.blocks[block_id]
        # The token ids rule out a hash collision handing one prompt another's KV.
        return block if block.token_ids == tuple(token_ids) else None

    def touch(self, blocks: Iterable[Block]) -> None:
        for block in blocks:
            if block.ref_count == 0:
                del self.free[block.block_id]
            block.ref_count += 1

    def allocate(self, n: int) -> list[Block]:
        if n > len(self.free):
            raise RuntimeError(f"{n} blocks asked of a pool with {len(self.free)} free: callers check num_free first")
        out = []
        for _ in range(n):
            block = self.blocks[self.free.popitem(last=False)[0]]
            self._evict(block)
            block.ref_count = 1
            out.append(block)
        # Ascending ids: blocks come back to the free list tail first (evicted first), so one allocation often
        # pops a descending run; handed out in order, a sequence's blocks are consecutive in the KV tensor,
        # and attention reads them in place instead of gathering a copy every layer (attention.py).
        out.sort(key=lambda b: b.block_id)
        return out

    def release(self, blocks: Iterable[Block]) -> None:
        """Drop one reference from each block; a block nobody holds keeps its hash until reallocated."""
        for block in blocks:
            if block.ref_count <= 0:
                raise RuntimeError(f"block {block.block_id} released more often than it was held")
            block.ref_count -= 1
            if block.ref_count == 0:
                self.free[block.block_id] = None
                if block.hash is None:
                    self.free.move_to_end(block.block_id, last=False)

    def cache(self, block: Block, block_hash: bytes, token_ids: list[int]) -> bool:
        """Make the block findable under `block_hash`; False when it, or an equal block, already is."""
        # If an equal block is already cached (two requests computed the same prefix at once), keep the
        # first; this one stays private to its sequence and returns to the pool uncached.
        if block.hash is not None or block_hash in self.cached:
            return False
        block.hash, block.token_ids = block_hash, tuple(token_ids)
        self.cached[block_hash] = block.block_id
        return True

    def record_stored(self, hashes: list[bytes], parent: bytes | None, token_ids: list[int],
                      block_size: int) -> None:
        """One BlockStored event for a run of consecutive blocks just cached, `parent` the run's parent."""
        if self.events is not None and hashes:
            self.events.append({
                "type": "BlockStored", "block_hashes": [published_hash(h) for h in hashes],
                "parent_block_hash": None if parent is None else published_hash(parent),
                "token_ids": token_ids, "block_size": block_size, "lora_id": None,
                # The engine's one KV pool, on whichever device it runs: vLLM names its pool GPU likewise.
                "medium": "GPU", "lora_name": None})

    def take_events(self) -> list[dict[str, Any]]:
        events, self.events = self.events or [], [] if self.events is not None else None
        return events

    def uncache(self, block: Block) -> None:
        self._evict(block)
        if block.ref_count == 0 and block.block_id in self.free:
            self.free.move_to_end(block.block_id, last=False)

    def reset_prefix_cache(self) -> None:
        events, self.events = self.events, None  # one AllBlocksCleared, not a BlockRemoved per block
        for block_id in list(self.cached.values()):
            self._evict(self.blocks[block_id])
        if events is not None:
            events.append({"type": "AllBlocksCleared"})
        self.events = events
        # No free block carries a hash now, so their order only decides placement: ascending, as when new.
        self.free = OrderedDict((i, None) for i in sorted(self.free))

    def _evict(self, block: Block) -> None:
        if block.hash is not None:
            if self.cached.get(block.hash) == block.block_id:
                del self.cached[block.hash]
                if self.events is not None:
                    self._record_removed(block.hash)
            block.hash = block.token_ids = None

    def _record_removed(self, block_hash: bytes) -> None:
        last = self.events[-1] if self.events else None
        if last is not None and last["type"] == "BlockRemoved":
            last["block_hashes"].append(published_hash(block_hash))
        else:
            self.events.append({"type": "BlockRemoved", "block_hashes": [published_hash(block_hash)],
                                "medium": "GPU"})
