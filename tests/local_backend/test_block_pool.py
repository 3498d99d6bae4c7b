"""BlockPool and KVCacheManager: refcounts, LRU free list, chained hashes, lazy eviction, salts."""

from __future__ import annotations

from prefixgate.local_backend.block_pool import BlockPool, hash_block
from prefixgate.local_backend.kv_cache_manager import KVCacheManager
from prefixgate.local_backend.sampling_params import SamplingParams
from prefixgate.local_backend.sequence import Sequence


def seq(tokens: list[int], rid: str = "r", salt: str | None = None) -> Sequence:
    return Sequence(rid, tokens, SamplingParams(), cache_salt=salt, max_tokens=16)


def test_hash_is_chained_through_the_prefix() -> None:
    a = hash_block(None, [1, 2, 3, 4])
    b = hash_block(None, [9, 2, 3, 4])
    assert hash_block(a, [5, 6, 7, 8]) != hash_block(b, [5, 6, 7, 8])
    assert hash_block(a, [5, 6, 7, 8]) == hash_block(hash_block(None, [1, 2, 3, 4]), [5, 6, 7, 8])
    assert hash_block(None, [1, 2, 3, 4], "tenant-a") != hash_block(None, [1, 2, 3, 4], "tenant-b")


def test_block_zero_is_never_handed_out_and_allocation_takes_free_list_head() -> None:
    pool = BlockPool(5)
    assert pool.num_blocks == 4 and pool.num_free == 4
    blocks = pool.allocate(4)
    assert sorted(b.block_id for b in blocks) == [1, 2, 3, 4]
    assert pool.num_free == 0 and pool.num_used == 4


def test_released_cached_blocks_survive_until_reallocated_lru_first() -> None:
    pool = BlockPool(4)
    a, b, c = pool.allocate(3)
    for i, blk in enumerate((a, b, c)):
        pool.cache(blk, bytes([i]) * 16, [i] * 4)
    pool.release([c, b, a])  # free order: c (oldest), b, a
    assert pool.num_free == 3
    assert pool.lookup(bytes([2]) * 16, [2] * 4) is c  # still findable after release
    (first,) = pool.allocate(1)
    assert first is c and c.hash is None  # evicted lazily, at reallocation
    assert pool.lookup(bytes([2]) * 16, [2] * 4) is None
    assert pool.lookup(bytes([1]) * 16, [1] * 4) is b


def test_uncached_free_blocks_are_reused_before_cached_ones() -> None:
    pool = BlockPool(4)
    a, b, c = pool.allocate(3)
    pool.cache(a, b"A" * 16, [1])
    pool.release([a])
    pool.release([b, c])  # plain blocks go to the head of the free list
    got = {blk.block_id for blk in pool.allocate(2)}
    assert got == {b.block_id, c.block_id}
    assert pool.lookup(b"A" * 16, [1]) is a


def test_blocks_are_handed_out_in_ascending_order_so_a_sequence_reads_them_in_place() -> None:
    pool = BlockPool(9)
    run = pool.allocate(4)
    for i, blk in enumerate(run):
        pool.cache(blk, bytes([i]) * 16, [i] * 4)
    pool.release(reversed(run))  # tail first, as a finished sequence frees: a descending run in the free list
    pool.allocate(4)  # the plain blocks 5-8 go first
    assert [b.block_id for b in pool.allocate(4)] == [1, 2, 3, 4]  # the cached run, evicted, in order
    pool.release(pool.blocks[1:])
    pool.reset_prefix_cache()
    assert list(pool.free) == list(range(1, 9))  # as good as new


def test_lookup_checks_token_ids_so_a_hash_collision_cannot_return_wrong_kv() -> None:
    pool = BlockPool(3)
    (a,) = pool.allocate(1)
    pool.cache(a, b"H" * 16, [1, 2, 3])
    assert pool.lookup(b"H" * 16, [1, 2, 3]) is a
    assert pool.lookup(b"H" * 16, [7, 8, 9]) is None


