"""LLMEngine (add requests, step) and LLM, the offline API in vLLM's shape."""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from typing import Any

from prefixgate.errors import RateLimited, RequestError
from prefixgate.local_backend.config import EngineConfig
from prefixgate.local_backend.detokenizer import Detokenizer
from prefixgate.local_backend.draft_policy import DraftPolicy
from prefixgate.local_backend.kv_cache_manager import KVCacheManager
from prefixgate.local_backend.kv_events import KVEventPublisher
from prefixgate.local_backend.model_loader import LoadedModel, load_model
from prefixgate.local_backend.model_runner import ModelRunner
from prefixgate.local_backend.ngram_proposer import NgramProposer
from prefixgate.local_backend.outputs import CompletionOutput, Logprob, RequestMetrics, RequestOutput
from prefixgate.local_backend.sampling_params import SamplingParams
from prefixgate.local_backend.scheduler import ScheduledBatch, Scheduler
from prefixgate.local_backend.sequence import Sequence

Prompt = str | list[int] | dict[str, Any]


def queue_full() -> RequestError:
    """The 429 for a request finding the waiting queue full: a rate limit, retried after a second. Its OpenAI type is
    `requests` (OpenAI's type for a limit on how many requests it takes; the queue holds `max_waiting` of them), not
    `server_error`'s 503: the engine is not failing, and a caller waiting a second gets in."""
    return RequestError("the engine's waiting queue is full; retry shortly", status=429, kind="rate_limit",
                        retry_after=1.0, limited=RateLimited("requests"))


@dataclass
class IterationStats:
    """What one step did, for metrics."""
    num_prompt_tokens: int = 0  # prompts admitted for the first time
    num_generation_tokens: int = 0
    num_preemptions: int = 0
    num_draft_tokens: int = 0  # speculated tokens verified this step
    num_accepted_tokens: int = 0  # of those, the ones the model agreed with
    time_to_first_token: list[float] = field(default_factory=list)
    inter_token_latency: list[float] = field(default_factory=list)
    finished_reasons: list[str] = field(default_factory=list)


