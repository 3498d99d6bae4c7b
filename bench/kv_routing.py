"""KV-event routing against rendezvous hashing, and priority classes under saturation, on real processes.

Routing: two `prefixgate backend` replicas (small KV pools, so what they hold matters) behind the gateway, fed
a shifting multi-prefix workload (documents under one shared system prompt; the hot set of documents moves
every phase), `--concurrency` requests at a time. Run once with the gateway routing on the replicas' KV events
and once with rendezvous hashing (the same replicas restarted, so both start cold). Prints the prefix-hit
rate (cached prompt tokens / prompt tokens, as each replica reports them) and TTFT p50/p90 for each.

Priority: one replica with few sequence slots, a burst of requests alternating high and low (vLLM's `priority`
-1 / 1), all at once; prints each class's TTFT p50 and their ratio.

    .venv/bin/python bench/kv_routing.py [--requests 96] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx

MODEL = "smollm2-135m"
SYSTEM = "You are the plant's maintenance assistant. Answer from the manual below, citing step numbers."


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def backend(*args: str) -> Iterator[str]:
    port = _port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "prefixgate.cli", "backend", "--model", MODEL, "--port", str(port),
                             "--dtype", "float32", *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, "backend did not start"
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(20)


@contextmanager
def gateway(upstreams: dict, folder: Path) -> Iterator[str]:
    import uvicorn

    from prefixgate.config import load_settings
    from prefixgate.gateway.app import create_app
    from prefixgate.policies import Policy
    from prefixgate.policies.load import builtin_upstreams

    settings = load_settings(ledger_path=str(folder / f"ledger-{time.monotonic_ns()}.sqlite"), log_level="warning",
                             tenant_cache_isolation=False)
    policy = Policy.from_dict({"upstreams": upstreams, "routes": [
        {"name": "fleet", "models": [MODEL], "planner": "off", "targets": [{"replicas": sorted(upstreams)}]}]},
        builtin_upstreams(settings))
    port = _port()
    server = uvicorn.Server(uvicorn.Config(create_app(settings, policy=policy), host="127.0.0.1", port=port,
                                           log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)


def document(i: int) -> str:
    rng = random.Random(i)
    return " ".join(f"Step {s} of manual {i}: set valve {rng.randint(1, 99)} to {rng.randint(1, 9)} bar, then "
                    f"log gauge {rng.randint(100, 999)}." for s in range(14))


def workload(n: int, seed: int = 7) -> list[tuple[int, str]]:
    """(document, question): 12 documents, a hot set of 3 that moves every n/4 requests."""
    rng, out = random.Random(seed), []
    for k in range(n):
        phase = k * 4 // n
        hot = [(phase * 3 + j) % 12 for j in range(3)]
        out.append((rng.choice(hot), f"Question {k}: which valve comes after step {rng.randint(1, 13)}?"))
    return out


async def ask(client: httpx.AsyncClient, url: str, messages: list[dict], priority: int | None = None,
              max_tokens: int = 1) -> tuple[float, int, int]:
    """(TTFT s, prompt tokens, cached tokens), streamed as a user's client reads it."""
    body = {"model": MODEL, "messages": messages, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    if priority is not None:
        body["priority"] = priority
    start, ttft, usage = time.perf_counter(), None, {}
    async with client.stream("POST", url + "/v1/chat/completions", json=body, timeout=600) as r:
        assert r.status_code == 200, await r.aread()
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            choice = (chunk.get("choices") or [{}])[0]
            # The first chunk only names the role, before any token: the first token is what counts.
            if ttft is None and ((choice.get("delta") or {}).get("content") or choice.get("finish_reason")):
                ttft = time.perf_counter() - start
            usage = chunk.get("usage") or usage
    return ttft or 0.0, usage["prompt_tokens"], (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)


async def drive(url: str, requests: list[tuple[int, str]], concurrency: int) -> list[tuple[float, int, int]]:
    queue = list(enumerate(requests))
    out: list = [None] * len(requests)

    async def worker(client: httpx.AsyncClient) -> None:
        while queue:
            i, (doc, question) = queue.pop(0)
            out[i] = await ask(client, url, [{"role": "system", "content": f"{SYSTEM}\n\n{document(doc)}"},
                                             {"role": "user", "content": question}])
    async with httpx.AsyncClient() as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    return out


def routing_run(events: bool, requests: list, concurrency: int, folder: Path) -> list[tuple[float, int, int]]:
    with ExitStack() as stack:
        upstreams = {}
        for name in ("r1", "r2"):
            endpoint, replay = f"ipc://{folder}/{name}-{events}.events", f"tcp://127.0.0.1:{_port()}"
            args = ["--num-kv-blocks", "48", "--max-num-seqs", "4"]
            if events:
                args += ["--kv-events", endpoint, "--kv-events-replay", replay]
            url = stack.enter_context(backend(*args))
            upstreams[name] = {"kind": "openai_compatible", "url": url + "/v1"}
            if events:
                upstreams[name]["kv_events"] = {"endpoint": endpoint, "replay": replay, "tokenizer": MODEL}
        gw = stack.enter_context(gateway(upstreams, folder))
        time.sleep(1.0)  # the gateway's subscribers connect
        return asyncio.run(drive(gw, requests, concurrency))


def priority_run(n: int) -> tuple[list[float], list[float]]:
    with backend("--max-num-seqs", "2", "--num-kv-blocks", "400") as url:
        async def burst() -> list:
            async with httpx.AsyncClient() as client:
                return await asyncio.gather(*(
                    ask(client, url, [{"role": "user", "content": f"Request {i}: {document(100 + i)[:300]}"}],
                        priority=-1 if i % 2 == 0 else 1, max_tokens=8) for i in range(n)))
        results = asyncio.run(burst())
    return [r[0] for r in results[0::2]], [r[0] for r in results[1::2]]


def summary(rows: list[tuple[float, int, int]]) -> tuple[float, float, float]:
    ttfts = sorted(r[0] for r in rows)
    hit = sum(r[2] for r in rows) / sum(r[1] for r in rows)
    return hit, statistics.median(ttfts), ttfts[int(0.9 * (len(ttfts) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=96)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--burst", type=int, default=24)
    a = parser.parse_args()
    requests = workload(a.requests)
    with tempfile.TemporaryDirectory() as tmp:
        results = {mode: routing_run(mode == "kv events", requests, a.concurrency, Path(tmp))
                   for mode in ("rendezvous", "kv events")}
    print(f"routing: {a.requests} requests, concurrency {a.concurrency}, 2 replicas x 47 blocks of 16 tokens")
    print("| routing | prefix-hit rate | TTFT p50 ms | TTFT p90 ms |\n|---|---|---|---|")
    for mode, rows in results.items():
        hit, p50, p90 = summary(rows)
        print(f"| {mode} | {hit:.1%} | {p50 * 1000:.0f} | {p90 * 1000:.0f} |")
    high, low = priority_run(a.burst)
    print(f"\npriority: {a.burst} requests at once (alternating high/low), 2 sequence slots")
    print(f"high p50 {statistics.median(high) * 1000:.0f} ms, low p50 {statistics.median(low) * 1000:.0f} ms, "
          f"high/low {statistics.median(high) / statistics.median(low):.2f}")


if __name__ == "__main__":
    main()
