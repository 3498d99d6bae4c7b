"""The offline API's contract: sampling parameters, stops, logprobs, validation, abort, accounting."""

from __future__ import annotations

import pytest
import torch

from prefixgate.errors import RequestError
from prefixgate.local_backend.sampling_params import SamplingParams
from tests.local_backend.support_reference import LogitsRecorder, greedy

PROMPT = {"prompt_token_ids": [10, 20, 30, 40, 50, 60, 70]}


def test_request_output_shape_and_finish_reason(make_llm) -> None:
    llm = make_llm()
    out = llm.generate("hello there", greedy(5))[0]
    assert out.finished and out.prompt == "hello there" and out.num_cached_tokens == 0
    assert out.prompt_token_ids == llm.get_tokenizer().encode("hello there") and len(out.prompt_token_ids) == 11
    (c,) = out.outputs
    assert len(c.token_ids) == 5 and c.finish_reason == "length" and isinstance(c.text, str)
    assert out.metrics.time_to_first_token is not None and out.metrics.time_to_first_token >= 0


def test_sampling_is_reproducible_per_seed_whatever_the_batch(make_llm) -> None:
    llm = make_llm()
    sp = SamplingParams(temperature=1.0, seed=1234, max_tokens=12, ignore_eos=True)
    alone = llm.generate(PROMPT, sp)[0].outputs[0].token_ids
    batched = llm.generate([PROMPT, {"prompt_token_ids": [1, 2, 3]}, PROMPT],
                           [sp, SamplingParams(temperature=1.0, max_tokens=20), sp])
    assert batched[0].outputs[0].token_ids == alone == batched[2].outputs[0].token_ids
    other = llm.generate(PROMPT, SamplingParams(temperature=1.0, seed=99, max_tokens=12, ignore_eos=True))[0]
    assert other.outputs[0].token_ids != alone


def test_top_k_one_is_greedy_and_top_p_tiny_is_greedy(make_llm) -> None:
    llm = make_llm()
    want = llm.generate(PROMPT, greedy(8))[0].outputs[0].token_ids
    for sp in (SamplingParams(temperature=2.0, top_k=1, max_tokens=8, ignore_eos=True, seed=1),
               SamplingParams(temperature=1.0, top_p=1e-6, max_tokens=8, ignore_eos=True, seed=2)):
        assert llm.generate(PROMPT, sp)[0].outputs[0].token_ids == want


def test_top_k_restricts_samples_to_the_k_most_likely(make_llm) -> None:
    llm = make_llm()
    recorder = LogitsRecorder(llm)
    outs = llm.generate([PROMPT] * 6, SamplingParams(temperature=5.0, top_k=3, max_tokens=6, ignore_eos=True))
    for out in outs:
        for token, logits in zip(out.outputs[0].token_ids, recorder.logits(out), strict=True):
            assert token in logits.topk(3).indices.tolist()


def test_logprobs_are_the_models_top_k_plus_the_chosen_token(make_llm) -> None:
    llm = make_llm()
    recorder = LogitsRecorder(llm)
    out = llm.generate(PROMPT, SamplingParams(temperature=1.0, seed=5, logprobs=3, max_tokens=6,
                                              ignore_eos=True))[0]
    c = out.outputs[0]
    assert len(c.logprobs) == len(c.token_ids)
    for token, entry, logits in zip(c.token_ids, c.logprobs, recorder.logits(out), strict=True):
        expected = torch.log_softmax(logits, -1)
        top = expected.topk(3)
        assert set(top.indices.tolist()) <= set(entry) and token in entry and len(entry) in (3, 4)
        for tid, lp in entry.items():
            assert lp.logprob == pytest.approx(expected[tid].item(), abs=1e-5)
            assert lp.rank == int((expected > expected[tid]).sum()) + 1
            assert isinstance(lp.decoded_token, str)


def test_stop_strings_stop_token_ids_and_eos(make_llm) -> None:
    llm = make_llm()
    full = llm.generate(PROMPT, greedy(12))[0].outputs[0]
    text = full.text
    stop = text[3:5]
    assert stop and text.find(stop) == 3
    c = llm.generate(PROMPT, SamplingParams(temperature=0, max_tokens=12, ignore_eos=True, stop=[stop]))[0].outputs[0]
    assert c.finish_reason == "stop" and c.stop_reason == stop and c.text == text[:3]
    c = llm.generate(PROMPT, SamplingParams(temperature=0, max_tokens=12, ignore_eos=True, stop=stop,
                                            include_stop_str_in_output=True))[0].outputs[0]
    assert c.text == text[:5]
    third = full.token_ids[2]
    c = llm.generate(PROMPT, SamplingParams(temperature=0, max_tokens=12, ignore_eos=True,
                                            stop_token_ids=[third]))[0].outputs[0]
    assert c.finish_reason == "stop" and c.stop_reason == third and c.token_ids == full.token_ids[:3]
    # EOS ends generation unless ignore_eos (this random model's greedy path emits it early); min_tokens
    # holds it off.
    eos = llm.engine.eos_token_ids
    first_eos = next(i for i, t in enumerate(full.token_ids) if t in eos)
    c = llm.generate(PROMPT, SamplingParams(temperature=0, max_tokens=12))[0].outputs[0]
    assert c.finish_reason == "stop" and c.token_ids == full.token_ids[:first_eos + 1]
    c = llm.generate(PROMPT, SamplingParams(temperature=0, max_tokens=12, min_tokens=first_eos + 3))[0].outputs[0]
    assert len(c.token_ids) >= first_eos + 3 and not eos & set(c.token_ids[:first_eos + 3])


