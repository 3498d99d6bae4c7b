"""`prefixgate backend --model smollm2-135m` as a user runs it, with the openai client against it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.local_backend.support_backend import running_backend

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def backend_url(smollm2) -> Iterator[str]:  # smollm2: the GGUF is converted before the server starts
    with running_backend("--num-kv-blocks", "600", "--max-num-seqs", "8") as url:
        yield url


def test_openai_client_against_prefixgate_backend(backend_url: str) -> None:
    client = openai.OpenAI(base_url=backend_url + "/v1", api_key="unused", max_retries=0)
    assert client.models.list().data[0].id == "smollm2-135m"
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    r = client.chat.completions.create(model="smollm2-135m", messages=messages, max_tokens=12, temperature=0)
    assert "Paris" in r.choices[0].message.content
    streamed = client.chat.completions.create(model="smollm2-135m", messages=messages, max_tokens=12,
                                              temperature=0, stream=True, stream_options={"include_usage": True})
    chunks = list(streamed)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == r.choices[0].message.content
    usage = chunks[-1].usage
    # The second identical prompt found all but its last block in the prefix cache.
    assert usage.prompt_tokens == r.usage.prompt_tokens
    assert usage.prompt_tokens_details.cached_tokens >= usage.prompt_tokens - 16


def test_engine_options_reach_the_engine(backend_url: str) -> None:
    metrics = httpx.get(backend_url + "/metrics").text
    line = next(x for x in metrics.splitlines() if x.startswith("prefixgate_backend_kv_blocks_total{"))
    assert line.endswith(" 599.0")  # block 0 is reserved as the padding target


def test_an_invalid_engine_option_is_a_usage_error_naming_it() -> None:
    proc = subprocess.run([sys.executable, "-m", "prefixgate.cli", "backend", "--block-size", "0"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "block_size must be >= 1" in proc.stderr


def test_an_unknown_dtype_is_a_usage_error_listing_the_choices() -> None:
    proc = subprocess.run([sys.executable, "-m", "prefixgate.cli", "backend", "--dtype", "int3"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "'int3' is not one of 'auto', 'float32', 'bfloat16', 'float16'" in proc.stderr


def test_a_non_loopback_bind_without_an_api_key_is_refused_before_the_model_loads() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PREFIXGATE_BACKEND_API_KEY"}
    proc = subprocess.run([sys.executable, "-m", "prefixgate.cli", "backend", "--host", "0.0.0.0", "--port", "9"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 1
    assert "refusing to serve on 0.0.0.0" in proc.stderr and "--api-key" in proc.stderr and "--open" in proc.stderr
