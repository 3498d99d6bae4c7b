"""Scheduler policy without a model: token budget, decodes first, chunking, cached prefixes, preemption."""

from __future__ import annotations

from prefixgate.local_backend.kv_cache_manager import KVCacheManager
from prefixgate.local_backend.sampling_params import SamplingParams
from prefixgate.local_backend.scheduler import ScheduledBatch, Scheduler
from prefixgate.local_backend.sequence import Sequence, SequenceStatus


def make(num_blocks: int = 64, block_size: int = 4, budget: int = 16, max_seqs: int = 8,
         cache_aware: bool = False) -> Scheduler:
    return Scheduler(KVCacheManager(num_blocks, block_size), max_num_batched_tokens=budget, max_num_seqs=max_seqs,
                     cache_aware=cache_aware)


def seq(rid: str, tokens: list[int]) -> Sequence:
    return Sequence(rid, tokens, SamplingParams(temperature=0), max_tokens=64)


def run(s: Scheduler) -> ScheduledBatch:
    """One step as the engine does it: schedule, 'compute', and sample a token for finished prefills."""
    batch = s.schedule()
    s.update(batch)
    for q in batch.seqs:
        if q.num_computed_tokens == q.num_tokens:
            q.append_token(7)
    return batch


def planned(batch: ScheduledBatch) -> dict[str, int]:
    return {q.request_id: n for q, n in batch.scheduled.items()}


def test_long_prompt_is_chunked_under_the_budget() -> None:
    s = make(budget=16)
    a = seq("a", list(range(40)))
    s.add(a)
    assert planned(run(s)) == {"a": 16}
    assert planned(run(s)) == {"a": 16}
    assert planned(run(s)) == {"a": 8}
    assert a.num_output_tokens == 1
    assert planned(run(s)) == {"a": 1}


def test_running_decodes_go_first_and_a_new_prompt_takes_only_the_rest() -> None:
    s = make(budget=16)
    for rid in "abc":
        s.add(seq(rid, [1, 2, 3]))
    run(s)  # all three prefilled (9 tokens)
    s.add(seq("long", list(range(100, 150))))
    batch = run(s)
    assert planned(batch) == {"a": 1, "b": 1, "c": 1, "long": 13}
    # The long prompt's next chunk comes after the decodes again, never delaying them by more than a chunk.
    assert planned(run(s)) == {"a": 1, "b": 1, "c": 1, "long": 13}


def test_cached_prefix_counts_as_computed() -> None:
    s = make(budget=64)
    a = seq("a", list(range(20)))
    s.add(a)
    run(s)
    b = seq("b", list(range(20)) + [99])
    s.add(b)
    batch = run(s)
    assert planned(batch)["b"] == 1 and b.num_cached_tokens == 20
    assert s.kv.stats.queries == 41 and s.kv.stats.hits == 20


def test_max_num_seqs_caps_the_running_set() -> None:
    s = make(max_seqs=2, budget=64)
    for rid in "abc":
        s.add(seq(rid, [1, 2]))
    assert set(planned(run(s))) == {"a", "b"}
    assert len(s.waiting) == 1


def test_out_of_blocks_preempts_the_newest_and_it_resumes_later() -> None:
    s = make(num_blocks=5, block_size=4, budget=64)  # 4 usable blocks = 16 tokens
    a, b = seq("a", list(range(7))), seq("b", list(range(50, 57)))
    s.add(a)
    s.add(b)
    run(s)  # each holds 2 blocks: 7 prompt tokens, one sampled
    run(s)  # 8 computed tokens each, tables full
    batch = run(s)  # both need a third block: only "a" (the older) keeps running
    assert batch.preempted == [b] and planned(batch) == {"a": 1}
    assert b.status is SequenceStatus.WAITING and b.block_table == [] and b.num_computed_tokens == 0
    assert s.waiting[0] is b and b.num_preemptions == 1
    while a.num_output_tokens < 9:  # "a" grows to 4 blocks, then finishes
        run(s)
    s.finish(a, "length")
    batch = run(s)
    # "a" grew over all 4 blocks, evicting b's cached ones: b recomputes its prompt and its 2 sampled tokens.
    assert planned(batch) == {"b": 9}
    assert b.num_prompt_tokens == 7 and b.num_output_tokens == 3


