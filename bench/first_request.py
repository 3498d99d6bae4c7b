"""The first request after `prefixgate serve` starts: the captured Claude Code request (bench/fixtures/, sent as
Claude Code writes it, non-streamed) against bench/gateway.py's fake upstream, on a freshly started server.

For each start: the seconds from launch to a ready `/health` (warm start included), the first request's
latency over the direct path's p50 for the same request, the server's CPU time (user + system) over that
request, and the same for the second request (a session's next, its last tool output different). Each start
is its own process; `--base DIR` starts a checkout of another commit (e.g. `git archive main | tar -x -C DIR`)
from this venv, its packages mapped to DIR, alternating with this tree's, so the shared machine's load falls on
both alike. Medians at the end, with the load average.

    .venv/bin/python bench/first_request.py [--rounds 5] [--base DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gateway import (
    ANTHROPIC_HEADERS,
    LAUNCH,
    ROOT,
    Conn,
    build_request,
    cpu_seconds,
    free_port,
    sequential,
    start,
    stop,
    vary_tool_output,
    wait_ready,
)


def ready_after(port: int, proc: subprocess.Popen, launched: float, timeout: float = 120) -> float:
    import httpx

    while time.perf_counter() - launched < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return time.perf_counter() - launched
        except httpx.HTTPError:
            pass
        time.sleep(0.02)
    raise TimeoutError("server not ready")


async def timed(port: int, raw: bytes) -> tuple[float, float]:
    """One request on a new connection: its latency (ms) and the gateway's own x-prefixgate-overhead-ms."""
    conn = await Conn.open(port)
    started = time.perf_counter()
    assert await conn.request(raw) == 200
    took = (time.perf_counter() - started) * 1000
    conn.close()
    return took, conn.overheads[0]


def one_start(tree: Path, bodies: list[dict], up_port: int, tmp: Path, n: int) -> dict[str, float]:
    port = free_port()
    env = {"PREFIXGATE_ANTHROPIC_BASE_URL": f"http://127.0.0.1:{up_port}", "ANTHROPIC_API_KEY": "sk-ant-fake",
           "PREFIXGATE_LEDGER_PATH": str(tmp / f"ledger-{n}.sqlite")}
    headers = {"x-api-key": "caller", **ANTHROPIC_HEADERS}
    raws = [build_request(port, "/v1/messages", b, headers, compact=True) for b in bodies]
    launched = time.perf_counter()
    proc = start([sys.executable, "-c", LAUNCH, str(tree), "serve", "--port", str(port)], env, tmp / f"serve-{n}.log")
    try:
        out = {"start_s": ready_after(port, proc, launched)}
        time.sleep(0.5)  # let the start-up's last work (a collector pass, log flushes) settle
        for name, raw in (("first", raws[0]), ("second", raws[1])):
            cpu = cpu_seconds(proc.pid)
            out[f"{name}_ms"], out[f"{name}_own_ms"] = asyncio.run(timed(port, raw))
            out[f"{name}_cpu_ms"] = (cpu_seconds(proc.pid) - cpu) * 1000
        return out
    finally:
        stop([proc])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--base", type=Path, help="another checkout, started alternately with this one")
    args = parser.parse_args()
    body = json.loads((ROOT / "bench" / "fixtures" / "claude-code.json").read_text())
    bodies = [{**b, "model": "claude-sonnet-5-5", "stream": False} for b in vary_tool_output(body, 2)]
    tmp = Path(tempfile.mkdtemp(prefix="pg-first-"))
    up_port = free_port()
    upstream = start([sys.executable, str(ROOT / "bench" / "gateway.py"), "--upstream", str(up_port)], {},
                     tmp / "upstream.log")
    trees = {"this": ROOT, **({"base": args.base.resolve()} if args.base else {})}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    try:
        wait_ready(up_port, "/", 20)
        direct_raw = build_request(up_port, "/v1/messages", bodies[0], {"x-api-key": "sk-ant-fake", **ANTHROPIC_HEADERS},
                                   compact=True)
        loads = [os.getloadavg()[0]]
        direct = []
        for r in range(args.rounds):
            order = list(trees) if r % 2 == 0 else list(reversed(trees))
            for name in order:
                res = one_start(trees[name], bodies, up_port, tmp, len(direct) + r * 10 + len(results[name]))
                results[name].append(res)
                print(f"round {r} {name}: " + ", ".join(f"{k} {v:.1f}" for k, v in res.items()), flush=True)
            direct += asyncio.run(sequential(up_port, [direct_raw], 3, 20))
        loads.append(os.getloadavg()[0])
    finally:
        stop([upstream])
    p50 = statistics.median(direct)
    print(f"\ndirect p50 {p50:.2f} ms; load average {loads[0]:.1f} at the start, {loads[-1]:.1f} at the end")
    for name, rows in results.items():
        med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        print(f"{name} ({trees[name]}), medians of {len(rows)} starts: start {med['start_s']:.2f} s; first request "
              f"+{med['first_ms'] - p50:.1f} ms over direct (own {med['first_own_ms']:.1f} ms, {med['first_cpu_ms']:.0f} ms "
              f"CPU); second +{med['second_ms'] - p50:.1f} ms (own {med['second_own_ms']:.1f} ms, "
              f"{med['second_cpu_ms']:.0f} ms CPU)")


if __name__ == "__main__":
    main()
