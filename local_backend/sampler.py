"""Pick each sequence's next token from its logits: greedy, temperature, top-k, top-p, per-request seeds."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from prefixgate.local_backend.sequence import Sequence


@dataclass
class SamplerOutput:
    token_ids: list[int]
    # Per sequence, when it asked for logprobs: {token id: (logprob, rank)} for its top-k and the chosen token.
    logprobs: list[dict[int, tuple[float, int]] | None]


class Sampler:
    def __init__(self, eos_token_ids: set[int], seed: int = 0) -> None:
        self.eos_token_ids = eos_token_ids
        self.generator: torch.Generator | None = None
        self.seed = seed

    def __call__(self, logits: torch.Tensor, seqs: list[Sequence]) -> SamplerOutput:
        params = [s.sampling_params for s in seqs]
        want_logprobs = [p.logprobs is not None for p in params]
        # Logprobs are those of the model's own distribution, before temperature and truncation (as vLLM's
        # default "raw" mode).
        raw = torch.log_softmax(logits, dim=-1) if any(want_logprobs) else None
        logits = self._suppress_early_stop(logits, seqs)
        tokens = logits.argmax(dim=-1)
        sampled = [i for i, p in enumerate(params) if not p.greedy]
        if sampled:
            idx = torch.tensor(sampled, device=logits.device)
            tokens[idx] = self._sample(logits[idx], [seqs[i] for i in sampled])
        token_list = tokens.tolist()
        out_logprobs: list[dict[int, tuple[float, int]] | None] = [None] * len(seqs)
        if raw is not None:
            k = max(p.logprobs or 0 for p in params)
            top = raw.topk(k, dim=-1) if k else None
            chosen = raw.gather(1, tokens[:, None])
            ranks = ((raw > chosen).sum(dim=-1) + 1).tolist()
            chosen = chosen[:, 0].tolist()
            top_vals, top_ids = (top.values.tolist(), top.indices.tolist()) if top else ([], [])
            for i, p in enumerate(params):
                if p.logprobs is None:
                    continue
                entry = {t: (v, r + 1) for r, (t, v) in enumerate(zip(top_ids[i][:p.logprobs],
                                                                         top_vals[i][:p.logprobs], strict=True))}
                entry[token_list[i]] = (chosen[i], ranks[i])
                out_logprobs[i] = entry
        return SamplerOutput(token_list, out_logprobs)

    def _suppress_early_stop(self, logits: torch.Tensor, seqs: list[Sequence]) -> torch.Tensor:
        early = [i for i, s in enumerate(seqs) if s.num_output_tokens < s.sampling_params.min_tokens]
        if not early:
            return logits
        logits = logits.clone()
        for i in early:
            p = seqs[i].sampling_params
            stops = list(p.stop_token_ids) + ([] if p.ignore_eos else list(self.eos_token_ids))
            logits[i, stops] = float("-inf")
        return logits

    def _sample(self, logits: torch.Tensor, seqs: list[Sequence]) -> torch.Tensor:
        params = [s.sampling_params for s in seqs]
        dev = logits.device
        temp = torch.tensor([p.temperature for p in params], device=dev, dtype=logits.dtype)
        logits = logits / temp[:, None]
        # Beyond the vocabulary top-k keeps every token (and an int64 overflow would fail the whole batch).
        top_k = torch.tensor([p.top_k if 0 < p.top_k < logits.shape[-1] else logits.shape[-1] for p in params],
                             device=dev)
        top_p = torch.tensor([p.top_p for p in params], device=dev, dtype=logits.dtype)
        if (top_k < logits.shape[-1]).any() or (top_p < 1).any():
            logits = _truncate(logits, top_k, top_p)
        probs = torch.softmax(logits, dim=-1)
        # Exponential race (argmax of p / E with E ~ Exp(1)) samples from p; each seeded request draws its
        # noise from its own generator, so its output does not depend on what it is batched with.
        if self.generator is None:
            self.generator = torch.Generator(device=dev).manual_seed(self.seed)
        noise = torch.empty_like(probs).exponential_(generator=self.generator)
        for i, seq in enumerate(seqs):
            if seq.generator is not None:
                noise[i] = torch.empty(probs.shape[-1]).exponential_(generator=seq.generator).to(dev)
        return (probs / noise).argmax(dim=-1)


def _truncate(logits: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    rank = torch.arange(logits.shape[-1], device=logits.device)[None, :]
    drop = rank >= top_k[:, None]
    probs = torch.softmax(sorted_logits.masked_fill(drop, float("-inf")), dim=-1)
    # Keep the smallest head whose mass reaches top_p: drop a token when the mass before it already does.
    drop |= (probs.cumsum(dim=-1) - probs) >= top_p[:, None]
    drop[:, 0] = False
    return logits.scatter(1, order, sorted_logits.masked_fill(drop, float("-inf")))
