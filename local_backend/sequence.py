"""One request as the engine tracks it: its tokens, how many are computed, and the KV blocks that hold them."""

from __future__ import annotations

import time
from enum import Enum, auto
from typing import TYPE_CHECKING

import torch

from prefixgate.local_backend.sampling_params import SamplingParams

if TYPE_CHECKING:
    from prefixgate.local_backend.draft_policy import DraftHistory


class SequenceStatus(Enum):
    WAITING = auto()
    RUNNING = auto()
    FINISHED = auto()


class Sequence:
    def __init__(self, request_id: str, prompt_token_ids: list[int], sampling_params: SamplingParams,
                 *, prompt: str | None = None, cache_salt: str | None = None, max_tokens: int,
                 priority: int = 0) -> None:
        if not prompt_token_ids:
            raise ValueError(f"{request_id}: a sequence needs one prompt token at least")
        self.request_id = request_id
        self.prompt = prompt
        self.prompt_token_ids = list(prompt_token_ids)
        self.token_ids = list(prompt_token_ids)
        self.num_prompt_tokens = len(prompt_token_ids)
        self.sampling_params = sampling_params
        self.max_tokens = max_tokens
        self.cache_salt = cache_salt
        self.priority = priority  # lower is admitted first and preempted last (vLLM's priority scheduling)
        self.status = SequenceStatus.WAITING
        self.block_table: list[int] = []
        # Chained hashes of this sequence's full blocks, extended as tokens arrive (kv_cache_manager).
        self.block_hashes: list[bytes] = []
        self.num_registered_blocks = 0
        # Tokens whose KV is in the cache (or will be once the scheduled step runs).
        self.num_computed_tokens = 0
        # Prompt tokens found in the prefix cache at first admission (usage.cached_tokens).
        self.num_cached_tokens: int | None = None
        self.num_preemptions = 0
        # Speculated next tokens (ngram_proposer) for the coming step; not part of token_ids until accepted.
        self.draft_token_ids: list[int] = []
        # How its drafts have fared, for the draft policy; None until it first decodes with speculation on.
        self.draft_history: DraftHistory | None = None
        self.finish_reason: str | None = None
        self.stop_reason: str | int | None = None
        self.output_logprobs: list[dict[int, tuple[float, int]]] = []
        self.generator: torch.Generator | None = None
        if sampling_params.seed is not None:
            self.generator = torch.Generator().manual_seed(sampling_params.seed)
        self.arrival_time = time.monotonic()
        self.first_token_time: float | None = None
        self.last_token_time: float | None = None

    def __repr__(self) -> str:
        return (f"Sequence({self.request_id!r}, tokens={self.num_tokens}, computed={self.num_computed_tokens}, "
                f"blocks={len(self.block_table)}, {self.status.name})")

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def output_token_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens:]

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def is_finished(self) -> bool:
        return self.status is SequenceStatus.FINISHED

    def append_token(self, token_id: int) -> None:
        self.token_ids.append(token_id)

    def step_token_ids(self, start: int, n: int) -> list[int]:
        """The n tokens a step computes from position `start`: known tokens, then drafts."""
        ids = self.token_ids[start:start + n]
        if len(ids) < n:
            ids += self.draft_token_ids[:n - len(ids)]
        return ids
