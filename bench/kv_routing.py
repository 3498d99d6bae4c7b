"""KV-event routing against rendezvous hashing, and priority classes under saturation, on real processes.

Routing: two `prefixgate backend` replicas (small KV pools, so what they hold matters) behind the gateway, fed
a shifting multi-prefix workload: support chats for three products, each product's chats under its own long
system prompt, each chat several turns whose prompt grows with its history. Chats open at random (an open
workload), customers take a few seconds between turns, and the product with most of the traffic changes every
third of the run. Routing on the replicas' KV events and rendezvous hashing (whose key is the prompt's first
block: the product's system prompt) alternate in ABBA order, each on freshly started replicas. Prints the
prefix-hit rate (cached prompt tokens / prompt tokens, as each replica reports them) and TTFT p50/p90 per run
and pooled per routing, and the hit rate per turn. `KV_ROUTING_DEBUG=1` adds the gateway's routing decisions.

Priority: one replica with few sequence slots, a burst of requests alternating high and low (vLLM's `priority`
-1 / 1), all at once; prints each class's TTFT p50 and their ratio.

    .venv/bin/python bench/kv_routing.py [--chats 16] [--repeats 2] [--only routing|priority]
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
from dataclasses import dataclass
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


# -- the routing workload: support chat for three products, one long system prompt each -----------------------

PRODUCTS = ("router", "thermostat", "doorbell")


def system_prompt(product: str) -> str:
    """About 300 tokens of instructions and policy, the same for every conversation about `product`."""
    rng = random.Random(product)
    rules = " ".join(f"Rule {i}: if the customer reports error {rng.randint(100, 999)}, ask for the serial number, "
                     f"then suggest reset option {rng.randint(1, 9)}." for i in range(11))
    return f"You are the support assistant for the Acme {product}. Be brief and polite. {rules}"


@dataclass(frozen=True)
class Conversation:
    product: str
    start_s: float                   # when the customer opens the chat, from the start of the run
    questions: tuple[str, ...]       # one per turn; each turn sends the whole history before it
    answers: tuple[str, ...]         # the assistant's replies as the client sends them back
    think_s: tuple[float, ...]       # the customer's reading and typing time before each later turn


def conversations(n: int, turns: int, arrival_s: float, think_s: float, seed: int = 7) -> list[Conversation]:
    """`n` support chats of `turns` turns, opened at random (Poisson, one every `arrival_s` on average), each
    turn sent `think_s` (exponential mean) after the previous answer. Traffic moves between products over the
    run (a launch, a time zone waking up): in each third, one product has 70% of the new chats, the others 15%."""
    rng, out, start = random.Random(seed), [], 0.0
    for k in range(n):
        hot = PRODUCTS[k * 3 // n]
        product = rng.choices(PRODUCTS, [0.7 if p == hot else 0.15 for p in PRODUCTS])[0]
        serial = rng.randint(10000, 99999)
        out.append(Conversation(product, start, tuple(
            f"Customer {k}, turn {t}: my {product} (serial {serial}) shows error {rng.randint(100, 999)}. "
            f"Here is its log: " + " ".join(f"[{rng.randint(10, 59)}:{rng.randint(10, 59)}] code "
                                            f"{rng.randint(1000, 9999)} level {rng.choice(['warn', 'error'])}"
                                            for _ in range(6)) + ". What now?"
            for t in range(turns)), tuple(
            f"Thanks, customer {k}. The log shows code {rng.randint(1000, 9999)} after the last restart. Please "
            f"unplug the {product} for {rng.randint(5, 30)} seconds, plug it back in, hold the reset button for "
            f"{rng.randint(2, 30)} seconds until the light turns {rng.choice(['green', 'blue', 'white'])}, then "
            f"open the app, go to Settings > Diagnostics > Run check, and send me the result code it shows."
            for t in range(turns)), tuple(rng.expovariate(1 / think_s) for t in range(turns))))
        start += rng.expovariate(1 / arrival_s)
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


async def drive(url: str, chats: list[Conversation]) -> list[tuple[float, int, int, int]]:
    """Each chat opens at its time and sends its turns one after another, each once the previous answer is in
    and the customer has read it: arrivals do not wait for the fleet (an open workload, as a public app sees)."""
    out = []
    began = time.perf_counter()

    async def customer(client: httpx.AsyncClient, chat: Conversation) -> None:
        await asyncio.sleep(chat.start_s)
        messages = [{"role": "system", "content": system_prompt(chat.product)}]
        for turn, (question, answer) in enumerate(zip(chat.questions, chat.answers, strict=True)):
            if turn:
                await asyncio.sleep(chat.think_s[turn])
            messages.append({"role": "user", "content": question})
            out.append((*await ask(client, url, messages), turn))
            messages.append({"role": "assistant", "content": answer})
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=None)) as client:
        await asyncio.gather(*(customer(client, chat) for chat in chats))
    print(f"  ran {time.perf_counter() - began:.0f} s", file=sys.stderr)
    return out


def routing_run(events: bool, chats: list[Conversation], blocks: int,
                folder: Path) -> list[tuple[float, int, int, int]]:
    with ExitStack() as stack:
        upstreams = {}
        for name in ("r1", "r2"):
            endpoint, replay = f"ipc://{folder}/{name}-{time.monotonic_ns()}.events", f"tcp://127.0.0.1:{_port()}"
            args = ["--num-kv-blocks", str(blocks), "--max-num-seqs", "4"]
            if events:
                args += ["--kv-events", endpoint, "--kv-events-replay", replay]
            url = stack.enter_context(backend(*args))
            upstreams[name] = {"kind": "openai_compatible", "url": url + "/v1"}
            if events:
                upstreams[name]["kv_events"] = {"endpoint": endpoint, "replay": replay, "tokenizer": MODEL}
        gw = stack.enter_context(gateway(upstreams, folder))
        time.sleep(1.0)  # the gateway's subscribers connect
        rows = asyncio.run(drive(gw, chats))
        if os.environ.get("KV_ROUTING_DEBUG"):   # the gateway's decisions
            print("\n".join(line for line in httpx.get(gw + "/metrics").text.splitlines()
                            if line.startswith("prefixgate_kv_route_decisions_total")))
        return rows


def priority_run(n: int) -> tuple[list[float], list[float]]:
    with backend("--max-num-seqs", "2", "--num-kv-blocks", "400") as url:
        async def burst() -> list:
            async with httpx.AsyncClient() as client:
                return await asyncio.gather(*(
                    ask(client, url, [{"role": "user", "content": f"Request {i}: {document(100 + i)[:300]}"}],
                        priority=-1 if i % 2 == 0 else 1, max_tokens=8) for i in range(n)))
        results = asyncio.run(burst())
    return [r[0] for r in results[0::2]], [r[0] for r in results[1::2]]


def summary(rows: list) -> tuple[float, float, float]:
    """(prefix-hit rate, TTFT p50, TTFT p90) of rows (TTFT s, prompt tokens, cached tokens, ...)."""
    ttfts = sorted(r[0] for r in rows)
    hit = sum(r[2] for r in rows) / sum(r[1] for r in rows)
    return hit, statistics.median(ttfts), ttfts[int(0.9 * (len(ttfts) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chats", type=int, default=12)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--arrival-s", type=float, default=4.0, help="mean seconds between new chats")
    parser.add_argument("--think-s", type=float, default=3.0, help="mean seconds a customer takes to answer")
    parser.add_argument("--blocks", type=int, default=256, help="KV blocks of 16 tokens per replica")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each routing, in ABBA order")
    parser.add_argument("--burst", type=int, default=24)
    parser.add_argument("--only", choices=("routing", "priority"))
    a = parser.parse_args()
    if a.only != "priority":
        chats = conversations(a.chats, a.turns, a.arrival_s, a.think_s)
        # ABBA...: drift in the machine's load over the run falls on both sides alike.
        order = [m for i in range(a.repeats) for m in (("rendezvous", "kv events") if i % 2 == 0
                                                     else ("kv events", "rendezvous"))]
        runs: list[tuple[str, str, list]] = []
        with tempfile.TemporaryDirectory() as tmp:
            for mode in order:
                began = time.strftime("%H:%M:%S", time.gmtime())
                runs.append((mode, began, routing_run(mode == "kv events", chats, a.blocks, Path(tmp))))
        print(f"routing: {a.chats} chats x {a.turns} turns over 3 products, a chat every {a.arrival_s} s, "
              f"{a.think_s} s to answer, 2 replicas x {a.blocks} blocks of 16 tokens")
        print("| routing | run (UTC) | prefix-hit rate | TTFT p50 ms | TTFT p90 ms |\n|---|---|---|---|---|")
        for mode, began, rows in runs:
            hit, p50, p90 = summary(rows)
            print(f"| {mode} | {began} | {hit:.1%} | {p50 * 1000:.0f} | {p90 * 1000:.0f} |")
        for mode in ("rendezvous", "kv events"):
            hit, p50, p90 = summary([r for m, _, rows in runs if m == mode for r in rows])
            print(f"| {mode}, all runs | | {hit:.1%} | {p50 * 1000:.0f} | {p90 * 1000:.0f} |")
        # A chat's first turn can only find its system prompt; later turns show where its history went.
        print("\n| routing, run | " + " | ".join(f"turn {t} hit" for t in range(a.turns)) + " |\n|---|"
              + "---|" * a.turns)
        for mode, began, rows in runs:
            print(f"| {mode}, {began} | " + " | ".join(f"{summary([r for r in rows if r[3] == t])[0]:.1%}"
                                                       for t in range(a.turns)) + " |")
    if a.only != "routing":
        high, low = priority_run(a.burst)
        print(f"\npriority: {a.burst} requests at once (alternating high/low), 2 sequence slots")
        print(f"high p50 {statistics.median(high) * 1000:.0f} ms, low p50 {statistics.median(low) * 1000:.0f} ms, "
              f"high/low {statistics.median(high) / statistics.median(low):.2f}")


if __name__ == "__main__":
    main()
