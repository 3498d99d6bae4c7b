"""The reuse layer (`prefixgate.reuse`): one store, bounded by what its values hold, whose figures reach
/metrics; shared parsed values are frozen; carried planner values are typed records."""

from __future__ import annotations

import json
import tracemalloc

import pytest

from prefixgate import ir, reuse
from prefixgate.cache_planner import Target, plan
from prefixgate.cache_planner.carried import per_block
from prefixgate.dialects import anthropic, resent
from prefixgate.dialects.resent import MIN_BYTES
from prefixgate.gateway.metrics import Metrics
from prefixgate.reuse import Store, weigh
from prefixgate.reuse.memo import ENTRY_BYTES


def _body(turns: int, first: str = "Review the module.") -> bytes:
    """An Anthropic body past the resent-body threshold: a long first message, then `turns` short ones."""
    messages = [{"role": "user", "content": first + " " + "x" * MIN_BYTES}]
    for i in range(turns):
        messages.append({"role": ("assistant", "user")[i % 2], "content": f"turn {i}"})
    return json.dumps({"model": "claude-sonnet-5-5", "max_tokens": 64, "messages": messages}).encode()


@pytest.fixture
def fresh_store():
    """The process's store emptied, with its bound restored afterwards."""
    saved = reuse.STORE.max_bytes
    reuse.STORE.clear()
    reuse.keep(24 << 20)
    yield reuse.STORE
    reuse.STORE.clear()
    reuse.keep(saved)


def _sample(metrics: Metrics, name: str, memo: str) -> float:
    value = metrics.registry.get_sample_value(name, {"memo": memo})
    return value or 0.0


def test_one_lru_queue_by_bytes_across_memos_with_counts():
    store = Store(max_bytes=3 * (100 + ENTRY_BYTES))       # room for three entries of 100 bytes
    a, b = store.memo("a"), store.memo("b")
    a.put(1, "one", 100)
    b.put(2, "two", 100)
    a.put(3, "three", 100)
    assert a.get(1) == "one"                                # 1 is now the most recently used
    b.put(4, "four", 100)                                   # evicts 2, the least recently used of either memo
    assert b.get(2) is None and a.get(1) == "one" and a.get(3) == "three" and b.get(4) == "four"
    assert (a.hits, a.misses, a.evictions, a.entries) == (3, 0, 0, 2)
    assert (b.hits, b.misses, b.evictions, b.entries) == (1, 1, 1, 1)
    assert store.bytes == 3 * (100 + ENTRY_BYTES) == a.bytes + b.bytes
    a.grow(1, 100)                                          # its value came to hold more: the oldest goes
    assert a.get(3) is None and a.evictions == 1 and store.bytes <= store.max_bytes
    store.resize(0)
    assert store.bytes == 0 and a.entries == b.entries == 0 and not a.on
    a.put(5, "five", 1)
    assert a.get(5) is None


def test_a_resent_body_is_a_hit_in_metrics_and_distinct_ones_are_evicted_past_the_bound(fresh_store):
    metrics = Metrics()
    anthropic.parse_request(_body(4))
    anthropic.parse_request(_body(5))                       # resends the first: one hit
    assert _sample(metrics, "prefixgate_memo_misses_total", "resent_bodies") == 1
    assert _sample(metrics, "prefixgate_memo_hits_total", "resent_bodies") == 1
    assert _sample(metrics, "prefixgate_memo_entries", "resent_bodies") == 1      # the resent one replaced it
    one = resent.MEMO.charged(next(iter(k for (m, k) in fresh_store._entries if m is resent.MEMO)))
    assert one > len(_body(5))                              # charged its parsed values too, not its bytes alone
    reuse.keep(3 * one)                                     # room for about three such bodies
    for session in range(10):                               # ten sessions, none resending another
        anthropic.parse_request(_body(5, first=f"Session {session}."))
    assert _sample(metrics, "prefixgate_memo_evictions_total", "resent_bodies") >= 10 - 3
    assert fresh_store.bytes <= 3 * one
    assert metrics.registry.get_sample_value("prefixgate_memo_bound_bytes") == 3 * one


def test_the_store_s_accounted_bytes_stay_under_the_bound_over_planned_sessions(fresh_store):
    reuse.keep(400_000)
    state = None
    for session in range(12):
        for turns in (3, 4, 5):
            conv = anthropic.parse_request(_body(turns, first=f"Session {session}: " + "context " * 200))
            plan(conv, Target("anthropic", "claude-sonnet-4-6"), state)
            assert fresh_store.bytes <= 400_000
    assert sum(m.evictions for m in fresh_store.memos.values()) > 0


def test_weigh_counts_parsed_objects_close_to_what_the_allocator_holds():
    raw = json.dumps({"messages": [{"role": "user", "content": f"message {i}"} for i in range(5000)]})
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    data = json.loads(raw)
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert 0.9 * held <= weigh(data) <= 1.3 * held
    assert weigh(data) > 5 * len(raw)       # why counting body bytes alone let the memo hold 20x its bound


def test_writing_to_a_shared_parsed_segment_raises(fresh_store):
    anthropic.parse_request(_body(4))
    conv = anthropic.parse_request(_body(5))                 # shares the first body's parsed messages
    assert conv.source.reused == 5
    shared = conv.segments[0]
    with pytest.raises(ir.SharedValueError):
        shared.blocks[0].tokens = 1
    with pytest.raises(ir.SharedValueError):
        shared.stability = "static"
    draft = conv.draft()                                     # the planner's way: a draft, then `own`
    draft.segments[0].own(draft.segments[0].blocks[0]).tokens = 1
    assert shared.blocks[0].tokens is None


def test_a_parsed_value_changed_in_place_is_caught_before_another_request_shares_it(fresh_store):
    first = anthropic.parse_request(_body(4))
    first.source.data["messages"][1]["content"] = "edited in place"
    with pytest.raises(ir.SharedValueError):
        anthropic.parse_request(_body(5))


def test_count_tokens_on_a_resent_body_leaves_the_shared_blocks_alone(fresh_store):
    from prefixgate.tokens import annotate_tokens

    anthropic.parse_request(_body(4))
    conv = anthropic.parse_request(_body(5), count_tokens=True)
    shared = conv.segments[1]
    total = annotate_tokens(conv, "cl100k_base")
    assert total > 0 and shared.blocks[0].tokens is None and conv.segments[1].blocks[0].tokens is not None


def test_carried_answers_are_typed_and_a_step_with_other_inputs_fails_loudly(fresh_store):
    anthropic.parse_request(_body(4))
    conv = anthropic.parse_request(_body(5))
    with pytest.raises(AttributeError):
        conv.carry.leave("markable:anthropic:False", [])      # no slot of that name
    with pytest.raises(TypeError):
        per_block(conv, ir.Step.MARKABLE, ir.CountedIn("cl100k_base"), [], lambda values, start: None)
