"""Engine settings, validated once where they enter."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import torch

from prefixgate.local_backend.kv_events import KVEventsConfig

DTYPES = ("auto", "float32", "bfloat16", "float16")


def cpu_has_native_bfloat16() -> bool:
    """Whether this CPU multiplies bfloat16 in hardware (AVX512-BF16 or AMX), which oneDNN's matmuls use:
    there a bfloat16 decode step of SmolLM2-135M takes about half the float32 one's time. Elsewhere bfloat16
    is emulated and slower than float32."""
    return torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()


@dataclass(slots=True)
class EngineConfig:
    model: str = "smollm2-135m"
    # Served under this name on /v1/models; defaults to `model`.
    served_model_name: str | None = None
    block_size: int = 16
    # KV pool size: an explicit block count, or as many blocks as fit in kv_cache_gib.
    num_kv_blocks: int | None = None
    kv_cache_gib: float = 1.0
    max_num_batched_tokens: int = 512
    max_num_seqs: int = 64
    # Longest prompt + output; defaults to the model's max_position_embeddings.
    max_model_len: int | None = None
    # Requests waiting for their first step beyond this bound are refused (HTTP 429).
    max_waiting: int = 256
    enable_prefix_caching: bool = True
    # Admit the waiting request with the longest cached prefix first, rather than the oldest.
    cache_aware_scheduling: bool = False
    device: str | None = None
    # Weights, activations and KV cache. auto: bfloat16 on a CPU with native bfloat16 and on CUDA GPUs that
    # support it (else float16); float32 elsewhere. float32 is exact to transformers' float32 forward within
    # 1e-3; bfloat16 is judged as vLLM judges reduced-precision models (tests/local_backend/test_smollm2.py).
    dtype: str = field(default="auto", metadata={"choices": DTYPES})
    # CPU threads the engine's steps use; None leaves torch's setting. On a small machine shared with other
    # work, 1 avoids OpenMP threads waiting on each other behind a busy core (see the README's benchmark).
    cpu_threads: int | None = None
    # On CPU in float32, also keep the matmul weights packed for MKL: halves the matmul time of small (decode)
    # batches, doubles the weights' memory. None: pack when the copy takes under a quarter of free memory.
    pack_cpu_weights: bool | None = None
    seed: int = 0
    # Prompt-lookup speculation (vLLM's ngram method; greedy requests only): up to this many draft tokens per
    # step, from the latest earlier occurrence of the sequence's last prompt_lookup_max..min tokens, no more
    # than the match is long; draft_policy.py decides how many each sequence drafts. 0: off.
    num_speculative_tokens: int = 0
    prompt_lookup_max: int = 8
    prompt_lookup_min: int = 2
    # Publish KV cache events (vLLM's schema, kv_events.py) on this ZMQ endpoint, e.g. tcp://*:5557 (binds) or
    # tcp://router:5557 (connects); a replay endpoint answers requests for missed sequence numbers.
    kv_events: str | None = None
    kv_events_replay: str | None = None
    kv_events_topic: str = ""
    kv_events_hwm: int = 100_000
    kv_events_max_queue_size: int = 100_000
    kv_events_buffer_steps: int = 10_000

    def __post_init__(self) -> None:
        if self.block_size < 1:
            raise ValueError("block_size must be >= 1")
        if self.num_kv_blocks is not None and self.num_kv_blocks < 2:
            raise ValueError("num_kv_blocks must be >= 2 (block 0 is reserved)")
        if self.kv_cache_gib <= 0:
            raise ValueError("kv_cache_gib must be > 0")
        if self.max_num_batched_tokens < 1 or self.max_num_seqs < 1 or self.max_waiting < 1:
            raise ValueError("max_num_batched_tokens, max_num_seqs and max_waiting must be >= 1")
        if self.cpu_threads is not None and self.cpu_threads < 1:
            raise ValueError("cpu_threads must be >= 1")
        if self.num_speculative_tokens < 0:
            raise ValueError("num_speculative_tokens must be >= 0")
        if not 1 <= self.prompt_lookup_min <= self.prompt_lookup_max:
            raise ValueError("prompt_lookup_min and prompt_lookup_max must satisfy 1 <= min <= max")
        if self.max_model_len is not None and self.max_model_len < 2:
            raise ValueError("max_model_len must be >= 2")
        self.kv_events_config()  # validates the endpoints and bounds
        if self.device is None:
            self.device = "cuda" if torch.cuda.is_available() else "cpu"
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, not {self.dtype!r}")
        if self.dtype == "auto":
            if self.device == "cpu":
                self.dtype = "bfloat16" if cpu_has_native_bfloat16() else "float32"
            else:
                self.dtype = "bfloat16" if torch.cuda.is_bf16_supported() else "float16"

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    def kv_events_config(self) -> KVEventsConfig | None:
        if self.kv_events is None:
            if self.kv_events_replay is not None:
                raise ValueError("kv_events_replay needs kv_events (the endpoint events are published on)")
            return None
        return KVEventsConfig(self.kv_events, self.kv_events_replay, self.kv_events_topic, self.kv_events_hwm,
                              self.kv_events_max_queue_size, self.kv_events_buffer_steps)

    @property
    def model_name(self) -> str:
        return self.served_model_name or self.model

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> EngineConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise TypeError(f"unknown engine option(s): {', '.join(unknown)}")
        return cls(**kwargs)
