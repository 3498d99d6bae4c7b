"""The bundled local backend: a paged, prefix-cached, continuous-batching inference engine."""

from __future__ import annotations

import importlib
from typing import Any

# Exported lazily: importing the package must not import torch (the gateway imports it to find the API).
_EXPORTS = {
    "LLM": "engine", "LLMEngine": "engine", "SamplingParams": "sampling_params", "EngineConfig": "config",
    "RequestOutput": "outputs", "CompletionOutput": "outputs", "AsyncEngine": "async_engine",
    "local_target": "frontend",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
