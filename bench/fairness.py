"""Fair under big bodies: how long `/health` waits while one huge request is handled.

Starts the fake upstream of bench/gateway.py and a real `prefixgate serve` in front of it, sends one
Anthropic Messages body of `--messages` short messages (200,000: 6.8 MB, the issue's case) and, while it
is in flight and for half a second after its answer (the gateway records and frees it then), asks `/health` every
`--every-ms` on its own keep-alive connection. Prints the big request's
status and latency and the `/health` latencies seen during it (p50, p99, max), for `--runs` big requests:
the first parses the body cold, the next ones resend it (the resent-body memo's case). With `--default-limits`
the gateway keeps its default message limit, so the big body is refused (413) instead of handled.

    .venv/bin/python bench/fairness.py [--messages 200000] [--runs 2] [--every-ms 10] [--default-limits]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gateway import ROOT, Conn, build_request, free_port, pct, start, stop, wait_ready


def big_body(messages: int) -> dict:
    """`messages` short turns, alternating user and assistant, ending on the user's (34 bytes each)."""
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"n{i}"} for i in range(messages - 1)]
    turns.append({"role": "user", "content": "Summarise the notes."})
    return {"model": "claude-sonnet-5-5", "max_tokens": 16, "messages": turns}


async def health_probe(port: int, every_s: float, stop_at: asyncio.Event, sent_at: list[float] | None = None,
                       slow_ms: float = 0.0) -> list[float]:
    """`/health` latencies (ms), one request every `every_s` (or as soon as the last answered) until `stop_at`.
    With `slow_ms`, each answer slower than that is printed with when it was asked, in ms after `sent_at[0]`."""
    conn = await Conn.open(port)
    raw = f"GET /health HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n\r\n".encode()
    out = []
    while not stop_at.is_set():
        t = time.perf_counter()
        assert await conn.request(raw) == 200
        out.append((time.perf_counter() - t) * 1000)
        if slow_ms and out[-1] > slow_ms and sent_at:
            print(f"    slow /health: {out[-1]:.0f} ms, asked {(t - sent_at[0]) * 1000:.0f} ms after the big request",
                  file=sys.stderr)
        await asyncio.sleep(max(0.0, every_s - out[-1] / 1000))
    conn.close()
    return out


async def idle(port: int, every_s: float, seconds: float) -> list[float]:
    """`/health` latencies with nothing else in flight: the machine's own noise."""
    done = asyncio.Event()
    asyncio.get_running_loop().call_later(seconds, done.set)
    return await health_probe(port, every_s, done)


async def one_run(port: int, raw: bytes, every_s: float, slow_ms: float) -> tuple[int, float, list[float]]:
    done, sent_at = asyncio.Event(), []
    probe = asyncio.create_task(health_probe(port, every_s, done, sent_at, slow_ms))
    await asyncio.sleep(0.2)     # the probe's connection is open and answering before the big body goes out
    conn = await Conn.open(port)
    t = time.perf_counter()
    sent_at.append(t)
    status = await conn.request(raw)
    took = (time.perf_counter() - t) * 1000
    conn.close()
    # The gateway's work on the body goes on after its answer (recording it, freeing it): keep asking a while.
    await asyncio.sleep(AFTER_S)
    done.set()
    if slow_ms:
        print(f"    (the big request's answer came {took:.0f} ms after it was sent)", file=sys.stderr)
    return status, took, await probe


AFTER_S = 0.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--every-ms", type=float, default=10.0)
    parser.add_argument("--slow-ms", type=float, default=0.0, help="print when each /health slower than this was asked")
    parser.add_argument("--default-limits", action="store_true", help="keep the gateway's default message limit")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="pg-fair-"))
    procs: list[subprocess.Popen] = []
    body = big_body(args.messages)
    data = json.dumps(body, separators=(",", ":"))
    try:
        up_port, pg_port = free_port(), free_port()
        procs.append(start([sys.executable, str(ROOT / "bench" / "gateway.py"), "--upstream", str(up_port)], {},
                           tmp / "upstream.log"))
        wait_ready(up_port, "/", 20)
        env = {"PREFIXGATE_ANTHROPIC_BASE_URL": f"http://127.0.0.1:{up_port}", "ANTHROPIC_API_KEY": "sk-ant-fake",
               "PREFIXGATE_LEDGER_PATH": str(tmp / "ledger.sqlite")}
        if not args.default_limits:
            env["PREFIXGATE_MAX_MESSAGES"] = str(args.messages + 10)
        procs.append(start([str(ROOT / ".venv" / "bin" / "prefixgate"), "serve", "--port", str(pg_port)], env,
                           tmp / "prefixgate.log"))
        wait_ready(pg_port, "/health", 60)
        raw = build_request(pg_port, "/v1/messages", body, {"x-api-key": "caller", "anthropic-version": "2023-06-01"})
        print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; body: {args.messages} messages, "
              f"{len(data) / 1e6:.1f} MB", file=sys.stderr)
        rows = [("idle (nothing else in flight)", "-", 0.0, asyncio.run(idle(pg_port, args.every_ms / 1000, 2.0)))]
        for run in range(args.runs):
            status, took, health = asyncio.run(one_run(pg_port, raw, args.every_ms / 1000, args.slow_ms))
            rows.append((f"big request {run + 1} ({'cold' if run == 0 else 'resent'})", status, took, health))
            print(f"  run {run + 1}: big request {status} in {took:.0f} ms; /health x{len(health)}: "
                  f"p50 {pct(health, 50):.1f} ms, max {max(health):.1f} ms", file=sys.stderr)
    finally:
        stop(procs)
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end\n")
    print("| while | big request | its latency ms | /health answers | /health p50 ms | /health p99 ms | /health max ms |")
    print("|---|---|---|---|---|---|---|")
    for run, status, took, health in rows:
        print(f"| {run} | {status} | {took:.0f} | {len(health)} | {pct(health, 50):.1f} | {pct(health, 99):.1f} | "
              f"{max(health):.1f} |")


if __name__ == "__main__":
    main()
