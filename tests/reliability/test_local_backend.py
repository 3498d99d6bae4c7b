"""The local backend behind the gateway: 64 concurrent streams into an engine whose KV pool holds a
fraction of them (the scheduler must preempt and recompute): every one completes, 0 errors, every block
freed afterwards. And tenant isolation: identical prompts from two tenants share no prefix-cache block
while `tenant_cache_isolation` is on (and do share them when it is off, which is what the salt prevents).

`make test` uses a tiny random-weight Llama; `make soak` runs PREFIXGATE_LOCAL_LOAD_ROUNDS rounds, and
PREFIXGATE_LOCAL_LOAD_MODEL=smollm2-135m runs the real bundled model."""

from __future__ import annotations

import asyncio
import json
import os
import time

import httpx
import pytest

from prefixgate.gateway.app import create_app
from prefixgate.local_backend.async_engine import AsyncEngine
from prefixgate.local_backend.config import EngineConfig
from prefixgate.local_backend.engine import LLMEngine
from prefixgate.local_backend.frontend import Frontend
from prefixgate.policies import hash_key
from tests.gateway.support_gateway import ServerThread, policy_for, settings_for
from tests.reliability.support_figures import report

CONCURRENT = 64
ROUNDS = int(os.environ.get("PREFIXGATE_LOCAL_LOAD_ROUNDS", "1"))
MODEL = os.environ.get("PREFIXGATE_LOCAL_LOAD_MODEL", "tiny")
OUTPUT_TOKENS = 32
KEYS = {"acme": "pg-acme-local-0001", "globex": "pg-globex-local-0002"}
POLICY = {"routes": [{"name": "local", "models": ["local"], "retry": {"attempts": 1, "timeout_s": 300},
                      "targets": [{"upstream": "local"}]}],
          "keys": [{"name": f"{t}-app", "tenant": t, "key_sha256": hash_key(k)} for t, k in KEYS.items()]}


class EngineTarget:
    """The gateway's LocalTarget over an engine built here (the tiny model, a small KV pool)."""

    def __init__(self, loaded, **options) -> None:
        self.steps = {"preemptions": 0, "steps": 0}
        self.engine = AsyncEngine(LLMEngine(EngineConfig(model=MODEL, **options), loaded), observer=self._observe)
        self.engine.start()
        self.frontend = Frontend(self.engine)

    def _observe(self, stats, _engine) -> None:
        self.steps["preemptions"] += stats.num_preemptions
        self.steps["steps"] += 1

    async def chat(self, body: dict, *, stream: bool):
        return await self.frontend.chat({**body, "model": self.frontend.model}, stream=stream)

    @property
    def kv(self):
        return self.engine.engine.kv


@pytest.fixture(scope="module")
def loaded():
    if MODEL == "tiny":
        from tests.local_backend.support_tiny import tiny_llama

        return tiny_llama()[0]
    from prefixgate.local_backend.model_loader import load_model

    return load_model(MODEL)


def gateway(tmp_path, target: EngineTarget, **settings):
    s = settings_for("http://127.0.0.1:9", tmp_path, local_model=MODEL, **settings)
    return ServerThread(create_app(s, policy=policy_for(s, POLICY), local=target))


def prompt(i: int) -> str:
    return f"Request {i:03d}. " + "Summarise the parcel's journey from depot to door in detail. " * 3


async def stream_one(client: httpx.AsyncClient, i: int) -> tuple[float, float, int]:
    """(latency ms, time to first byte ms, output tokens) of one streamed request; raises on any error."""
    started = time.perf_counter()
    first = None
    usage = None
    body = {"model": "local", "stream": True, "stream_options": {"include_usage": True}, "max_tokens": OUTPUT_TOKENS,
            "ignore_eos": True, "messages": [{"role": "user", "content": prompt(i)}]}
    async with client.stream("POST", "/v1/chat/completions", json=body,
                             headers={"authorization": f"Bearer {KEYS['acme']}"}) as resp:
        assert resp.status_code == 200, await resp.aread()
        done = False
        async for line in resp.aiter_lines():
            if first is None:
                first = time.perf_counter()
            if line == "data: [DONE]":
                done = True
            elif line.startswith("data: "):
                data = json.loads(line[6:])
                assert "error" not in data, data
                usage = data.get("usage") or usage
        assert done
    return (time.perf_counter() - started) * 1000, (first - started) * 1000, usage["completion_tokens"]