def test_chat_uses_the_models_template(make_llm) -> None:
    llm = make_llm()
    out = llm.chat([{"role": "user", "content": "hi"}], greedy(2))[0]
    tok = llm.get_tokenizer()
    assert tok.decode(out.prompt_token_ids) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"temperature": -1}, "temperature"), ({"temperature": float("nan")}, "temperature"),
    ({"top_p": 0}, "top_p"), ({"top_p": 1.5}, "top_p"), ({"top_k": -2}, "top_k"),
    ({"max_tokens": 0}, "max_tokens"), ({"max_tokens": -3}, "max_tokens"), ({"logprobs": 50}, "logprobs"),
    ({"stop": [""]}, "stop"), ({"seed": 1.5}, "seed"), ({"seed": 2**64}, "seed"), ({"min_tokens": 5, "max_tokens": 2}, "min_tokens"),
])
def test_invalid_sampling_values_name_their_field(kwargs: dict, field: str) -> None:
    with pytest.raises(RequestError) as e:
        SamplingParams(**kwargs)
    assert e.value.field == field and e.value.status == 400


def test_bad_prompts_are_refused_and_the_engine_keeps_serving(make_llm) -> None:
    llm = make_llm(max_model_len=64)
    for prompt, field in (("", "prompt"), ({"prompt_token_ids": []}, "prompt"), ("x" * 64, "prompt"),
                          ({"prompt_token_ids": [1, 10**6]}, "prompt"), ({"prompt_token_ids": ["a"]}, "prompt")):
        with pytest.raises(RequestError) as e:
            llm.generate(prompt, greedy(1))
        assert e.value.field == field
    with pytest.raises(RequestError) as e:
        llm.generate("x" * 60, greedy(10))
    assert e.value.field == "max_tokens"
    assert llm.generate("x" * 60, SamplingParams(temperature=0, max_tokens=None, ignore_eos=True))[0] \
        .outputs[0].finish_reason == "length"
    assert llm.generate("fine", greedy(2))[0].outputs[0].token_ids


def test_abort_frees_blocks_at_once(make_llm) -> None:
    llm = make_llm()
    engine = llm.engine
    rid = engine.add_request(PROMPT, greedy(50))
    engine.step()
    engine.step()
    assert engine.kv.num_used_blocks > 0
    out = engine.abort_request(rid)
    assert out.finished and out.outputs[0].finish_reason == "abort"
    assert engine.kv.num_used_blocks == 0 and not engine.has_unfinished_requests()


def test_full_waiting_queue_answers_429_with_retry_after(make_llm) -> None:
    engine = make_llm(max_waiting=2).engine
    engine.add_request("a", greedy(1))
    engine.add_request("b", greedy(1))
    with pytest.raises(RequestError) as e:
        engine.add_request("c", greedy(1))
    assert e.value.status == 429 and e.value.retry_after and e.value.kind == "rate_limit"


def test_offline_generate_is_not_limited_by_the_waiting_bound(make_llm) -> None:
    outs = make_llm(max_waiting=2, max_num_seqs=2).generate([f"p{i}" for i in range(7)], greedy(2))
    assert len(outs) == 7 and all(o.finished for o in outs)


def test_blocks_for_requests_sharing_a_prefix_are_prefix_plus_unique(make_llm) -> None:
    llm = make_llm(block_size=4, max_num_batched_tokens=512)
    engine = llm.engine
    prefix = list(range(1, 81))  # 20 blocks
    for i in range(8):
        engine.add_request({"prompt_token_ids": prefix + [100 + i, 101 + i, 102 + i]}, greedy(6))
    peak = 0
    while engine.has_unfinished_requests():
        engine.step()
        peak = max(peak, engine.kv.num_used_blocks)
    # Each request: 83 prompt tokens + 5 computed outputs = 88 tokens = 22 blocks, of which 20 are shared.
    assert peak == 20 + 8 * 2
    assert engine.kv.stats.hits == 7 * 80


