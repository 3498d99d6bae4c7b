"""Dashboard and ledger at scale: how fast `/api/overview` answers over a big ledger, and what a polling
dashboard costs the model requests going through the same gateway.

  1. Writes --records synthetic records spread over the last 24 hours through the ledger's own API
     (`Ledger.append`, rolled up by its thread), and reports the write rate.
  2. Starts a gateway (one worker) on that ledger in front of bench/gateway.py's fake OpenAI upstream.
  3. `/api/overview` at range=1h, 24h and 7d: --polls sequential calls each after 2 warm-ups, p50/p95.
  4. Model requests (~2,000-token prompt, sequential, one keep-alive connection) in 8 alternating blocks
     of --block-s seconds without and with a dashboard polling `/api/overview?range=24h` every 3 s (the
     page's default), p50/p99 of each and the difference.

    .venv/bin/python bench/dashboard.py [--records 1000000] [--ledger PATH] [--polls 20] [--block-s 9]

With --ledger naming an existing file, step 1 is skipped (the file is reused as it is).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from prefixgate.ledger import Ledger, LedgerRecord

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("bench_gateway", ROOT / "bench" / "gateway.py")
gw = importlib.util.module_from_spec(_spec)
sys.modules["bench_gateway"] = gw       # its dataclasses look their module up there
_spec.loader.exec_module(gw)

DAY_S = 86400
ROUTES = [(f"route-{i}", model, target) for i, (model, target) in enumerate(
    [("claude-sonnet-5-5", "anthropic"), ("gpt-4o", "openai"), ("gemini-3.8-flash", "gemini"), ("gpt-4o-mini", "openai"),
     ("claude-haiku-4-5", "anthropic"), ("gpt-4o", "openai-eu"), ("gemini-3.1-pro-preview", "gemini"), ("claude-sonnet-5-5", "bedrock")])]
KEYS = 20
POLL_S = 3.0


def synthetic(i: int, ts: float, rng: random.Random) -> LedgerRecord:
    """One plausible answered request: a route with its model and target, a caller key and tenant, a cached
    prefix most of the time, and the prefix shape and plan lines the misses view reads."""
    route, model, target = ROUTES[i % len(ROUTES)]
    key = i % KEYS
    hit = rng.random() < 0.8
    prompt = rng.randint(500, 20_000)
    read = int(prompt * 0.9) if hit else 0
    cost = (prompt - read) * 3 + read * 0.3 + 200 * 15
    return LedgerRecord(
        id=f"bench-{i}", ts=ts, key=f"key-{key}", tenant=f"tenant-{key % 4}", route=route, target=target, provider=target,
        model=model, dialect="openai", status=200 if rng.random() > 0.01 else 529, uncached_input=prompt - read,
        cache_read=read, cache_writes={} if hit else {"5m": int(prompt * 0.9)}, output=200,
        cost_usd=f"{cost / 1e6:.9f}", cost_without_cache_usd=f"{prompt * 3e-6 + 0.003:.9f}",
        savings_usd=f"{(prompt * 3 + 3000 - cost) / 1e6:.9f}", latency_ms=rng.lognormvariate(6.5, 0.6),
        ttft_ms=rng.lognormvariate(5.5, 0.5), prefix_hash=f"{i % 64:016x}", plan_summary="static 1 checkpoint",
        explanation=["checkpoint: static at 1500 tokens, ttl 5m (p(reuse<5m)=0.90)"],
        segments=["tools:a1b2c3d4e5f6:a1b2c3d4e5f6:900:", "system:0f1e2d3c4b5a:0f1e2d3c4b5a:1500:",
                  f"user:{i % 1000:012x}:{i % 1000:012x}:40:"])


def fill(path: str, n: int) -> float:
    """Write n records over the last 24 hours, oldest first; returns records per second (appends and roll-up)."""
    rng = random.Random(7)
    start = time.time() - DAY_S
    ledger = Ledger(path)
    t0 = time.perf_counter()
    for i in range(n):
        ledger.append(synthetic(i, start + i * DAY_S / n, rng))
        if i and i % 1_000_000 == 0:
            print(f"  {i:,} records, {i / (time.perf_counter() - t0):,.0f}/s", file=sys.stderr)
    ledger.close()     # waits for the roll-up to catch up
    return n / (time.perf_counter() - t0)


def time_overview(port: int, span: str, polls: int) -> list[float]:
    out = []
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
        for i in range(polls + 2):
            t = time.perf_counter()
            r = client.get("/api/overview", params={"range": span})
            elapsed = (time.perf_counter() - t) * 1000
            r.raise_for_status()
            if i >= 2:
                out.append(elapsed)
    return out


async def model_requests(port: int, raw: bytes, blocks: int, block_s: float) -> tuple[list[float], list[float], int]:
    """Alternating blocks of sequential requests, block_s long each, without and with a dashboard polling;
    returns (latencies without, latencies with, polls made)."""
    quiet: list[float] = []
    polled: list[float] = []
    polls = 0
    poll_raw = f"GET /api/overview?range=24h HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n\r\n".encode()

    async def dashboard() -> None:
        nonlocal polls
        conn = await gw.Conn.open(port)
        try:
            while True:
                assert await conn.request(poll_raw) == 200
                polls += 1
                await asyncio.sleep(POLL_S)
        finally:
            conn.close()

    conn = await gw.Conn.open(port)
    for block in range(blocks):
        poller = asyncio.create_task(dashboard()) if block % 2 else None
        end = time.perf_counter() + block_s
        while time.perf_counter() < end:
            t = time.perf_counter()
            assert await conn.request(raw) == 200
            (polled if poller else quiet).append((time.perf_counter() - t) * 1000)
        if poller:
            poller.cancel()
            await asyncio.gather(poller, return_exceptions=True)
    conn.close()
    return quiet, polled, polls


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--ledger", default="", help="reuse this ledger file (written first if it does not exist)")
    parser.add_argument("--polls", type=int, default=20)
    parser.add_argument("--block-s", type=float, default=9.0, help="length of each of the 8 alternating blocks")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="pg-dash-bench-"))
    path = args.ledger or str(tmp / "ledger.sqlite")
    print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()}", file=sys.stderr)
    if not Path(path).exists():
        rate = fill(path, args.records)
        print(f"wrote {args.records:,} records in the last 24 h: {rate:,.0f} records/s (appends + roll-up), "
              f"file {Path(path).stat().st_size / 1e6:,.0f} MB", file=sys.stderr)
    procs: list[subprocess.Popen] = []
    try:
        up_port = gw.free_port()
        procs.append(gw.start([sys.executable, str(ROOT / "bench" / "gateway.py"), "--upstream", str(up_port)], {},
                              tmp / "upstream.log"))
        gw.wait_ready(up_port, "/", 20)
        port = gw.free_port()
        env = {"PREFIXGATE_OPENAI_BASE_URL": f"http://127.0.0.1:{up_port}", "OPENAI_API_KEY": "sk-fake-openai",
               "PREFIXGATE_LEDGER_PATH": path}
        procs.append(gw.start([str(ROOT / ".venv" / "bin" / "prefixgate"), "serve", "--port", str(port)], env,
                              tmp / "prefixgate.log"))
        gw.wait_ready(port, "/health", 120)

        rows = []
        for span in ("1h", "24h", "7d"):
            times = time_overview(port, span, args.polls)
            rows.append((span, statistics.median(times), pct(times, 95)))
            print(f"  overview {span}: p50 {rows[-1][1]:.1f} ms, p95 {rows[-1][2]:.1f} ms", file=sys.stderr)

        body = {"model": "gpt-4o", "max_tokens": 16, "messages": [
            {"role": "system", "content": gw.SENTENCE * 125}, {"role": "user", "content": "Summarise."}]}
        raw = gw.build_request(port, "/v1/chat/completions", body, {"authorization": "Bearer caller"})
        asyncio.run(gw.sequential(port, [raw], 100, 0))   # warm-up
        quiet, polled, polls = asyncio.run(model_requests(port, raw, 8, args.block_s))
        load = os.getloadavg()
    finally:
        gw.stop(procs)

    print(f"\n{os.cpu_count()} CPUs, load after the run {load[0]:.1f}; ledger {path}\n")
    print("| records (last 24 h) | range | p50 ms | p95 ms |")
    print("|---|---|---|---|")
    for span, p50, p95 in rows:
        print(f"| {args.records:,} | {span} | {p50:.1f} | {p95:.1f} |")
    print(f"\nModel requests through the same gateway, {len(quiet)} without and {len(polled)} with a dashboard polling "
          f"range=24h every {POLL_S:g} s ({polls} polls), alternating blocks of {args.block_s:g} s:\n")
    print("| condition | p50 ms | p99 ms |")
    print("|---|---|---|")
    print(f"| no dashboard | {statistics.median(quiet):.2f} | {pct(quiet, 99):.2f} |")
    print(f"| dashboard polling | {statistics.median(polled):.2f} | {pct(polled, 99):.2f} |")
    print(f"| difference | {statistics.median(polled) - statistics.median(quiet):+.2f} | {pct(polled, 99) - pct(quiet, 99):+.2f} |")


if __name__ == "__main__":
    main()
