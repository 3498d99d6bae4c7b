"""The correctness judge: transformers' own forward pass, float32, as vLLM's tests judge an engine."""

from __future__ import annotations

import weakref
from typing import Any

import torch

from prefixgate.local_backend.engine import LLM
from prefixgate.local_backend.outputs import RequestOutput
from prefixgate.local_backend.sampling_params import SamplingParams

LOGIT_TOLERANCE = 1e-3


# Per reference model, and gone with it: a judged prompt's logits are 0.2 MB a token (SmolLM2's vocabulary in
# float32), and a memo keyed by id(model) would outlive the model and could answer for the next one at its address.
_memo: weakref.WeakKeyDictionary[Any, dict[tuple, Any]] = weakref.WeakKeyDictionary()


def _memoized(fn):  # noqa: ANN001, ANN202 - the same prompt is judged under many engine settings
    def wrapper(model: Any, ids: list[int], *args: Any) -> Any:
        memo = _memo.setdefault(model, {})
        key = (fn.__name__, tuple(ids), args)
        if key not in memo:
            memo[key] = fn(model, ids, *args)
        return memo[key]
    return wrapper


@_memoized
@torch.no_grad()
def reference_greedy(model: Any, prompt: list[int], n: int) -> tuple[list[int], list[list[int]]]:
    """A greedy prefill-plus-decode loop over transformers' KV cache; the top 5 token ids behind each token
    (all the judge reads of a step's logits, and 40 bytes to memoise rather than a vocabulary's 0.2 MB)."""
    out = model(input_ids=torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                use_cache=True)
    tokens, logits = [], [out.logits[0, -1].float()]
    for _ in range(n):
        tokens.append(int(logits[-1].argmax()))
        if len(tokens) == n:
            break
        length = len(prompt) + len(tokens)
        out = model(input_ids=torch.tensor([[tokens[-1]]]), past_key_values=out.past_key_values,
                    attention_mask=torch.ones(1, length, dtype=torch.long), use_cache=True)
        logits.append(out.logits[0, -1].float())
    return tokens, [row.topk(5).indices.tolist() for row in logits]


@_memoized
@torch.no_grad()
def reference_logits(model: Any, ids: list[int], prompt_len: int) -> torch.Tensor:
    """Teacher-forced logits at the positions that predicted ids[prompt_len:] (a copy: not the whole forward's)."""
    logits = model(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long)).logits[0]
    return logits[prompt_len - 1:len(ids) - 1].float().clone()


class StepTotals:
    """Hooked into the engine: sums of what its steps report (preemptions, drafts, accepted drafts)."""

    def __init__(self, llm: LLM) -> None:
        self.num_preemptions = self.num_draft_tokens = self.num_accepted_tokens = 0
        # Weakly: the engine holds this hook, and a hook holding the engine back is a reference cycle that
        # keeps the engine's weights and KV pool (GBs for SmolLM2) alive until a full collection.
        self._engine = weakref.ref(llm.engine)
        llm.engine.step = self._counting_step

    def _counting_step(self) -> list[RequestOutput]:
        engine = self._engine()
        outs = type(engine).step(engine)
        stats = engine.last_stats
        self.num_preemptions += stats.num_preemptions
        self.num_draft_tokens += stats.num_draft_tokens
        self.num_accepted_tokens += stats.num_accepted_tokens
        return outs


class LogitsRecorder:
    """Hooked into the model runner: the raw logits behind every token each request sampled, in order."""

    def __init__(self, llm: LLM) -> None:
        self.by_request: dict[str, list[torch.Tensor]] = {}
        llm.engine.runner.logits_observer = self

    def __call__(self, seqs: list, logits: torch.Tensor) -> None:
        for seq, row in zip(seqs, logits, strict=True):
            self.by_request.setdefault(seq.request_id, []).append(row.clone())

    def logits(self, out: RequestOutput) -> torch.Tensor:
        return torch.stack(self.by_request[out.request_id])


def tolerance_for(dtype: str) -> float | None:
    """float32 must agree with the reference's logits within LOGIT_TOLERANCE; reduced precision is judged by
    its tokens alone, as vLLM's check_logprobs_close judges quantised and bfloat16 models."""
    return LOGIT_TOLERANCE if dtype == "float32" else None


def assert_matches_reference(model: Any, out: RequestOutput, engine_logits: torch.Tensor,
                             tolerance: float | None = LOGIT_TOLERANCE) -> float:
    """Greedy tokens equal the reference's or, at the first difference, each side's token is in the other's
    top 5 (a near-tie; after it the two continue from different text, so nothing more is compared); with a
    `tolerance`, teacher-forced logits also agree within it.

    Returns the largest logit difference seen (0.0 without a tolerance).
    """
    prompt, tokens = out.prompt_token_ids, out.outputs[0].token_ids
    assert len(engine_logits) == len(tokens)
    ref_tokens, ref_step_top5 = reference_greedy(model, prompt, len(tokens))
    for i, (mine, theirs) in enumerate(zip(tokens, ref_tokens, strict=True)):
        if mine != theirs:
            mine_top = engine_logits[i].topk(5).indices.tolist()
            ref_top = ref_step_top5[i]
            assert mine in ref_top and theirs in mine_top, (
                f"token {i}: engine {mine} vs reference {theirs} is no near-tie "
                f"(engine top-5 {mine_top}, reference top-5 {ref_top})")
            break
    if tolerance is None:
        return 0.0
    # Teacher forcing on the engine's own tokens: every position it sampled from.
    full = reference_logits(model, prompt + tokens, len(prompt))
    diff = (full - engine_logits).abs().max().item()
    assert diff < tolerance, f"logits differ from the reference by {diff}"
    return diff


def greedy(n: int) -> SamplingParams:
    return SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)