def test_cache_salt_keeps_tenants_apart(make_llm) -> None:
    llm = make_llm(block_size=4)
    p = {"prompt_token_ids": list(range(1, 30))}
    llm.generate(p, greedy(1), cache_salt="tenant-a")
    assert llm.generate(p, greedy(1), cache_salt="tenant-a")[0].num_cached_tokens == 28
    assert llm.generate(p, greedy(1), cache_salt="tenant-b")[0].num_cached_tokens == 0
    llm.reset_prefix_cache()
    assert llm.generate(p, greedy(1), cache_salt="tenant-a")[0].num_cached_tokens == 0


def test_cpu_threads_apply_to_engine_steps_only(make_llm) -> None:
    before = torch.get_num_threads()
    llm = make_llm(cpu_threads=1)
    seen: list[int] = []
    real = llm.engine.runner._execute

    def spy(batch):  # noqa: ANN001, ANN202
        seen.append(torch.get_num_threads())
        return real(batch)

    llm.engine.runner._execute = spy
    llm.generate("abc", greedy(3))
    assert seen and set(seen) == {1} and torch.get_num_threads() == before


def test_packed_and_plain_weights_give_the_same_greedy_tokens(make_llm) -> None:
    from prefixgate.local_backend.linear import Linear, packing_available

    if not packing_available(torch.device("cpu"), torch.float32):
        pytest.skip("this torch build has no MKL to pack for")
    prompts = [{"prompt_token_ids": list(range(5, 5 + n))} for n in (3, 40, 90)]
    sp = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    packed, plain = make_llm(pack_cpu_weights=True), make_llm(pack_cpu_weights=False)
    layers = [m for m in plain.engine.runner.model.modules() if isinstance(m, Linear)]
    assert layers and all(m.packed is None for m in layers)
    assert all(m.packed is not None for m in packed.engine.runner.model.modules() if isinstance(m, Linear))
    assert [o.outputs[0].token_ids for o in packed.generate(prompts, sp)] == \
        [o.outputs[0].token_ids for o in plain.generate(prompts, sp)]


def test_a_failed_step_leaves_no_uncomputed_block_in_the_prefix_cache(make_llm) -> None:
    """A step that raises (a bug, CUDA out of memory) wrote no KV for the blocks it registered in the prefix
    cache; once its requests are aborted, as AsyncEngine does in arrival order, those blocks must not be
    found by the next request with that prefix, which would attend whatever the blocks held."""
    prefix = list(range(1, 33))  # 8 blocks of 4
    want = make_llm(block_size=4).generate({"prompt_token_ids": prefix + [99]}, greedy(8))[0].outputs[0].token_ids
    engine = make_llm(block_size=4).engine
    # Admitted in one step: the second finds the first's blocks, registered when scheduled, as cached.
    first = engine.add_request({"prompt_token_ids": prefix + [7]}, greedy(8))
    second = engine.add_request({"prompt_token_ids": prefix + [8, 9]}, greedy(8))
    execute = engine.runner.execute

    def failing(batch):  # noqa: ANN001, ANN202
        raise RuntimeError("the step failed")

    engine.runner.execute = failing
    with pytest.raises(RuntimeError):
        engine.step()
    engine.runner.execute = execute
    for rid in (first, second):
        engine.abort_request(rid)
    assert engine.kv.num_used_blocks == 0
    engine.add_request({"prompt_token_ids": prefix + [99]}, greedy(8), request_id="after")
    done = {}
    while engine.has_unfinished_requests():
        done.update((o.request_id, o) for o in engine.step() if o.finished)
    assert done["after"].outputs[0].token_ids == want


def test_sampling_values_beyond_the_vocabulary_fail_only_their_own_request(make_llm) -> None:
    """top_k past the vocabulary is no truncation; a stop token id past it is a 400 when the request is made.
    Either used to raise inside a step (int64 overflow, an index out of range), failing every request in it."""
    llm = make_llm()
    bystander = "bystander"
    outs = llm.generate(["huge top_k", bystander], [SamplingParams(top_k=10**20, seed=3, max_tokens=4), greedy(4)])
    assert outs[0].outputs[0].token_ids == llm.generate("huge top_k", SamplingParams(seed=3, max_tokens=4))[0] \
        .outputs[0].token_ids
    assert len(outs[1].outputs[0].token_ids) == 4
    for ids in ([10**6], [2**70]):
        with pytest.raises(RequestError) as e:
            llm.engine.add_request("x", SamplingParams(min_tokens=1, stop_token_ids=ids, max_tokens=3))
        assert e.value.field == "stop_token_ids" and e.value.status == 400
    assert not llm.engine.has_unfinished_requests() and llm.engine.kv.num_used_blocks == 0
