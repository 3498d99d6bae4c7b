"""Gateway overhead, side by side: direct to a fake upstream, through prefixgate, through LiteLLM's proxy.

Same fake OpenAI upstream for all three, one server worker each, on this machine:
  - added latency p50/p99 at concurrency 1 with a ~2,000-token prompt (500 sequential requests after 100
    discarded warm-ups, over one keep-alive connection);
  - requests/s at concurrency 32 (32 keep-alive connections for --seconds);
  - CPU time per request of the server process (its user+system time over the phase / requests).

The load generator is a lean asyncio HTTP/1.1 client (pre-built request bytes), so it costs the shared
CPU little. LiteLLM 1.106.2 runs from .venv-litellm (see shared/reference/litellm-peer.md); without
that venv its column is skipped with a message.

    .venv/bin/python bench/gateway.py [--seconds 10] [--requests 500] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
LITELLM = ROOT / ".venv-litellm" / "bin" / "litellm"
SENTENCE = "The quarterly report covers revenue, churn, support tickets and the roadmap for each region. "


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- the fake upstream ----------------------------------------------------------------------------

def upstream_app():
    """A raw ASGI OpenAI chat endpoint: reads the body, answers a fixed completion with cached usage."""
    body = json.dumps({
        "id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": "gpt-4o",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 2010, "completion_tokens": 1, "total_tokens": 2011,
                  "prompt_tokens_details": {"cached_tokens": 1920}},
    }).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        more = True
        while more:
            more = (await receive()).get("more_body", False)
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


def serve_upstream(port: int) -> None:
    import uvicorn

    uvicorn.run(upstream_app(), host="127.0.0.1", port=port, log_level="warning", access_log=False)


# ---- load generation ------------------------------------------------------------------------------

class Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Conn:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def request(self, raw: bytes) -> int:
        self.writer.write(raw)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        lower = head.lower()
        if b"content-length:" in lower:
            n = int(lower.split(b"content-length:")[1].split(b"\r\n")[0])
            await self.reader.readexactly(n)
        else:   # chunked
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).strip(), 16)
                await self.reader.readexactly(size + 2)
                if size == 0:
                    break
        return status

    def close(self) -> None:
        self.writer.close()


def build_request(port: int, path: str, body: dict, headers: dict[str, str]) -> bytes:
    data = json.dumps(body).encode()
    lines = [f"POST {path} HTTP/1.1", f"host: 127.0.0.1:{port}", "content-type: application/json",
             f"content-length: {len(data)}", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


async def sequential(port: int, raw: bytes, warmup: int, n: int) -> list[float]:
    conn = await Conn.open(port)
    for _ in range(warmup):
        assert await conn.request(raw) == 200
    out = []
    for _ in range(n):
        t = time.perf_counter()
        status = await conn.request(raw)
        out.append((time.perf_counter() - t) * 1000)
        assert status == 200, status
    conn.close()
    return out


async def concurrent(port: int, raw: bytes, clients: int, seconds: float) -> tuple[int, int]:
    conns = [await Conn.open(port) for _ in range(clients)]
    deadline = time.perf_counter() + seconds
    done = [0, 0]

    async def worker(conn: Conn) -> None:
        while time.perf_counter() < deadline:
            status = await conn.request(raw)
            done[0 if status == 200 else 1] += 1

    await asyncio.gather(*(worker(c) for c in conns))
    for c in conns:
        c.close()
    return done[0], done[1]


def cpu_seconds(pid: int) -> float:
    proc = psutil.Process(pid)
    procs = [proc, *proc.children(recursive=True)]
    return sum(p.cpu_times().user + p.cpu_times().system for p in procs)


def wait_ready(port: int, path: str, timeout: float, headers: dict[str, str] | None = None) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}{path}", headers=headers, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"server on port {port} not ready after {timeout:.0f} s")


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] if len(values) > 1 else values[0]


def measure(name: str, pid: int, port: int, raw: bytes, args) -> dict:
    asyncio.run(sequential(port, raw, args.warmup, 0))
    cpu0 = cpu_seconds(pid)
    lat = asyncio.run(sequential(port, raw, 0, args.requests))
    cpu1 = cpu_seconds(pid)
    ok, bad = asyncio.run(concurrent(port, raw, 32, args.seconds))
    cpu2 = cpu_seconds(pid)
    result = {"name": name, "p50_ms": pct(lat, 50), "p99_ms": pct(lat, 99), "c1_cpu_ms": (cpu1 - cpu0) * 1000 / len(lat),
              "rps_c32": ok / args.seconds, "errors_c32": bad, "c32_cpu_ms": (cpu2 - cpu1) * 1000 / max(ok, 1)}
    print(f"  {name}: p50 {result['p50_ms']:.2f} ms, p99 {result['p99_ms']:.2f} ms, {result['rps_c32']:.0f} req/s at c=32, "
          f"{result['c32_cpu_ms']:.2f} ms CPU/req", file=sys.stderr)
    return result


def start(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(cmd, env={**os.environ, **env}, stdout=log.open("w"), stderr=subprocess.STDOUT)


def litellm_config(path: Path, upstream_port: int) -> None:
    path.write_text(
        "model_list:\n  - model_name: fake-openai\n    litellm_params:\n      model: openai/gpt-4o\n"
        f"      api_base: http://127.0.0.1:{upstream_port}/v1\n      api_key: sk-fake-openai\n"
        "litellm_settings:\n  drop_params: true\ngeneral_settings: {}\n")


LITELLM_ENV = {
    "LITELLM_OFFLINE_MODE": "true", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True",
    "LITELLM_LOCAL_BLOG_POSTS": "True", "LITELLM_LOCAL_POLICY_TEMPLATES": "true", "LITELLM_LOCAL_AUTOROUTER_PRESETS": "True",
    "LITELLM_DISABLE_LATEST_RELEASE_CHECK": "true", "DISABLE_ADMIN_UI": "True", "DISABLE_SCHEMA_UPDATE": "True",
    "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "DO_NOT_TRACK": "1", "OTEL_SDK_DISABLED": "true",
    "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--json", default="")
    parser.add_argument("--no-litellm", action="store_true", help="skip the LiteLLM column")
    parser.add_argument("--upstream", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.upstream:
        serve_upstream(args.upstream)
        return

    from prefixgate.tokens import count_tokens

    system = SENTENCE * 125
    body = {"messages": [{"role": "system", "content": system}, {"role": "user", "content": "Summarise."}], "max_tokens": 16}
    tokens = count_tokens(system + "Summarise.", "o200k_base")
    tmp = Path(tempfile.mkdtemp(prefix="pg-bench-"))
    procs: list[subprocess.Popen] = []
    results = []
    try:
        up_port = free_port()
        procs.append(start([sys.executable, __file__, "--upstream", str(up_port)], {}, tmp / "upstream.log"))
        wait_ready(up_port, "/", 20)
        print(f"prompt: {tokens} tokens (o200k); machine: {os.cpu_count()} CPUs, load {os.getloadavg()}", file=sys.stderr)
        direct = build_request(up_port, "/v1/chat/completions", {"model": "gpt-4o", **body},
                               {"authorization": "Bearer sk-fake-openai"})
        results.append(measure("direct", procs[0].pid, up_port, direct, args))

        pg_port = free_port()
        pg_env = {"PREFIXGATE_OPENAI_BASE_URL": f"http://127.0.0.1:{up_port}", "OPENAI_API_KEY": "sk-fake-openai",
                  "PREFIXGATE_LEDGER_PATH": str(tmp / "ledger.sqlite")}
        procs.append(start([str(ROOT / ".venv" / "bin" / "prefixgate"), "serve", "--port", str(pg_port)], pg_env,
                           tmp / "prefixgate.log"))
        wait_ready(pg_port, "/health", 60)
        raw = build_request(pg_port, "/v1/chat/completions", {"model": "gpt-4o", **body}, {"authorization": "Bearer caller"})
        results.append(measure("prefixgate", procs[-1].pid, pg_port, raw, args))

        if args.no_litellm:
            pass
        elif LITELLM.exists():
            ll_port = free_port()
            key = "sk-" + secrets.token_hex(32)
            litellm_config(tmp / "litellm.yaml", up_port)
            procs.append(start([str(LITELLM), "--config", str(tmp / "litellm.yaml"), "--host", "127.0.0.1", "--port",
                                str(ll_port), "--num_workers", "1"], {**LITELLM_ENV, "LITELLM_MASTER_KEY": key},
                               tmp / "litellm.log"))
            wait_ready(ll_port, "/health/liveliness", 180)
            raw = build_request(ll_port, "/v1/chat/completions", {"model": "fake-openai", **body},
                                {"authorization": f"Bearer {key}"})
            results.append(measure("litellm", procs[-1].pid, ll_port, raw, args))
        else:
            print(f"LiteLLM column skipped: {LITELLM} not found. Install it with\n  python3.11 -m venv .venv-litellm && "
                  ".venv-litellm/bin/pip install 'litellm[proxy]==1.106.2'", file=sys.stderr)
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()

    base = results[0]
    print(f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; prompt {tokens} tokens; "
          f"c=1: {args.requests} requests; c=32: {args.seconds:g} s\n")
    print("| path | p50 ms | p99 ms | added p50 ms | added p99 ms | req/s c=32 | CPU ms/req (c=1 / c=32) |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        added = "" if r is base else f"+{r['p50_ms'] - base['p50_ms']:.2f} | +{r['p99_ms'] - base['p99_ms']:.2f}"
        print(f"| {r['name']} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {added or '- | -'} | {r['rps_c32']:.0f} | "
              f"{r['c1_cpu_ms']:.2f} / {r['c32_cpu_ms']:.2f} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"prompt_tokens": tokens, "results": results}, indent=2))


if __name__ == "__main__":
    main()
