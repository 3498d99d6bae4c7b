"""Continuous batching in tokens: each step grants tokens under one budget, decodes first, then prefill chunks.

A sequence only has `num_computed_tokens` and `num_tokens`; a step closes part of the gap. Chunked prefill,
prefix-cache hits and recompute after preemption all follow from that one rule.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from prefixgate.local_backend.kv_cache_manager import KVCacheManager
from prefixgate.local_backend.sequence import Sequence, SequenceStatus

# Beyond this many waiting requests, cache-aware ordering stops looking up every one (as SGLang's LPM).
CACHE_AWARE_SCAN_LIMIT = 128


@dataclass
class ScheduledBatch:
    # Each scheduled sequence with the number of its tokens this step computes, in scheduling order.
    scheduled: dict[Sequence, int] = field(default_factory=dict)
    preempted: list[Sequence] = field(default_factory=list)
    # Admitted for the first time this step (not re-admitted after preemption).
    admitted: list[Sequence] = field(default_factory=list)
    # Sequences that can never fit (the pool is smaller than they have grown): finished as "length".
    dropped: list[Sequence] = field(default_factory=list)

    @property
    def seqs(self) -> list[Sequence]:
        return list(self.scheduled)

    @property
    def num_tokens(self) -> int:
        return sum(self.scheduled.values())

    def __bool__(self) -> bool:
        return bool(self.scheduled)


class Scheduler:
    def __init__(self, kv: KVCacheManager, *, max_num_batched_tokens: int, max_num_seqs: int,
                 cache_aware: bool = False) -> None:
        self.kv = kv
        self.max_num_batched_tokens = max_num_batched_tokens
        self.max_num_seqs = max_num_seqs
        self.cache_aware = cache_aware
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def schedule(self) -> ScheduledBatch:
        batch = ScheduledBatch()
        budget = self._schedule_running(batch, self.max_num_batched_tokens)
        if not batch.preempted:  # after a preemption, admitted work would only be preempted in turn
            self._admit_waiting(batch, budget)
        return batch

    def _schedule_running(self, batch: ScheduledBatch, budget: int) -> int:
        """Grant running sequences their tokens, preempting the newest when the pool runs out; returns the
        budget left."""
        # Running decodes first, so a long prompt delays them by at most one chunk; then unfinished prefills.
        order = sorted(self.running, key=lambda s: s.num_tokens - s.num_computed_tokens > 1)
        for seq in order:
            if budget == 0:
                break
            if seq.status is not SequenceStatus.RUNNING:  # preempted earlier in this loop
                continue
            n = min(seq.num_tokens + len(seq.draft_token_ids) - seq.num_computed_tokens, budget)
            # The drafts that fit the budget (a decode's one real token always comes first).
            del seq.draft_token_ids[max(0, seq.num_computed_tokens + n - seq.num_tokens):]
            while not self.kv.allocate(seq, n):
                victim = self._lowest_running()
                budget += batch.scheduled.pop(victim, 0)
                self._preempt(victim)
                batch.preempted.append(victim)
                if victim is seq:
                    break
            else:
                batch.scheduled[seq] = n
                budget -= n
                continue
            if not self.running:
                # It was alone and still did not fit: it can never grow in this pool.
                batch.preempted.remove(seq)
                self.waiting.remove(seq)
                seq.status, seq.finish_reason = SequenceStatus.FINISHED, "length"
                batch.dropped.append(seq)
        return budget

    def _admit_waiting(self, batch: ScheduledBatch, budget: int) -> None:
        """Admit waiting sequences while the budget, the sequence limit and the pool allow, counting each
        one's cached prefix as computed."""
        while self.waiting and budget > 0:
            seq = self._next_waiting()
            if len(self.running) >= self.max_num_seqs:
                freed = self._preempt_for(seq, batch)
                if freed is None:
                    break
                budget += freed
            cached = self.kv.find_cached_prefix(seq)
            num_cached = len(cached) * self.kv.block_size
            n = min(seq.num_tokens - num_cached, budget)
            if not self.kv.allocate(seq, n, cached):
                freed = self._preempt_for(seq, batch)
                if freed is None:
                    break
                budget += freed
                continue
            self.waiting.remove(seq)
            if seq.num_cached_tokens is None:
                seq.num_cached_tokens = num_cached
                self.kv.record_admission(seq, num_cached)
                batch.admitted.append(seq)
            seq.num_computed_tokens = num_cached
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            batch.scheduled[seq] = n
            budget -= n

    def _next_waiting(self) -> Sequence:
        """The first in line of the most urgent priority present (vLLM's: the lowest value)."""
        first = min(self.waiting, key=lambda s: s.priority)  # min keeps the first of equals: arrival order
        if not self.cache_aware or len(self.waiting) > CACHE_AWARE_SCAN_LIMIT:
            return first
        # Longest cached prefix first; ties keep arrival order (max returns the first maximum).
        return max((s for s in self.waiting if s.priority == first.priority),
                   key=lambda s: len(self.kv.find_cached_prefix(s)))

    def _lowest_running(self) -> Sequence:
        """The preemption victim: the least urgent priority, and of those the newest."""
        return max(reversed(self.running), key=lambda s: s.priority)

    def _preempt_for(self, seq: Sequence, batch: ScheduledBatch) -> int | None:
        """Preempt a running sequence less urgent than `seq` to make room for it; the budget it frees, or
        None when every running sequence is at least as urgent."""
        if not self.running:
            return None
        victim = self._lowest_running()
        if victim.priority <= seq.priority:
            return None
        freed = batch.scheduled.pop(victim, 0)
        self._preempt(victim)
        batch.preempted.append(victim)
        return freed

    def _preempt(self, seq: Sequence) -> None:
        # Recompute, not swap: the freed blocks keep their hashes, so re-admission mostly hits the cache.
        self.running.remove(seq)
        self.kv.free(seq)
        seq.status = SequenceStatus.WAITING
        seq.num_computed_tokens = 0
        seq.draft_token_ids = []
        seq.num_preemptions += 1
        self.waiting.appendleft(seq)

    def update(self, batch: ScheduledBatch) -> None:
        """The step ran: the scheduled tokens' KV is now in the cache."""
        for seq, n in batch.scheduled.items():
            seq.num_computed_tokens += n

    def finish(self, seq: Sequence, reason: str) -> None:
        if seq.status is SequenceStatus.RUNNING:
            self.running.remove(seq)
        elif seq.status is SequenceStatus.WAITING:
            self.waiting.remove(seq)
        self.kv.free(seq)
        seq.status = SequenceStatus.FINISHED
        seq.finish_reason = seq.finish_reason or reason