class LLMEngine:
    def __init__(self, config: EngineConfig, loaded: LoadedModel | None = None) -> None:
        self.config = config
        loaded = loaded or load_model(config.model, config.torch_dtype)
        self.tokenizer = loaded.tokenizer
        self.hf_config = loaded.hf_config
        self.eos_token_ids = _eos_ids(loaded)
        self.runner = ModelRunner(config, loaded.hf_config, loaded.weights, self.eos_token_ids)
        self.max_model_len = self.runner.max_model_len
        self.kv = KVCacheManager(self.runner.num_blocks, config.block_size, config.enable_prefix_caching)
        self.scheduler = Scheduler(self.kv, max_num_batched_tokens=config.max_num_batched_tokens,
                                   max_num_seqs=config.max_num_seqs, cache_aware=config.cache_aware_scheduling)
        self.vocab_size = loaded.hf_config.vocab_size
        self.draft_policy = DraftPolicy(config.num_speculative_tokens, self.runner.device.type, self.runner.dtype)
        self.proposer = (NgramProposer(self.draft_policy, config.prompt_lookup_min, config.prompt_lookup_max,
                                       self.max_model_len)
                         if config.num_speculative_tokens else None)
        self.requests: dict[str, Sequence] = {}
        self._detokenizers: dict[str, Detokenizer] = {}
        self._ids = itertools.count()
        self.last_stats = IterationStats()
        events = config.kv_events_config()
        self.kv_events = KVEventPublisher(events) if events is not None else None
        if self.kv_events is not None:
            self.kv.pool.events = []

    # -- requests ---------------------------------------------------------------------------------------

    def make_sequence(self, prompt: Prompt, params: SamplingParams, *, request_id: str | None = None,
                      cache_salt: str | None = None, priority: int = 0) -> Sequence:
        """Tokenize and validate a request without touching engine state (safe from any thread)."""
        text, ids = self._tokenize(prompt)
        if not ids:
            raise RequestError("prompt must not be empty", field="prompt")
        if any(not 0 <= t < self.vocab_size for t in ids):
            raise RequestError(f"prompt token ids must be in [0, {self.vocab_size})", field="prompt")
        # Checked here, not in the step: the sampler indexes logits by them, and a step that raises fails every
        # request in flight.
        if any(t >= self.vocab_size for t in params.stop_token_ids):
            raise RequestError(f"stop_token_ids must be in [0, {self.vocab_size})", field="stop_token_ids")
        room = self.max_model_len - len(ids)
        if room < 1:
            raise RequestError(f"prompt has {len(ids)} tokens; this model's maximum context length is "
                               f"{self.max_model_len} tokens, including the output", field="prompt",
                               kind="too_large")
        if params.max_tokens is not None and params.max_tokens > room:
            raise RequestError(f"max_tokens={params.max_tokens} plus the prompt's {len(ids)} tokens exceeds "
                               f"the maximum context length of {self.max_model_len}", field="max_tokens")
        request_id = request_id or f"req-{next(self._ids)}"
        return Sequence(request_id, ids, params, prompt=text, cache_salt=cache_salt,
                        max_tokens=params.max_tokens or room, priority=priority)

    def add_sequence(self, seq: Sequence) -> None:
        if seq.request_id in self.requests:
            raise RequestError(f"request id {seq.request_id!r} is already in use", field="request_id")
        if len(self.scheduler.waiting) >= self.config.max_waiting:
            raise queue_full()
        self.requests[seq.request_id] = seq
        self._detokenizers[seq.request_id] = Detokenizer(self.tokenizer, seq.prompt_token_ids,
                                                         seq.sampling_params)
        self.scheduler.add(seq)

    def add_request(self, prompt: Prompt, params: SamplingParams | None = None, *,
                    request_id: str | None = None, cache_salt: str | None = None, priority: int = 0) -> str:
        seq = self.make_sequence(prompt, params or SamplingParams(), request_id=request_id, cache_salt=cache_salt,
                                 priority=priority)
        self.add_sequence(seq)
        return seq.request_id

    def abort_request(self, request_id: str) -> RequestOutput | None:
        """Stop a request and free its KV blocks now."""
        seq = self.requests.get(request_id)
        if seq is None:
            return None
        self.scheduler.finish(seq, "abort")
        self._publish_kv_events()
        return self._finalize(seq)

    def has_unfinished_requests(self) -> bool:
        return self.scheduler.has_unfinished()

    def reset_prefix_cache(self) -> None:
        self.kv.reset_prefix_cache()
        self._publish_kv_events()

    def close(self) -> None:
        """Stop the KV event publisher, if any (the model needs no closing)."""
        if self.kv_events is not None:
            self.kv_events.close()
            self.kv_events = None

    def _publish_kv_events(self) -> None:
        if self.kv_events is not None:
            events = self.kv.pool.take_events()
            if events:
                self.kv_events.publish(events)

    # -- stepping ---------------------------------------------------------------------------------------

    def step(self) -> list[RequestOutput]:
        """Schedule, run the model once, sample; returns the requests that advanced (finished or not)."""
        try:
            return self._step()
        finally:
            self._publish_kv_events()  # one batch per step, as vLLM's scheduler publishes

    def _step(self) -> list[RequestOutput]:
        stats = self.last_stats = IterationStats()
        if self.proposer is not None:
            self.proposer.propose(self.scheduler.running)
        batch = self.scheduler.schedule()
        stats.num_preemptions = len(batch.preempted)
        outputs = [self._finalize(seq) for seq in batch.dropped]
        if not batch:
            return outputs
        stats.num_prompt_tokens = sum(seq.num_prompt_tokens for seq in batch.admitted)
        try:
            emitted = self.runner.execute(batch)
        except BaseException:
            self._uncache_unwritten(batch)
            raise
        self.scheduler.update(batch)
        now = time.monotonic()
        for seq, tokens, logprobs in emitted:
            if seq.first_token_time is None:
                seq.first_token_time = now
                stats.time_to_first_token.append(now - seq.arrival_time)
            else:
                stats.inter_token_latency.append(now - seq.last_token_time)
            seq.last_token_time = now
            reason = None
            for token, entry in zip(tokens, logprobs, strict=True):
                seq.append_token(token)
                if entry is not None:
                    seq.output_logprobs.append(entry)
                stats.num_generation_tokens += 1
                reason = self._check_stop(seq, token)
                if reason is not None:
                    break
            if seq.draft_token_ids:
                stats.num_draft_tokens += len(seq.draft_token_ids)
                stats.num_accepted_tokens += len(tokens) - 1
                self.draft_policy.record(seq, len(seq.draft_token_ids), len(tokens) - 1)
                # The rejected drafts' KV is garbage, to be overwritten; the last emitted token has none yet.
                seq.num_computed_tokens = seq.num_tokens - 1
                seq.draft_token_ids = []
            if reason is not None:
                self.scheduler.finish(seq, reason)
                stats.finished_reasons.append(reason)
                outputs.append(self._finalize(seq))
            else:
                outputs.append(self._output(seq))
        return outputs

    def _uncache_unwritten(self, batch: ScheduledBatch) -> None:
        """The step failed: the blocks it registered in the prefix cache when scheduled hold no (or partial) KV.
        A request admitted in the same step on another's just-registered blocks counts them as computed, so
        `KVCacheManager.free` would keep them findable once both are aborted."""
        pool, bs = self.kv.pool, self.kv.block_size
        for seq in batch.scheduled:
            for block_id in seq.block_table[seq.num_computed_tokens // bs:]:
                pool.uncache(pool.blocks[block_id])

    def _check_stop(self, seq: Sequence, token: int) -> str | None:
        p = seq.sampling_params
        stop = self._detokenizers[seq.request_id].add(token)
        if seq.num_output_tokens >= p.min_tokens:
            if not p.ignore_eos and token in self.eos_token_ids:
                return "stop"
            if token in p.stop_token_ids:
                seq.stop_reason = token
                return "stop"
            if stop is not None:
                seq.stop_reason = stop
                return "stop"
        if seq.num_output_tokens >= seq.max_tokens or seq.num_tokens >= self.max_model_len:
            return "length"
        return None

    def _finalize(self, seq: Sequence) -> RequestOutput:
        out = self._output(seq)
        del self.requests[seq.request_id]
        del self._detokenizers[seq.request_id]
        return out

    def _output(self, seq: Sequence) -> RequestOutput:
        finished = seq.is_finished
        detok = self._detokenizers[seq.request_id]
        logprobs = None
        if seq.sampling_params.logprobs is not None:
            logprobs = [{t: Logprob(lp, rank, self.tokenizer.decode([t])) for t, (lp, rank) in entry.items()}
                        for entry in seq.output_logprobs]
        completion = CompletionOutput(0, detok.visible_text(finished), seq.output_token_ids,
                                      seq.finish_reason if finished else None, seq.stop_reason, logprobs)
        metrics = RequestMetrics(seq.arrival_time, seq.first_token_time, time.monotonic() if finished else None)
        return RequestOutput(seq.request_id, seq.prompt, seq.prompt_token_ids, [completion], finished,
                             seq.num_cached_tokens or 0, metrics)

    def _tokenize(self, prompt: Prompt) -> tuple[str | None, list[int]]:
        if isinstance(prompt, str):
            return prompt, self.tokenizer.encode(prompt) if prompt else []
        if isinstance(prompt, dict):
            if "prompt_token_ids" in prompt:
                return prompt.get("prompt"), _token_list(prompt["prompt_token_ids"])
            if "prompt" in prompt:
                return self._tokenize(prompt["prompt"])
            raise RequestError("a prompt dict needs prompt_token_ids or prompt", field="prompt")
        return None, _token_list(prompt)

    def apply_chat_template(self, messages: list[dict[str, Any]], **kwargs: Any) -> list[int]:
        if not getattr(self.tokenizer, "chat_template", None):
            raise RequestError(f"model {self.config.model_name!r} has no chat template", field="messages")
        try:
            text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                                      **kwargs)
        except Exception as e:  # jinja errors on malformed messages
            raise RequestError(f"messages cannot be rendered by the chat template: {e}", field="messages") from e
        # The template writes the special tokens itself.
        return self.tokenizer.encode(text, add_special_tokens=False)


