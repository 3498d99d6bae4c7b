"""What a response-cache hit costs: latency of a repeated ~20k-token agent request answered from the cache,
against the same request sent upstream directly and through the gateway with the cache off.

Two fake upstreams (bench/gateway.py's): one that answers at once, for the gateway's own costs, and one that
answers after `--upstream-ms`, a stand-in for a provider's time on a 20k-token prompt (real ones take longer).
One `prefixgate serve` routes two model names to the instant upstream, the same in all but `response_cache`
(on for one, off for the other). For the agent20k request (bench/agent_request.py, 16 variants of the last user
text), streamed and not, at concurrency 1 over one keep-alive connection, after discarded warm-ups:
  - direct: straight to the instant upstream (the HTTP round trip itself);
  - gateway, cache off: the gateway's normal path (its overhead = this p50 - direct p50);
  - gateway, hit: the cache on, every variant stored by the warm-ups, so each measured request is a hit;
  - direct, slow upstream: straight to the delayed upstream (what a hit saves the caller from waiting for).

It prints the table for docs/benchmarks.md and two figures per row pair: what a hit adds over the gateway's
normal overhead, (hit p50 - direct p50) - overhead (the target: at most +1 ms), and hit p50 / slow upstream p50.

    .venv/bin/python bench/response_cache.py [--upstream-ms 200] [--requests 100] [--warmup 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import yaml

# bench/ is the script's folder, first on sys.path: `gateway` here is bench/gateway.py (its load generator).
from agent_request import agent_body, variants

from gateway import (
    ANTHROPIC_HEADERS,
    ROOT,
    build_request,
    cpu_seconds,
    free_port,
    pct,
    sequential,
    start,
    stop,
    upstream_app,
    wait_ready,
)
from prefixgate.tokens import count_tokens

CACHED, PLAIN = "claude-sonnet-5-5", "claude-opus-5-5"


def delayed_upstream(port: int, delay_ms: float) -> None:
    import uvicorn

    inner = upstream_app()

    async def app(scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "POST":
            await asyncio.sleep(delay_ms / 1000)
        await inner(scope, receive, send)

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def policy() -> dict:
    def route(model: str, cache: str) -> dict:
        return {"name": f"cache-{cache}", "models": [model], "targets": [{"upstream": "anthropic"}],
                "response_cache": {"mode": cache}}
    return {"routes": [route(CACHED, "on"), route(PLAIN, "off")]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream-ms", type=float, default=200.0, help="the fake upstream's time per answer")
    parser.add_argument("--requests", type=int, default=100, help="measured sequential requests per row")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--upstream", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.upstream:
        delayed_upstream(args.upstream, args.upstream_ms)
        return

    base = agent_body(20_000, model=CACHED)
    tokens = count_tokens(str(base), "cl100k_base")
    bodies = variants(base, 16)
    tmp = Path(tempfile.mkdtemp(prefix="pg-bench-rc-"))
    (tmp / "policy.yaml").write_text(yaml.safe_dump(policy()))
    procs = []
    rows: list[tuple[str, str, float, float, float | None]] = []
    try:
        up, slow = free_port(), free_port()
        procs.append(start([sys.executable, __file__, "--upstream", str(up), "--upstream-ms", "0"], {}, tmp / "up.log"))
        procs.append(start([sys.executable, __file__, "--upstream", str(slow), "--upstream-ms", str(args.upstream_ms)],
                           {}, tmp / "slow.log"))
        wait_ready(up, "/", 20)
        wait_ready(slow, "/", 20)
        gw = free_port()
        procs.append(start([str(ROOT / ".venv" / "bin" / "prefixgate"), "serve", "--port", str(gw)],
                           {"PREFIXGATE_ANTHROPIC_BASE_URL": f"http://127.0.0.1:{up}", "ANTHROPIC_API_KEY": "sk-ant-fake",
                            "PREFIXGATE_LEDGER_PATH": str(tmp / "ledger.sqlite"),
                            "PREFIXGATE_POLICY_FILE": str(tmp / "policy.yaml")}, tmp / "prefixgate.log"))
        wait_ready(gw, "/health", 60)
        print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()}", file=sys.stderr)
        headers = {"x-api-key": "sk-ant-fake", **ANTHROPIC_HEADERS}
        for stream in (False, True):
            label = "streamed" if stream else "non-streamed"
            for name, port, model in (("direct", up, CACHED), ("gateway, cache off", gw, PLAIN),
                                      ("gateway, response-cache hit", gw, CACHED), ("direct, slow upstream", slow, CACHED)):
                raws = [build_request(port, "/v1/messages", {**b, "model": model, **({"stream": True} if stream else {})},
                                      headers) for b in bodies]
                warmup = max(args.warmup, len(raws)) if model == CACHED and port == gw else args.warmup
                asyncio.run(sequential(port, raws, warmup, 0))
                cpu0 = cpu_seconds(procs[-1].pid)
                lat = asyncio.run(sequential(port, raws, 0, args.requests))
                # The gateway's own CPU per request: what contention on a shared machine does not inflate.
                cpu = (cpu_seconds(procs[-1].pid) - cpu0) * 1000 / args.requests if port == gw else None
                rows.append((label, name, pct(lat, 50), pct(lat, 99), cpu))
                print(f"  {label}, {name}: p50 {rows[-1][2]:.2f} ms, p99 {rows[-1][3]:.2f} ms", file=sys.stderr)
    finally:
        stop(procs)

    print(f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
          f"agent20k ({tokens // 1000}k tok), slow upstream answers after {args.upstream_ms:g} ms; "
          f"{args.requests} sequential requests per row\n")
    print("| request | path | p50 ms | p99 ms | gateway CPU ms/req |")
    print("|---|---|---|---|---|")
    for label, name, p50, p99, cpu in rows:
        print(f"| agent20k {label} | {name} | {p50:.2f} | {p99:.2f} | {'-' if cpu is None else f'{cpu:.2f}'} |")
    print()
    for label in ("non-streamed", "streamed"):
        direct, off, hit, slow_row = (r for r in rows if r[0] == label)
        overhead, added = off[2] - direct[2], hit[2] - direct[2]
        print(f"{label}: the gateway adds {overhead:+.2f} ms p50 with the cache off, a hit {added:+.2f} ms: "
              f"{added - overhead:+.2f} ms over the normal overhead (target <= +1 ms); a hit answers in "
              f"{hit[2] / slow_row[2]:.4f} of the slow upstream's time; gateway CPU {hit[4]:.2f} ms/req on a hit, "
              f"{off[4]:.2f} with the cache off")


if __name__ == "__main__":
    main()
