"""The bundled model end to end: GGUF -> cached safetensors -> our forward, judged against transformers."""

from __future__ import annotations

import pytest
import torch

from prefixgate.local_backend import model_loader
from prefixgate.local_backend.engine import LLM
from prefixgate.local_backend.model_loader import load_model
from tests.local_backend.support_reference import (
    LogitsRecorder,
    StepTotals,
    assert_matches_reference,
    greedy,
    tolerance_for,
)

pytestmark = pytest.mark.slow

SYSTEM = ("You are the support assistant of a hardware shop. Answer briefly and politely. Prices are in euros. "
          "Never promise delivery dates. Refer warranty questions to the service desk. ") * 3
QUESTIONS = ["What is the capital of France?", "Write a haiku about the sea.",
             "How do I return a broken drill?", "Explain gravity in one sentence.", "Do you sell ladders?"]


@pytest.fixture(scope="module")
def reference(smollm2):  # noqa: ANN201
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(smollm2.folder, dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def prompts(smollm2) -> list[dict]:
    tok = smollm2.tokenizer
    msgs = [[{"role": "system", "content": SYSTEM}, {"role": "user", "content": q}] for q in QUESTIONS]
    msgs.append([{"role": "user", "content": "What is the capital of France?"}])  # the template's own system
    return [{"prompt_token_ids": tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True)}
            for m in msgs]


# A quarter of the default 1 GiB KV pool: these prompts fill under a tenth of it, so nothing is evicted that
# the default would keep, and the pool's size changes no logit. What it saves is resident memory: the suite
# runs in one process, and a float32 engine is its weights, their MKL-packed copy and this pool (docs/testing.md).
KV_CACHE_GIB = 0.25


def engine(smollm2, **options) -> LLM:  # noqa: ANN001
    return LLM(loaded=smollm2, kv_cache_gib=KV_CACHE_GIB, **options)


def _ids(smollm2, prompts: list[dict]) -> list[dict]:
    return [{"prompt_token_ids": smollm2.tokenizer.encode(p["prompt_token_ids"], add_special_tokens=False)}
            for p in prompts]


def test_model_is_converted_once_and_reloads_from_the_converted_copy(smollm2, monkeypatch) -> None:
    assert (smollm2.folder / "model.safetensors").is_file() and (smollm2.folder / "tokenizer.json").is_file()
    assert smollm2.hf_config.num_key_value_heads == 3 and smollm2.hf_config.tie_word_embeddings
    converted = (smollm2.folder / "model.safetensors").stat().st_mtime_ns

    def no_second_conversion(*_args, **_kw):  # noqa: ANN202 - the GGUF dequantisation (~25 s) runs once
        raise AssertionError("the GGUF was converted again")

    monkeypatch.setattr(model_loader, "_save_dense", no_second_conversion)
    again = load_model("smollm2-135m")
    assert again.weights.keys() == smollm2.weights.keys()
    assert (smollm2.folder / "model.safetensors").stat().st_mtime_ns == converted


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize(("budget", "one_by_one"), [(512, False), (48, False), (512, True)])
def test_greedy_matches_transformers_cold_then_warm(smollm2, reference, prompts, budget: int,
                                                    one_by_one: bool, dtype: str) -> None:
    """Every prompt, batched or alone, whole or in 48-token chunks, with a cold and then a warm prefix cache:
    float32 within 1e-3 of transformers' float32 logits, bfloat16 by vLLM's token judge."""
    llm = engine(smollm2, max_num_batched_tokens=budget, dtype=dtype)
    recorder = LogitsRecorder(llm)
    worst = 0.0
    for phase in ("cold", "warm"):
        batches = [[p] for p in _ids(smollm2, prompts)] if one_by_one else [_ids(smollm2, prompts)]
        for batch in batches:
            for out in llm.generate(batch, greedy(16)):
                if phase == "warm":
                    assert out.num_cached_tokens > 0
                worst = max(worst, assert_matches_reference(reference, out, recorder.logits(out),
                                                            tolerance_for(dtype)))
    assert worst < 1e-3


def test_bfloat16_with_preemption_passes_the_token_judge(smollm2, reference, prompts) -> None:
    """A pool too small for the batch: sequences are preempted and recomputed, in bfloat16."""
    llm = engine(smollm2, dtype="bfloat16", num_kv_blocks=24, max_num_batched_tokens=64)
    recorder = LogitsRecorder(llm)
    totals = StepTotals(llm)
    for out in llm.generate(_ids(smollm2, prompts), greedy(24)):
        assert_matches_reference(reference, out, recorder.logits(out), None)
    assert totals.num_preemptions > 0


def test_bfloat16_long_generation_passes_the_token_judge(smollm2, reference, prompts) -> None:
    """256 tokens: rounding that drifts over a long decode would show here first."""
    llm = engine(smollm2, dtype="bfloat16")
    recorder = LogitsRecorder(llm)
    chosen = [_ids(smollm2, prompts)[i] for i in (0, 2, 5)]
    for out in llm.generate(chosen, greedy(256)):
        assert len(out.outputs[0].token_ids) == 256
        assert_matches_reference(reference, out, recorder.logits(out), None)


def test_chat_answers_sensibly(smollm2) -> None:
    out = engine(smollm2).chat([{"role": "user", "content": "What is the capital of France?"}],
                                   greedy(12))[0]
    assert "Paris" in out.outputs[0].text


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_speculation_passes_the_judge_and_in_float32_changes_no_token(smollm2, reference, prompts,
                                                                      dtype: str) -> None:
    """Prompt lookup on the real model, with one answer that quotes its prompt so that drafts are accepted."""
    quote = smollm2.tokenizer.apply_chat_template([{"role": "user", "content": f"Repeat exactly: {SYSTEM}"}],
                                                  tokenize=False, add_generation_prompt=True)
    batch = _ids(smollm2, [*prompts, {"prompt_token_ids": quote}])
    # Plain decoding first, its engine gone before the speculating one loads: one engine in memory at a time.
    plain = engine(smollm2, dtype=dtype).generate(batch, greedy(48)) if dtype == "float32" else None
    llm = engine(smollm2, dtype=dtype, num_speculative_tokens=8)
    recorder = LogitsRecorder(llm)
    totals = StepTotals(llm)
    outs = llm.generate(batch, greedy(48))
    assert totals.num_accepted_tokens > 0
    for out in outs:
        assert_matches_reference(reference, out, recorder.logits(out), tolerance_for(dtype))
    if plain is not None:
        assert [o.outputs[0].token_ids for o in outs] == [o.outputs[0].token_ids for o in plain]
