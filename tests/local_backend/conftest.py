"""Fixtures for the local backend: a tiny random-weight Llama (fast) and the real SmolLM2 (loaded once)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from prefixgate.local_backend.engine import LLM  # noqa: E402
from prefixgate.local_backend.model_loader import LoadedModel, load_model  # noqa: E402
from tests.local_backend.support_tiny import tiny_llama  # noqa: E402
from tests.support_memory import give_memory_back  # noqa: E402


@pytest.fixture(autouse=True)
def one_cpu_thread():  # noqa: ANN201
    """One torch thread for these tests: on a small machine busy with other work, two threads waiting on each
    other's OpenMP barriers make the real-model tests many times slower, and no less correct."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny() -> tuple[LoadedModel, Any]:
    return tiny_llama()


@pytest.fixture
def make_llm(tiny: tuple[LoadedModel, Any]):  # noqa: ANN201 - factory
    def make(**options: Any) -> LLM:
        options.setdefault("max_num_batched_tokens", 64)
        # API behaviour is tested on exact values (top-k sets, logprobs); bfloat16 ties would blur them.
        options.setdefault("dtype", "float32")
        return LLM("tiny-llama", loaded=tiny[0], **options)
    return make


@pytest.fixture(autouse=True)
def memory_given_back_after_a_real_model(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test on SmolLM2 (GBs of engines), freed memory goes back to the system at once: glibc
    would otherwise serve the next engine's weights around the last one's freed pieces, and the process
    grows test by test (test_smollm2.py, between tests: 2.0 -> 3.7 GB over six without this, then holding
    whole-forward logits too; 1.5-1.6 GB with it and without them; docs/testing.md)."""
    yield
    if "smollm2" in request.fixturenames:
        give_memory_back()


@pytest.fixture(scope="package")
def smollm2() -> LoadedModel:
    """Loaded once for this package, and let go after it: its float32 weights are half a GB."""
    return load_model("smollm2-135m")
