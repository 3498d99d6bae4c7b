"""What the scheduler asks of KV memory: find a cached prefix, grow a block table, free it."""

from __future__ import annotations

from prefixgate.local_backend.block_pool import Block, BlockPool, PrefixCacheStats, hash_block
from prefixgate.local_backend.sequence import Sequence


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


class KVCacheManager:
    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True) -> None:
        self.pool = BlockPool(num_blocks)
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching

    @property
    def stats(self) -> PrefixCacheStats:
        return self.pool.stats

    def _update_hashes(self, seq: Sequence) -> None:
        bs, hashes = self.block_size, seq.block_hashes
        for i in range(len(hashes), seq.num_tokens // bs):
            hashes.append(hash_block(hashes[i - 1] if i else None, seq.token_ids[i * bs:(i + 1) * bs],
                                     seq.cache_salt))

    def find_cached_prefix(self, seq: Sequence) -> list[Block]:
        """The longest run of the sequence's leading full blocks already in the cache."""
        if not self.enable_prefix_caching:
            return []
        self._update_hashes(seq)
        bs, hits = self.block_size, []
        # Stop one token short of the end: the last token is always recomputed, to get its logits.
        for i in range((seq.num_tokens - 1) // bs):
            block = self.pool.lookup(seq.block_hashes[i], seq.token_ids[i * bs:(i + 1) * bs])
            if block is None:
                break
            hits.append(block)
        return hits

    def allocate(self, seq: Sequence, num_new_tokens: int, cached: list[Block] | None = None) -> bool:
        """Give `seq` blocks for `num_new_tokens` more tokens (after a cached prefix, on admission).

        Returns False, changing nothing, when the pool is short.
        """
        cached = cached or []
        if cached and seq.block_table:
            raise RuntimeError(f"{seq.request_id}: a cached prefix is given on admission only, to a sequence holding no blocks")
        num_computed = seq.num_computed_tokens + len(cached) * self.block_size
        num_new_blocks = cdiv(num_computed + num_new_tokens, self.block_size) - len(seq.block_table) - len(cached)
        # A cached block nobody holds sits in the free list: reviving it costs a free slot too.
        num_revived = sum(1 for b in cached if b.ref_count == 0)
        if max(num_new_blocks, 0) + num_revived > self.pool.num_free:
            return False
        self.pool.touch(cached)
        seq.block_table.extend(b.block_id for b in cached)
        seq.block_table.extend(b.block_id for b in self.pool.allocate(max(num_new_blocks, 0)))
        if self.enable_prefix_caching:  # drafts are not known tokens: their blocks wait until accepted
            self._cache_full_blocks(seq, min(num_computed + num_new_tokens, seq.num_tokens))
        return True

    def _cache_full_blocks(self, seq: Sequence, num_tokens: int) -> None:
        # Registered when scheduled rather than when computed: a request admitted later in the same step
        # may share them, because each layer writes the whole batch's K/V before any sequence attends.
        self._update_hashes(seq)
        bs, hashes = self.block_size, seq.block_hashes
        run_start = None  # the first block of the current run of newly cached ones (one event per run)
        end = num_tokens // bs
        for i in range(seq.num_registered_blocks, end + 1):
            stored = i < end and self.pool.cache(self.pool.blocks[seq.block_table[i]], hashes[i],
                                                 seq.token_ids[i * bs:(i + 1) * bs])
            if stored and run_start is None:
                run_start = i
            elif not stored and run_start is not None:
                self.pool.record_stored(hashes[run_start:i], hashes[run_start - 1] if run_start else None,
                                        seq.token_ids[run_start * bs:i * bs], bs)
                run_start = None
        seq.num_registered_blocks = max(seq.num_registered_blocks, end)

    def free(self, seq: Sequence) -> None:
        blocks = [self.pool.blocks[i] for i in seq.block_table]
        # Blocks registered for a step that never ran (the sequence was preempted while being scheduled)
        # hold no KV yet: they must not stay findable.
        for block in blocks[seq.num_computed_tokens // self.block_size:]:
            if block.ref_count == 1:
                self.pool.uncache(block)
        # Tail first: a sequence's last blocks hash the longest, least shareable prefixes, so they go first.
        self.pool.release(reversed(blocks))
        seq.block_table = []
        seq.num_registered_blocks = 0

    def record_admission(self, seq: Sequence, num_cached_tokens: int) -> None:
        stats = self.pool.stats
        stats.requests += 1
        stats.queries += seq.num_tokens
        stats.hits += num_cached_tokens

    @property
    def num_free_blocks(self) -> int:
        return self.pool.num_free

    @property
    def num_used_blocks(self) -> int:
        return self.pool.num_used

    def reset_prefix_cache(self) -> None:
        self.pool.reset_prefix_cache()
