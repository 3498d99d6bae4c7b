"""Prompt-lookup speculation: the proposer, and outputs identical to plain greedy decoding in every batch,
chunk, cache and memory state (float32; bfloat16 passes the reference judge)."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prefixgate.local_backend.engine import LLM
from prefixgate.local_backend.ngram_proposer import propose_ngram
from prefixgate.local_backend.sampling_params import SamplingParams
from tests.local_backend.support_reference import (
    LogitsRecorder,
    StepTotals,
    assert_matches_reference,
    greedy,
    tolerance_for,
)


def test_proposes_what_followed_the_latest_earlier_occurrence_of_the_longest_suffix() -> None:
    tokens = [1, 2, 3, 9, 2, 3, 7, 8, 1, 2, 3]
    assert propose_ngram(tokens, 3, 2, 4) == [9, 2, 3]  # the 3-gram 1 2 3 wins over the later 2-gram 2 3
    assert propose_ngram(tokens, 1, 2, 4) == [9]
    assert propose_ngram(tokens, 3, 2, 2) == [7, 8, 1]  # 2 3: its latest earlier occurrence
    assert propose_ngram([4, 2, 3], 5, 2, 2) == []  # the suffix itself is no occurrence


def test_proposes_nothing_without_a_match_or_room() -> None:
    assert propose_ngram([1, 2, 3, 4], 3, 2, 4) == []
    assert propose_ngram([1, 2, 1, 2], 0, 2, 4) == []
    assert propose_ngram([7], 3, 1, 4) == []


def test_a_match_is_on_token_boundaries_not_inside_a_token() -> None:
    # As 4-byte little-endian ints, 256 0 0 holds the bytes of 1 0 one byte in: not an occurrence.
    assert propose_ngram([256, 0, 0, 5, 1, 0], 2, 2, 2) == []
    assert propose_ngram([1, 0, 5, 256, 0, 0, 1, 0], 1, 2, 2) == [5]


def repetitive_prompts(rng: random.Random, n: int, shared: int) -> list[list[int]]:
    """Prompts that repeat phrases, so a small random model's greedy output repeats too and drafts hit."""
    phrases = [[rng.randrange(256) for _ in range(rng.randint(2, 6))] for _ in range(4)]
    prefix = [t for _ in range(shared // 4) for t in rng.choice(phrases)]
    return [prefix + [t for _ in range(rng.randint(2, 8)) for t in rng.choice(phrases)] for _ in range(n)]


def run(llm: LLM, prompts: list[list[int]], n: int) -> tuple[list, int]:
    totals = StepTotals(llm)
    return llm.generate([{"prompt_token_ids": p} for p in prompts], greedy(n)), totals.num_accepted_tokens


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), block_size=st.sampled_from([1, 4, 16]), budget=st.sampled_from([5, 32, 200]),
       num_prompts=st.integers(1, 5), shared=st.integers(0, 40), k=st.integers(1, 6),
       small_pool=st.booleans())
def test_speculation_changes_no_token_under_any_batch_chunking_cache_or_memory_state(
        tiny, seed: int, block_size: int, budget: int, num_prompts: int, shared: int, k: int,
        small_pool: bool) -> None:
    loaded, ref = tiny
    rng = random.Random(seed)
    prompts = repetitive_prompts(rng, num_prompts, shared)
    n = rng.randint(8, 30)
    # A pool for about two sequences when small: preemption with drafts in flight.
    blocks = (max(len(p) for p in prompts) + n) // block_size + 4 if small_pool else None
    options = dict(block_size=block_size, max_num_batched_tokens=budget, num_kv_blocks=blocks, dtype="float32")
    plain, _ = run(LLM("tiny", loaded=loaded, **options), prompts, n)
    spec_llm = LLM("tiny", loaded=loaded, num_speculative_tokens=k, **options)
    recorder = LogitsRecorder(spec_llm)
    spec, _ = run(spec_llm, prompts, n)
    assert [o.outputs[0].token_ids for o in spec] == [o.outputs[0].token_ids for o in plain]
    for out in spec:
        assert_matches_reference(ref, out, recorder.logits(out))
    assert spec_llm.engine.kv.num_used_blocks == 0


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_drafts_are_accepted_and_judged_like_plain_decoding(tiny, dtype: str) -> None:
    loaded, ref = tiny
    prompts = repetitive_prompts(random.Random(3), 4, 24)
    llm = LLM("tiny", loaded=loaded, num_speculative_tokens=4, dtype=dtype)
    recorder = LogitsRecorder(llm)
    outs, accepted = run(llm, prompts, 40)
    assert accepted > 0  # drafts were accepted, so the judged outputs contain tokens emitted from drafts
    for out in outs:
        assert len(out.outputs[0].token_ids) == 40
        assert_matches_reference(ref, out, recorder.logits(out), tolerance_for(dtype))


def test_a_stop_inside_accepted_drafts_ends_the_output_there(tiny) -> None:
    loaded, _ = tiny
    prompt = repetitive_prompts(random.Random(5), 1, 24)
    plain = LLM("tiny", loaded=loaded, dtype="float32").generate(
        {"prompt_token_ids": prompt[0]}, greedy(30))[0].outputs[0].token_ids
    stop = plain[12]  # a token the repeating output reaches mid-way
    params = SamplingParams(temperature=0, max_tokens=30, ignore_eos=True, stop_token_ids=[stop], logprobs=2)
    want = LLM("tiny", loaded=loaded, dtype="float32").generate({"prompt_token_ids": prompt[0]}, params)[0]
    got = LLM("tiny", loaded=loaded, dtype="float32", num_speculative_tokens=5).generate(
        {"prompt_token_ids": prompt[0]}, params)[0]
    assert got.outputs[0].token_ids == want.outputs[0].token_ids and got.outputs[0].token_ids[-1] == stop
    assert got.outputs[0].finish_reason == "stop" and got.outputs[0].stop_reason == stop
    assert len(got.outputs[0].logprobs) == len(got.outputs[0].token_ids)
    assert [set(e) for e in got.outputs[0].logprobs] == [set(e) for e in want.outputs[0].logprobs]


def test_sampled_requests_never_speculate(tiny) -> None:
    loaded, _ = tiny
    prompts = repetitive_prompts(random.Random(4), 3, 24)
    llm = LLM("tiny", loaded=loaded, dtype="float32", num_speculative_tokens=4)
    sp = SamplingParams(temperature=0.8, seed=11, max_tokens=20, ignore_eos=True)
    totals = StepTotals(llm)
    seeded = llm.generate([{"prompt_token_ids": p} for p in prompts], sp)
    assert totals.num_draft_tokens == 0
    alone = LLM("tiny", loaded=loaded, dtype="float32").generate({"prompt_token_ids": prompts[0]}, sp)[0]
    assert seeded[0].outputs[0].token_ids == alone.outputs[0].token_ids
