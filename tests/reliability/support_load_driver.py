"""An asyncio load driver: N connections, each streaming one request after another through the gateway
until a deadline, then finishing its current stream; loopback only, bounded in time and count."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field

import aiohttp

BODY = {"model": "gpt-5.4-mini", "stream": True, "stream_options": {"include_usage": True},
        "messages": [{"role": "system", "content": "You are a courier's support agent. Be brief. " * 30},
                     {"role": "user", "content": "Where is my parcel?"}]}


@dataclass
class LoadResult:
    connections: int
    seconds: float
    completed: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    latencies_ms: list[float] = field(default_factory=list)
    ttft_ms: list[float] = field(default_factory=list)
    # Most streams open at once: counted from response headers to the stream's end.
    peak_open: int = 0

    def error(self, what: str) -> None:
        self.errors[what] = self.errors.get(what, 0) + 1

    def summary(self) -> dict:
        def pct(values: list[float], p: float) -> float:
            ordered = sorted(values)
            return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))], 1) if ordered else 0.0
        return {"connections": self.connections, "seconds": round(self.seconds, 1), "completed": self.completed,
                "errors": sum(self.errors.values()), "error_kinds": self.errors,
                "streams_per_s": round(self.completed / self.seconds, 1) if self.seconds else 0.0,
                "p50_ms": pct(self.latencies_ms, 0.5), "p99_ms": pct(self.latencies_ms, 0.99),
                "ttft_p50_ms": pct(self.ttft_ms, 0.5), "ttft_p99_ms": pct(self.ttft_ms, 0.99),
                "peak_open_streams": self.peak_open}


async def run_load(url: str, connections: int, duration_s: float, max_requests: int = 1_000_000) -> LoadResult:
    result = LoadResult(connections, 0.0)
    deadline = time.monotonic() + duration_s
    open_now = 0
    budget = [max_requests]
    payload = json.dumps(BODY).encode()
    connector = aiohttp.TCPConnector(limit=connections, force_close=False)
    timeout = aiohttp.ClientTimeout(total=120, sock_read=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        async def worker() -> None:
            nonlocal open_now
            while time.monotonic() < deadline and budget[0] > 0:
                budget[0] -= 1
                started = time.perf_counter()
                first = None
                opened = False
                try:
                    async with session.post(url + "/v1/chat/completions", data=payload,
                                            headers={"content-type": "application/json",
                                                     "authorization": "Bearer load"}) as resp:
                        # Open means the gateway answered: a stream counts from its response headers,
                        # so a refused or unanswered connection never counts.
                        opened = True
                        open_now += 1
                        result.peak_open = max(result.peak_open, open_now)
                        if resp.status != 200:
                            result.error(f"status {resp.status}")
                            await resp.read()
                            continue
                        tail = b""
                        async for chunk in resp.content.iter_any():
                            if first is None:
                                first = time.perf_counter()
                            tail = (tail + chunk)[-64:]
                        if b"[DONE]" not in tail:
                            result.error("stream ended without [DONE]")
                            continue
                except (aiohttp.ClientError, TimeoutError) as e:
                    result.error(type(e).__name__)
                    continue
                finally:
                    if opened:
                        open_now -= 1
                result.completed += 1
                result.latencies_ms.append((time.perf_counter() - started) * 1000)
                result.ttft_ms.append(((first or time.perf_counter()) - started) * 1000)

        started = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(connections)))
        result.seconds = time.monotonic() - started
    return result
