"""The engine against transformers on a tiny random Llama, under every batch, chunk and cache state.

The same judge runs on the real SmolLM2 in test_smollm2.py; the tiny model makes many cases cheap.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prefixgate.local_backend.engine import LLM
from tests.local_backend.support_reference import (
    LogitsRecorder,
    StepTotals,
    assert_matches_reference,
    greedy,
    tolerance_for,
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), block_size=st.sampled_from([1, 4, 16]), budget=st.sampled_from([7, 32, 200]),
       num_prompts=st.integers(1, 5), shared=st.integers(0, 60), warm=st.booleans(),
       dtype=st.sampled_from(["float32", "bfloat16"]))
def test_greedy_matches_transformers_under_any_batch_chunking_and_cache_state(
        tiny, seed: int, block_size: int, budget: int, num_prompts: int, shared: int, warm: bool,
        dtype: str) -> None:
    loaded, ref = tiny
    rng = random.Random(seed)
    prefix = [rng.randrange(256) for _ in range(shared)]
    prompts = [prefix + [rng.randrange(256) for _ in range(rng.randint(1, 40))] for _ in range(num_prompts)]
    llm = LLM("tiny", loaded=loaded, block_size=block_size, max_num_batched_tokens=budget, dtype=dtype)
    if warm:  # another request with the same prefix ran first: its blocks are cached (or being evicted)
        llm.generate({"prompt_token_ids": prefix + [1, 2, 3]}, greedy(3))
    recorder = LogitsRecorder(llm)
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], greedy(rng.randint(1, 12)))
    for out in outs:
        assert_matches_reference(ref, out, recorder.logits(out), tolerance_for(dtype))
    if warm and shared >= block_size + 1:
        assert all(o.num_cached_tokens > 0 for o in outs)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("num_kv_blocks", [9, 12])
def test_preemption_under_a_small_pool_changes_nothing_in_the_output(tiny, num_kv_blocks: int, dtype: str) -> None:
    loaded, ref = tiny
    prompts = [{"prompt_token_ids": [(7 * i + j) % 250 for j in range(10 + i)]} for i in range(6)]
    small = LLM("tiny", loaded=loaded, block_size=4, num_kv_blocks=num_kv_blocks, max_num_batched_tokens=64,
                dtype=dtype)
    recorder = LogitsRecorder(small)
    totals = StepTotals(small)
    outs = small.generate(prompts, greedy(12))
    assert totals.num_preemptions > 0
    big = LLM("tiny", loaded=loaded, block_size=4, max_num_batched_tokens=64, dtype=dtype).generate(prompts,
                                                                                                 greedy(12))
    if dtype == "float32":  # in bfloat16 a different batch may round differently: each is judged on its own
        assert [o.outputs[0].token_ids for o in outs] == [o.outputs[0].token_ids for o in big]
    for out in outs:
        assert out.outputs[0].finish_reason == "length"
        assert_matches_reference(ref, out, recorder.logits(out), tolerance_for(dtype))
    assert small.engine.kv.num_used_blocks == 0


def test_eviction_reclaims_cached_blocks_lru_and_results_stay_right(tiny) -> None:
    loaded, ref = tiny
    llm = LLM("tiny", loaded=loaded, block_size=4, num_kv_blocks=12, max_num_batched_tokens=64,  # 11 usable
              dtype="float32")
    a = {"prompt_token_ids": list(range(1, 33))}  # 8 blocks
    b = {"prompt_token_ids": list(range(100, 132))}
    llm.generate(a, greedy(2))
    assert llm.generate(a, greedy(2))[0].num_cached_tokens == 28  # all but the block holding the last token
    llm.generate(b, greedy(2))  # needs 9 blocks: evicts a's least recently used ones
    recorder = LogitsRecorder(llm)
    again = llm.generate(a, greedy(4))[0]
    assert again.num_cached_tokens < 28
    assert_matches_reference(ref, again, recorder.logits(again))
    assert llm.engine.kv.num_used_blocks == 0