def test_a_sequence_alone_that_outgrows_the_pool_is_finished_not_looped() -> None:
    s = make(num_blocks=3, block_size=4, budget=64)  # 8 tokens of KV in all
    a = seq("a", list(range(7)))
    s.add(a)
    for _ in range(3):
        batch = run(s)
    assert batch.dropped == [a] and a.status is SequenceStatus.FINISHED and a.finish_reason == "length"
    assert s.kv.num_used_blocks == 0 and not s.has_unfinished()


def test_no_new_admissions_in_a_step_that_preempted() -> None:
    s = make(num_blocks=5, block_size=4, budget=64)
    s.add(seq("a", list(range(7))))
    s.add(seq("b", list(range(50, 57))))
    run(s)
    run(s)
    s.add(seq("c", [1]))
    batch = run(s)
    assert batch.preempted and "c" not in planned(batch)


def test_cache_aware_ordering_admits_the_longest_cached_prefix_first() -> None:
    for cache_aware, expected in ((False, "cold"), (True, "warm")):
        s = make(budget=20, cache_aware=cache_aware)
        s.add(seq("seed", list(range(16))))
        run(s)
        s.finish(s.running[0], "stop")
        s.add(seq("cold", list(range(100, 120))))
        s.add(seq("warm", list(range(16)) + [5, 6, 7, 8]))
        assert list(planned(run(s)))[0] == expected


def prio(rid: str, tokens: list[int], priority: int) -> Sequence:
    return Sequence(rid, tokens, SamplingParams(temperature=0), max_tokens=64, priority=priority)


def test_a_more_urgent_request_is_admitted_first_whatever_its_arrival() -> None:
    s = make(budget=16, max_seqs=1)
    for q in (prio("low", [1, 2, 3], 1), prio("normal", [4, 5, 6], 0), prio("high", [7, 8, 9], -1)):
        s.add(q)
    assert planned(run(s)) == {"high": 3}


def test_a_more_urgent_request_preempts_a_less_urgent_running_one_for_its_seat() -> None:
    s = make(budget=16, max_seqs=1)
    low = prio("low", [1, 2, 3], 1)
    s.add(low)
    run(s)
    s.add(prio("high", [7, 8, 9], -1))
    batch = run(s)
    assert planned(batch) == {"high": 3} and batch.preempted == [low]
    assert low.status is SequenceStatus.WAITING
    s.add(prio("normal", [4, 5, 6], 0))  # as urgent as nothing running: it waits its turn
    assert planned(run(s)) == {"high": 1}


def test_memory_pressure_preempts_the_least_urgent_not_the_newest() -> None:
    # 5 usable blocks of 4 tokens. low (older) holds 3 after its first decode, high (newer) 2 after its
    # prefill; high's first decode needs a sixth: low goes, though high is the newer.
    s = make(num_blocks=6, block_size=4, budget=32, max_seqs=4)
    low, high = prio("low", list(range(8)), 1), prio("high", list(range(10, 18)), -1)
    s.add(low)
    run(s)
    s.add(high)
    assert run(s).preempted == []
    assert run(s).preempted == [low]


def test_a_more_urgent_request_preempts_for_blocks_too() -> None:
    s = make(num_blocks=5, block_size=4, budget=32, max_seqs=4)  # 4 usable blocks
    low = prio("low", list(range(8)), 1)
    s.add(low)
    run(s)
    s.add(prio("high", list(range(10, 18)), -1))  # needs 2 blocks; low holds 3 after this step's decode
    batch = run(s)
    assert batch.preempted == [low] and "high" in planned(batch)