def test_touch_revives_a_free_cached_block_and_refcounts_share_it() -> None:
    pool = BlockPool(3)
    (a,) = pool.allocate(1)
    pool.cache(a, b"H" * 16, [1])
    pool.release([a])
    assert pool.num_free == 2
    pool.touch([a])
    pool.touch([a])
    assert a.ref_count == 2 and pool.num_free == 1
    pool.release([a])
    assert pool.num_free == 1
    pool.release([a])
    assert pool.num_free == 2


def test_duplicate_block_is_kept_private_and_not_registered() -> None:
    pool = BlockPool(3)
    a, b = pool.allocate(2)
    pool.cache(a, b"H" * 16, [1])
    pool.cache(b, b"H" * 16, [1])
    assert b.hash is None and pool.cached[b"H" * 16] == a.block_id


def test_manager_finds_prefix_but_always_leaves_one_token_to_compute() -> None:
    kv = KVCacheManager(num_blocks=16, block_size=4)
    s1 = seq(list(range(12)), "a")
    assert kv.allocate(s1, 12)
    s1.num_computed_tokens = 12
    s2 = seq(list(range(12)), "b")  # the same 3 full blocks
    hits = kv.find_cached_prefix(s2)
    assert len(hits) == 2  # the third block holds the last token, which must be recomputed for logits
    s3 = seq(list(range(13)), "c")
    assert len(kv.find_cached_prefix(s3)) == 3
    s4 = seq([0, 1, 2, 99] + list(range(4, 12)), "d")
    assert len(kv.find_cached_prefix(s4)) == 0  # the chain breaks at the first differing block


def test_salt_keeps_tenants_apart() -> None:
    kv = KVCacheManager(num_blocks=16, block_size=4)
    a = seq(list(range(9)), "a", salt="tenant-a")
    assert kv.allocate(a, 9)
    assert len(kv.find_cached_prefix(seq(list(range(9)), "b", salt="tenant-a"))) == 2
    assert kv.find_cached_prefix(seq(list(range(9)), "c", salt="tenant-b")) == []
    assert kv.find_cached_prefix(seq(list(range(9)), "d")) == []


def test_allocate_fails_without_side_effects_when_short() -> None:
    kv = KVCacheManager(num_blocks=4, block_size=4)  # 3 usable blocks
    s = seq(list(range(20)))
    assert not kv.allocate(s, 20)
    assert s.block_table == [] and kv.num_free_blocks == 3
    assert kv.allocate(s, 12)
    assert len(s.block_table) == 3 and kv.num_free_blocks == 0


def test_free_returns_blocks_tail_first_and_uncaches_blocks_never_computed() -> None:
    kv = KVCacheManager(num_blocks=8, block_size=4)
    s = seq(list(range(12)))
    assert kv.allocate(s, 12)  # blocks registered at schedule time
    table = list(s.block_table)
    s.num_computed_tokens = 4  # ...but say only the first block ran before the sequence was preempted
    kv.free(s)
    assert kv.pool.blocks[table[0]].hash is not None
    assert all(kv.pool.blocks[i].hash is None for i in table[1:])
    assert list(kv.pool.free)[-1] == table[0]  # the computed, cached block is evicted last
    assert len(kv.find_cached_prefix(seq(list(range(12)), "x"))) == 1


def test_shared_prefix_costs_its_blocks_once() -> None:
    kv = KVCacheManager(num_blocks=64, block_size=4)
    prefix = list(range(100, 132))  # 8 blocks
    first = seq(prefix + [1, 2, 3], "s0")
    assert kv.allocate(first, first.num_tokens)
    for i in range(1, 6):
        s = seq(prefix + [i * 10, i * 10 + 1, i * 10 + 2], f"s{i}")
        hits = kv.find_cached_prefix(s)
        assert len(hits) == 8
        assert kv.allocate(s, s.num_tokens - 32, hits)
    assert kv.num_used_blocks == 8 + 6  # the prefix once, one private tail block each
    assert kv.stats.requests == 0  # admission stats are the scheduler's to record
