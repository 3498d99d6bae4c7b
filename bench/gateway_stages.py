"""Where the gateway's own CPU time goes on an agent request, by stage, in process (no sockets).

The request path of `gateway/proxy.py` (parse, route, plan, encode, record the answer) runs on the bodies of
`bench/agent_request.py` (16 variants whose last user text differs, sent in turn after warm-ups), with the
process's CPU clock (`time.process_time`) around each stage; `--profile` adds a cProfile listing on the same
clock (functions by their own time). The gateway's garbage-collector setting (`gateway/collector.py`) applies
unless `--default-gc`. `bench/gateway.py` measures the same work end to end beside LiteLLM; this says which
part of it costs what.

    .venv/bin/python bench/gateway_stages.py [--tokens 20000] [--requests 300] [--profile] [--default-gc]
                                             [--volatile-system] [--captured claude-code]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import tempfile
import time
from collections.abc import Callable
from typing import Any

from agent_request import agent_body, variants

from prefixgate.config import Settings
from prefixgate.dialects import wire_format
from prefixgate.gateway import proxy as proxy_module
from prefixgate.gateway.accounting import Accounting
from prefixgate.gateway.auth import Caller
from prefixgate.gateway.collector import collect_less
from prefixgate.gateway.proxy import Proxy
from prefixgate.gateway.upstream import UpstreamResponse
from prefixgate.policies import load_policy

ANSWER = json.dumps({
    "id": "msg_bench", "type": "message", "role": "assistant", "model": "claude-sonnet-5-5",
    "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "stop_sequence": None,
    "usage": {"input_tokens": 12, "cache_read_input_tokens": 19000, "cache_creation_input_tokens": 40, "output_tokens": 2},
}).encode()
HEADERS = {"x-api-key": "caller", "anthropic-version": "2023-06-01"}


class Stages:
    """CPU seconds spent inside each wrapped function, by stage name."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}

    def timed(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.spent[name] = self.spent.get(name, 0.0) + time.process_time() - start
        return wrapper


async def _nothing() -> None:
    return None


async def run(args: argparse.Namespace) -> None:
    os.environ.setdefault("ANTHROPIC_API_KEY", "sk-ant-bench")
    os.environ["PREFIXGATE_LEDGER_PATH"] = os.path.join(tempfile.mkdtemp(prefix="pg-stages-"), "ledger.sqlite")
    if not args.default_gc:
        collect_less()
    settings = Settings()
    proxy = Proxy(settings, load_policy(settings))
    wire = wire_format("anthropic")
    stages = Stages()
    parse = stages.timed("parse (JSON + IR)", wire.parser_for("/v1/messages"))
    proxy_module.plan = stages.timed("plan", proxy_module.plan)
    wire.encode_request = stages.timed("encode (IR -> dict)", wire.encode_request)
    proxy_module.resent.encode = stages.timed("JSON encode", proxy_module.resent.encode)
    Accounting.record = stages.timed("record (ledger, metrics, prefix shape)", Accounting.record)
    if args.captured:
        from gateway import ROOT, vary_tool_output  # the captured request, as bench/gateway.py sends it
        bodies = vary_tool_output(json.loads((ROOT / "bench" / "fixtures" / f"{args.captured}.json").read_text()), 16)
        bodies = [{**b, "stream": False} for b in bodies]
    else:
        bodies = variants(agent_body(args.tokens), 64 if args.volatile_system else 16)
    if args.volatile_system:
        # A time and a request id at the top of the system prompt, new on every request (the planner moves them).
        bodies = [{**b, "system": [{"type": "text", "text": f"Current time: 2026-11-24T07:{i // 60:02d}:{i % 60:02d}Z. "
                                                            f"Request id req_{i:08x}."}, *b["system"]]}
                  for i, b in enumerate(bodies)]
    # The captured request as its client writes it (compact, raw UTF-8), as bench/gateway.py sends it.
    spelling = {"ensure_ascii": False, "separators": (",", ":")} if args.captured else {}
    raws = [json.dumps({**b, "model": "claude-sonnet-5-5"}, **spelling).encode() for b in bodies]
    answer = UpstreamResponse(200, {}, ANSWER, None, _nothing)

    def one(i: int) -> None:
        started = time.perf_counter()
        call = proxy.start("anthropic", parse(raws[i % len(raws)]), Caller(None, "caller"), HEADERS, started)
        prep = proxy.prepare(call, call.route.targets[0])
        proxy.complete(call, prep, answer, time.perf_counter())

    for i in range(30):
        one(i)
    stages.spent.clear()
    profile = cProfile.Profile(time.process_time) if args.profile else None
    if profile:
        profile.enable()
    start = time.process_time()
    for i in range(args.requests):
        one(i)
    total = (time.process_time() - start) * 1000 / args.requests
    if profile:
        profile.disable()
    print(f"{args.captured or 'agent'} {args.tokens if not args.captured else ''} tokens ({len(raws[0]):,} bytes): {total:.2f} ms CPU per request, load {os.getloadavg()[0]:.2f}")
    for name, seconds in stages.spent.items():
        ms = seconds * 1000 / args.requests
        print(f"  {name}: {ms:.2f} ms ({ms / total:.0%})")
    print(f"  other (routing, answer, headers): {total - sum(stages.spent.values()) * 1000 / args.requests:.2f} ms")
    if profile:
        pstats.Stats(profile).sort_stats("tottime").print_stats(20)
    await proxy.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=20_000)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--captured", choices=["claude-code"], help="the captured Claude Code request instead")
    parser.add_argument("--default-gc", action="store_true", help="keep CPython's collector thresholds")
    parser.add_argument("--volatile-system", action="store_true",
                        help="a time and request id at the top of the system prompt, new on every request")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