@pytest.mark.slow
def test_64_concurrent_streams_through_a_small_kv_pool(tmp_path, loaded):
    # Each request needs ~(prompt + 32) / 4 blocks; 64 of them need ~10x the pool: preemption is certain.
    target = EngineTarget(loaded, block_size=4, num_kv_blocks=300, max_num_seqs=CONCURRENT,
                          max_num_batched_tokens=256, max_waiting=4 * CONCURRENT)
    latencies, ttfts, errors = [], [], []
    with gateway(tmp_path, target) as gw:
        async def run() -> float:
            async with httpx.AsyncClient(base_url=gw.url, timeout=httpx.Timeout(600)) as client:
                async def guarded(i: int) -> None:
                    try:
                        latency, ttft, tokens = await stream_one(client, i)
                    except Exception as e:      # counted, reported and failed on below
                        errors.append(repr(e)[:200])
                        return
                    assert tokens == OUTPUT_TOKENS
                    latencies.append(latency)
                    ttfts.append(ttft)
                started = time.monotonic()
                for r in range(ROUNDS):
                    await asyncio.wait_for(asyncio.gather(*(guarded(r * CONCURRENT + i) for i in range(CONCURRENT))), 900)
                return time.monotonic() - started
        elapsed = asyncio.run(run())
        deadline = time.monotonic() + 10
        while target.kv.num_used_blocks and time.monotonic() < deadline:
            time.sleep(0.05)
        used_after = target.kv.num_used_blocks
    target.engine.shutdown()
    latencies.sort()
    ttfts.sort()
    figures = {"model": MODEL, "requests": CONCURRENT * ROUNDS, "concurrent": CONCURRENT, "kv_blocks": 300,
               "block_size": 4, "output_tokens_each": OUTPUT_TOKENS, "errors": len(errors),
               "preemptions": target.steps["preemptions"], "engine_steps": target.steps["steps"],
               "seconds": round(elapsed, 1), "requests_per_s": round(len(latencies) / elapsed, 2),
               "output_tokens_per_s": round(len(latencies) * OUTPUT_TOKENS / elapsed, 1),
               "p50_ms": round(latencies[len(latencies) // 2], 1) if latencies else None,
               "p99_ms": round(latencies[int(0.99 * (len(latencies) - 1))], 1) if latencies else None,
               "ttft_p50_ms": round(ttfts[len(ttfts) // 2], 1) if ttfts else None,
               "kv_blocks_in_use_after": used_after}
    report("local_backend_preemption", figures)
    assert not errors, errors[:5]
    assert target.steps["preemptions"] > 0
    assert used_after == 0


def chat_cached_tokens(gw, tenant: str, text: str) -> int:
    r = httpx.post(gw.url + "/v1/chat/completions", headers={"authorization": f"Bearer {KEYS[tenant]}"}, timeout=120,
                   json={"model": "local", "max_tokens": 4, "messages": [{"role": "user", "content": text}],
                         "cache_salt": "caller-chosen"})
    assert r.status_code == 200, r.text
    return r.json()["usage"]["prompt_tokens_details"]["cached_tokens"]


@pytest.mark.parametrize("isolation", [True, False])
def test_tenants_share_no_cached_blocks(tmp_path, loaded, isolation):
    target = EngineTarget(loaded, block_size=4, num_kv_blocks=2000)
    text = "The shared support playbook, identical for every tenant. " * 6
    with gateway(tmp_path, target, tenant_cache_isolation=isolation) as gw:
        first = chat_cached_tokens(gw, "acme", text)
        cached_hashes = set(target.kv.pool.cached)
        again = chat_cached_tokens(gw, "acme", text)
        other = chat_cached_tokens(gw, "globex", text)
        new_hashes = set(target.kv.pool.cached) - cached_hashes
    target.engine.shutdown()
    assert first == 0 and again > 0           # the same tenant reads its own prefix
    if isolation:
        assert other == 0                     # the other tenant, same prompt: nothing cached for it
        assert len(new_hashes) >= again // 4  # its blocks hashed apart from acme's (none shared)
    else:
        assert other == again                 # without the salt the second tenant reads the first's blocks
    report(f"tenant_isolation_{'on' if isolation else 'off'}", {
        "acme_first_cached_tokens": first, "acme_repeat_cached_tokens": again, "globex_same_prompt_cached_tokens": other})