def _token_list(ids: Any) -> list[int]:
    if not isinstance(ids, list | tuple) or not all(isinstance(t, int) and not isinstance(t, bool) for t in ids):
        raise RequestError("prompt token ids must be a list of integers", field="prompt")
    return list(ids)


def _eos_ids(loaded: LoadedModel) -> set[int]:
    ids: set[int] = set()
    for source in (getattr(loaded.hf_config, "eos_token_id", None), loaded.tokenizer.eos_token_id):
        if isinstance(source, int):
            ids.add(source)
        elif isinstance(source, list | tuple):
            ids.update(source)
    return ids


class LLM:
    """Offline batched generation: `LLM("smollm2-135m").generate(prompts, SamplingParams(...))`."""

    def __init__(self, model: str = "smollm2-135m", *, loaded: LoadedModel | None = None, **options: Any) -> None:
        self.engine = LLMEngine(EngineConfig.from_kwargs(model=model, **options), loaded)

    def get_tokenizer(self) -> Any:
        return self.engine.tokenizer

    def generate(self, prompts: Prompt | Seq[Prompt], sampling_params: SamplingParams | Seq[SamplingParams] |
                 None = None, *, cache_salt: str | None = None) -> list[RequestOutput]:
        if isinstance(prompts, str | dict) or (isinstance(prompts, list) and prompts and isinstance(prompts[0], int)):
            prompts = [prompts]
        params = sampling_params or SamplingParams()
        params = list(params) if isinstance(params, list | tuple) else [params] * len(prompts)
        if len(params) != len(prompts):
            raise ValueError("need one SamplingParams per prompt, or one for all")
        seqs = [self.engine.make_sequence(p, sp, cache_salt=cache_salt) for p, sp in zip(prompts, params,
                                                                                        strict=True)]
        return self._run(seqs)

    def chat(self, messages: list[dict[str, Any]] | list[list[dict[str, Any]]],
             sampling_params: SamplingParams | None = None, **template_kwargs: Any) -> list[RequestOutput]:
        conversations = messages if messages and isinstance(messages[0], list) else [messages]
        prompts = [{"prompt_token_ids": self.engine.apply_chat_template(c, **template_kwargs)} for c in conversations]
        return self.generate(prompts, sampling_params)

    def reset_prefix_cache(self) -> None:
        self.engine.reset_prefix_cache()

    def _run(self, seqs: list[Sequence]) -> list[RequestOutput]:
        engine, done = self.engine, {}
        pending = deque(seqs)
        while pending or engine.has_unfinished_requests():
            # Feed the waiting queue only up to its bound; the rest waits here, not as a 429.
            while pending and len(engine.scheduler.waiting) < engine.config.max_waiting:
                engine.add_sequence(pending.popleft())
            for out in engine.step():
                if out.finished:
                    done[out.request_id] = out
        return [done[s.request_id] for s in seqs]
