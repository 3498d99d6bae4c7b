"""How to pick each next token and when to stop, as vLLM's SamplingParams."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from prefixgate.errors import RequestError

MAX_LOGPROBS = 20


def _bad(name: str, message: str) -> RequestError:
    return RequestError(f"{name} {message}", field=name)


@dataclass
class SamplingParams:
    # temperature 0 is greedy; top_k 0 or -1 disables top-k.
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_tokens: int | None = 16
    min_tokens: int = 0
    stop: list[str] | str | None = None
    stop_token_ids: list[int] = field(default_factory=list)
    ignore_eos: bool = False
    seed: int | None = None
    # Top-k logprobs for each generated token (plus the chosen token's own).
    logprobs: int | None = None
    skip_special_tokens: bool = True
    include_stop_str_in_output: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        self.stop = list(self.stop or [])
        if not _finite(self.temperature) or self.temperature < 0:
            raise _bad("temperature", f"must be a number >= 0, got {self.temperature!r}")
        if not _finite(self.top_p) or not 0 < self.top_p <= 1:
            raise _bad("top_p", f"must be in (0, 1], got {self.top_p!r}")
        if not _int(self.top_k) or (self.top_k < 0 and self.top_k != -1):
            raise _bad("top_k", f"must be -1, 0 (disabled) or a positive integer, got {self.top_k!r}")
        if self.max_tokens is not None and (not _int(self.max_tokens) or self.max_tokens < 1):
            raise _bad("max_tokens", f"must be an integer >= 1, got {self.max_tokens!r}")
        if not _int(self.min_tokens) or self.min_tokens < 0:
            raise _bad("min_tokens", f"must be an integer >= 0, got {self.min_tokens!r}")
        if self.max_tokens is not None and self.min_tokens > self.max_tokens:
            raise _bad("min_tokens", "must not exceed max_tokens")
        if not all(isinstance(s, str) and s for s in self.stop):
            raise _bad("stop", "must be a non-empty string or a list of non-empty strings")
        if not all(_int(t) and t >= 0 for t in self.stop_token_ids):
            raise _bad("stop_token_ids", "must be a list of token ids")
        # torch.Generator takes [-2**63, 2**64): beyond it the request would fail when queued, as a bare 500.
        if self.seed is not None and (not _int(self.seed) or not -2**63 <= self.seed < 2**64):
            raise _bad("seed", f"must be a 64-bit integer, got {self.seed!r}")
        if self.logprobs is not None and (not _int(self.logprobs) or not 0 <= self.logprobs <= MAX_LOGPROBS):
            raise _bad("logprobs", f"must be an integer in [0, {MAX_LOGPROBS}], got {self.logprobs!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


def _finite(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)
