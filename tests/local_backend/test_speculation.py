"""Prompt-lookup speculation: the proposer, and outputs identical to plain greedy decoding in every batch,
chunk, cache and memory state (float32; bfloat16 passes the reference judge)."""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prefixgate.local_backend import ngram_proposer
from prefixgate.local_backend.draft_policy import DraftPolicy
from prefixgate.local_backend.engine import LLM
from prefixgate.local_backend.ngram_proposer import propose_ngram
from prefixgate.local_backend.sampling_params import SamplingParams
from prefixgate.local_backend.sequence import Sequence
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
    assert propose_ngram(tokens, 3, 2, 2) == [7, 8]  # 2 3: its latest earlier occurrence, 2 tokens at most
    assert propose_ngram([4, 2, 3], 5, 2, 2) == []  # the suffix itself is no occurrence


def test_proposes_nothing_without_a_match_or_room() -> None:
    assert propose_ngram([1, 2, 3, 4], 3, 2, 4) == []
    assert propose_ngram([1, 2, 1, 2], 0, 2, 4) == []
    assert propose_ngram([7], 3, 1, 4) == []


def test_a_match_is_on_token_boundaries_not_inside_a_token() -> None:
    # As 4-byte little-endian ints, 256 0 0 holds the bytes of 1 0 one byte in: not an occurrence.
    assert propose_ngram([256, 0, 0, 5, 1, 0], 2, 2, 2) == []
    assert propose_ngram([1, 0, 5, 256, 0, 0, 1, 0], 1, 2, 2) == [5]


def test_a_draft_is_no_longer_than_the_match_that_proposed_it() -> None:
    quoted = list(range(10, 30))
    assert propose_ngram(quoted + [10, 11], 8, 2, 8) == [12, 13]
    assert propose_ngram(quoted + list(range(10, 16)), 8, 2, 8) == list(range(16, 22))
    assert propose_ngram(quoted + list(range(10, 20)), 8, 2, 8) == list(range(20, 28))


def policy_sequence() -> Sequence:
    return Sequence("r", [1, 2, 3], greedy(100), max_tokens=100)


def test_the_policy_drafts_fully_for_a_quoting_sequence_and_less_in_a_larger_batch() -> None:
    policy = DraftPolicy(8, "cpu", torch.bfloat16)
    quoting, fresh = policy_sequence(), policy_sequence()
    lengths = []
    for _ in range(10):
        lengths.append(policy.draft_length(quoting, 4))
        policy.record(quoting, lengths[-1], lengths[-1])
    assert lengths[-1] == 8
    # A new sequence drafts (the prior is that it may be quoting), less where rows are dearer.
    by_batch = [policy.draft_length(fresh, b) for b in (1, 4, 16, 64)]
    assert by_batch[0] > 0 and by_batch == sorted(by_batch, reverse=True) and by_batch[-1] < by_batch[0]


def test_the_policy_stops_a_sequence_whose_drafts_are_rejected_and_lets_it_try_again() -> None:
    policy = DraftPolicy(8, "cpu", torch.bfloat16)
    seq = policy_sequence()
    drafted_steps = []
    for step in range(200):
        n = policy.draft_length(seq, 4)
        if n:
            drafted_steps.append(step)
            policy.record(seq, n, 0)
    # Pauses double after the second rejection in a row: a few probes, ever further apart, never none.
    assert 5 <= len(drafted_steps) <= 10
    gaps = [b - a for a, b in zip(drafted_steps, drafted_steps[1:], strict=False)]
    assert gaps == sorted(gaps) and gaps[-1] >= 32
    # One accepted token ends the pauses' growth: the sequence may be quoting now.
    policy.record(seq, 1, 1)
    assert seq.draft_history.failures == 0


def test_rejected_drafts_stop_being_proposed_and_change_no_token(tiny, monkeypatch) -> None:
    loaded, _ = tiny
    prompt = repetitive_prompts(random.Random(6), 1, 24)[0]
    want = LLM("tiny", loaded=loaded, dtype="float32").generate({"prompt_token_ids": prompt}, greedy(120))[0]
    never = next(t for t in range(256) if t not in want.outputs[0].token_ids)
    # Drafts the model never picks, wherever a match would propose some.
    real = ngram_proposer.propose_ngram
    monkeypatch.setattr(ngram_proposer, "propose_ngram", lambda tokens, k, *a: [never] * len(real(tokens, k, *a)))
    llm = LLM("tiny", loaded=loaded, dtype="float32", num_speculative_tokens=4)
    totals = StepTotals(llm)
    got = llm.generate({"prompt_token_ids": prompt}, greedy(120))[0]
    assert got.outputs[0].token_ids == want.outputs[0].token_ids
    assert totals.num_accepted_tokens == 0
    # Without the policy every one of the 120 steps would verify up to 4 drafts.
    assert 0 < totals.num_draft_tokens <= 30


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
