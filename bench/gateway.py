"""Gateway overhead, side by side: direct to a fake upstream, through prefixgate, through LiteLLM's proxy.

Same fake upstream (OpenAI and Anthropic paths, JSON and SSE) for all three, one server worker each, on
this machine, for each workload:
  - chat2k: an OpenAI chat request with a ~2,000-token prompt;
  - agent20k / agent100k: a coding agent's Anthropic Messages request (bench/agent_request.py: system
    blocks, 12 tools with JSON schemas, a long tool-calling history; ~20k and ~100k tokens), whose last user
    text changes from one request to the next as an agent session's does; streamed and not;
  - claude-code / codex: the requests captured from Claude Code (Anthropic Messages) and the Codex CLI
    (OpenAI Responses) through the gateway (bench/capture_clients.py, bench/fixtures/), whose last tool output
    changes from one request to the next; streamed and not;
and for each: added latency p50/p99 at concurrency 1 (sequential requests after discarded warm-ups, one
keep-alive connection per system, the systems taking turns in blocks of --block requests, each turn after a
--settle-ms pause and one unmeasured request, so that the shared machine's load falls on all alike and no
system's after-answer work lands in another's figures), requests/s at concurrency 32 (32 keep-alive connections for --seconds, one system
after another), and CPU time per request of the server process (its user+system time over the phase /
requests; the direct row's c=1 figure also counts the upstream's work for the other two). The first request
after each server's start (the first workload's first body) is reported on its own (against the direct
path's p50 for the same request).

The load generator is a lean asyncio HTTP/1.1 client (pre-built request bytes), so it costs the shared
CPU little. LiteLLM 1.106.2 runs from .venv-litellm (see shared/reference/litellm-peer.md); without
that venv its column is skipped with a message.

    .venv/bin/python bench/gateway.py [--workloads chat2k agent20k agent100k claude-code codex] [--stream both|off|on]
                                      [--seconds 10] [--requests 500] [--agent-requests 100] [--json out.json]
                                      [--block 10] [--settle-ms 25] [--no-litellm] [--base DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
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
from dataclasses import dataclass
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
LITELLM = ROOT / ".venv-litellm" / "bin" / "litellm"
# `prefixgate serve` with the editable install's packages mapped to another checkout (argv[1]): `--base` here and
# in bench/first_request.py (a checkout made with e.g. `git archive main | tar -x -C DIR`).
LAUNCH = """
import os
import sys
root = sys.argv.pop(1)
# `-c` puts the working directory first on sys.path: from this checkout's root, `import prefixgate` would find this
# tree's core there before the mapping below could send it to the other checkout (only its components moved).
sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]
finder = next(m for n, m in sys.modules.items() if n.startswith("__editable___prefixgate"))
here = finder.MAPPING["prefixgate"].rsplit("/", 1)[0]
moved = {k: root + v[len(here):] for k, v in finder.MAPPING.items()}
finder.MAPPING.clear()      # a package that is no top-level folder there (an older layout) is found in prefixgate/
finder.MAPPING.update({k: v for k, v in moved.items() if os.path.isdir(v)})
from prefixgate.cli import main
sys.argv[0] = "prefixgate"
main()
"""
SENTENCE = "The quarterly report covers revenue, churn, support tickets and the roadmap for each region. "


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- the fake upstream ----------------------------------------------------------------------------

def _json(data: dict) -> bytes:
    """As the providers write it: compact (a gateway matching `"type":"response.created"` finds it, as on the wire)."""
    return json.dumps(data, separators=(",", ":")).encode()


def _sse(events: list[tuple[str, dict]]) -> bytes:
    return b"".join(b"event: %s\ndata: %s\n\n" % (name.encode(), _json(data)) for name, data in events)


def _responses_bodies(store: bool) -> tuple[bytes, bytes]:
    """A Responses answer, whole and streamed, echoing the request's `store` as OpenAI does (Codex sends false: its
    answers are not kept, so a gateway records no stored id for them)."""
    response = {"id": "resp_bench", "object": "response", "created_at": 0, "status": "completed", "model": "gpt-5.1",
                "store": store,
                "output": [{"type": "message", "id": "msg_bench", "status": "completed", "role": "assistant",
                            "content": [{"type": "output_text", "text": "ok", "annotations": []}]}],
                "usage": {"input_tokens": 9000, "input_tokens_details": {"cached_tokens": 8960}, "output_tokens": 2,
                          "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 9002}}
    return _json(response), _sse([
        ("response.created", {"type": "response.created", "sequence_number": 0,
                              "response": {**response, "status": "in_progress", "output": [], "usage": None}}),
        ("response.output_text.delta", {"type": "response.output_text.delta", "sequence_number": 1,
                                        "item_id": "msg_bench", "output_index": 0, "content_index": 0, "delta": "ok"}),
        ("response.completed", {"type": "response.completed", "sequence_number": 2, "response": response}),
    ])


def upstream_app():
    """A raw ASGI upstream: OpenAI chat and Anthropic messages, JSON or SSE, fixed answers with cached usage.

    It reads the body but does not parse it (a 400 KB body would cost the upstream more than the gateway
    under test); `"stream":true` is found by a byte search in either spacing."""
    chat = _json({
        "id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": "gpt-4o",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 2010, "completion_tokens": 1, "total_tokens": 2011,
                  "prompt_tokens_details": {"cached_tokens": 1920}},
    })
    usage = {"input_tokens": 12, "cache_read_input_tokens": 19000, "cache_creation_input_tokens": 40, "output_tokens": 2}
    message = {"id": "msg_bench", "type": "message", "role": "assistant", "model": "claude-sonnet-5-5",
               "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "stop_sequence": None,
               "usage": usage}
    messages = _json(message)
    responses = {store: _responses_bodies(store) for store in (True, False)}
    messages_sse = _sse([
        ("message_start", {"type": "message_start", "message": {**message, "content": [], "stop_reason": None,
                                                                "usage": {**usage, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                           "usage": {"output_tokens": 2}}),
        ("message_stop", {"type": "message_stop"}),
    ])

    def head(body: bytes, kind: bytes) -> list[tuple[bytes, bytes]]:
        return [(b"content-type", kind), (b"content-length", str(len(body)).encode())]

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        chunks, more = [], True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        data = b"".join(chunks)
        streamed = b'"stream":true' in data or b'"stream": true' in data
        if scope["path"].endswith("/messages"):
            body, kind = (messages_sse, b"text/event-stream") if streamed else (messages, b"application/json")
        elif scope["path"].endswith("/responses"):
            whole, sse = responses[b'"store":false' not in data and b'"store": false' not in data]
            body, kind = (sse, b"text/event-stream") if streamed else (whole, b"application/json")
        else:
            body, kind = chat, b"application/json"
        await send({"type": "http.response.start", "status": 200, "headers": head(body, kind)})
        await send({"type": "http.response.body", "body": body})

    return app


def serve_upstream(port: int) -> None:
    import uvicorn

    uvicorn.run(upstream_app(), host="127.0.0.1", port=port, log_level="warning", access_log=False)


# ---- load generation ------------------------------------------------------------------------------

class Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.overheads: list[float] = []     # the gateway's own x-prefixgate-overhead-ms, when it sends one

    @classmethod
    async def open(cls, port: int) -> Conn:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def request(self, raw: bytes) -> int:
        self.writer.write(raw)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        lower = head.lower()
        if b"\r\nx-prefixgate-overhead-ms:" in lower:
            self.overheads.append(float(lower.split(b"\r\nx-prefixgate-overhead-ms:")[1].split(b"\r\n")[0]))
        if b"\r\ncontent-length:" in lower:   # at a line start: LiteLLM adds llm_provider-content-length
            n = int(lower.split(b"\r\ncontent-length:")[1].split(b"\r\n")[0])
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


def build_request(port: int, path: str, body: dict, headers: dict[str, str], compact: bool = False) -> bytes:
    """The request's bytes; `compact`: as Node clients (Claude Code, Codex) write JSON, no spaces, raw UTF-8."""
    data = (json.dumps(body, ensure_ascii=False, separators=(",", ":")) if compact else json.dumps(body)).encode()
    lines = [f"POST {path} HTTP/1.1", f"host: 127.0.0.1:{port}", "content-type: application/json",
             f"content-length: {len(data)}", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


async def sequential(port: int, raws: list[bytes], warmup: int, n: int) -> list[float]:
    """Latencies (ms) of `n` requests one after another, cycling through `raws`, after `warmup` unmeasured."""
    conn = await Conn.open(port)
    for i in range(warmup):
        assert await conn.request(raws[i % len(raws)]) == 200
    out = []
    for i in range(n):
        t = time.perf_counter()
        status = await conn.request(raws[i % len(raws)])
        out.append((time.perf_counter() - t) * 1000)
        assert status == 200, status
    conn.close()
    return out


async def concurrent(port: int, raws: list[bytes], clients: int, seconds: float) -> tuple[int, int]:
    conns = [await Conn.open(port) for _ in range(clients)]
    deadline = time.perf_counter() + seconds
    done = [0, 0]

    async def worker(conn: Conn, i: int) -> None:
        while time.perf_counter() < deadline:
            status = await conn.request(raws[i % len(raws)])
            done[0 if status == 200 else 1] += 1
            i += 1

    await asyncio.gather(*(worker(c, i) for i, c in enumerate(conns)))
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


@dataclass
class Workload:
    name: str
    dialect: str                  # "openai" (chat completions) or "anthropic" (messages)
    bodies: list[dict]            # request variants, sent in turn; "model" is set per system
    tokens: int
    stream: bool
    requests: int
    warmup: int
    compact: bool = False         # sent as its client writes it (the captured requests)

    @property
    def label(self) -> str:
        return f"{self.name} {'streamed' if self.stream else 'non-streamed'}"


PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages", "responses": "/v1/responses"}


def build_workloads(args) -> list[Workload]:
    from agent_request import agent_body, variants

    from prefixgate.tokens import count_tokens

    out = []
    for name in args.workloads:
        if name == "chat2k":
            system = SENTENCE * 125
            body = {"messages": [{"role": "system", "content": system}, {"role": "user", "content": "Summarise."}],
                    "max_tokens": 16}
            out.append(Workload(name, "openai", [body], count_tokens(system + "Summarise.", "o200k_base"), False,
                                args.requests, args.warmup))
            continue
        if name in CAPTURED:
            base = json.loads((ROOT / "bench" / "fixtures" / f"{name}.json").read_text())
            dialect, vary = CAPTURED[name]
        else:
            base, dialect, vary = agent_body({"agent20k": 20_000, "agent100k": 100_000}[name]), "anthropic", variants
        tokens = count_tokens(json.dumps(base), "cl100k_base")
        for stream in {"off": [False], "on": [True], "both": [False, True]}[args.stream]:
            bodies = [{**b, "stream": stream} for b in vary(base, 16)]
            out.append(Workload(name, dialect, bodies, tokens, stream, args.agent_requests, args.agent_warmup,
                                compact=name in CAPTURED))
    return out


def vary_tool_output(body: dict, n: int) -> list[dict]:
    """`n` copies of a captured agent request whose last tool output differs, as a session's next requests'
    newest turn does (Claude Code's last message is a tool_result, Codex's last input a function_call_output)."""
    out = []
    for i in range(n):
        b = copy.deepcopy(body)
        last = b["messages"][-1]["content"][-1] if "messages" in b else b["input"][-1]
        key = "content" if "messages" in b else "output"
        last[key] = f"{last[key]}\nrun {i}: 3 passed" if isinstance(last[key], str) else last[key] + [
            {"type": "text", "text": f"run {i}: 3 passed"}]
        out.append(b)
    return out


# Captured requests (bench/capture_clients.py): name -> (caller format, how a session's next request differs).
CAPTURED = {"claude-code": ("anthropic", vary_tool_output), "codex": ("responses", vary_tool_output)}


@dataclass
class System:
    name: str
    pid: int
    port: int
    models: dict[str, str]        # dialect -> model name this system routes to the fake upstream
    headers: dict[str, dict[str, str]]

    def requests(self, w: Workload) -> list[bytes]:
        return [build_request(self.port, PATHS[w.dialect], {**b, "model": self.models[w.dialect]},
                              self.headers[w.dialect], w.compact) for b in w.bodies]


def first_request(system: System, w: Workload) -> float:
    """Latency (ms) of the first model request a freshly started server answers."""
    return asyncio.run(sequential(system.port, system.requests(w)[:1], 0, 1))[0]


async def interleaved(systems: list[System], raws: dict[str, list[bytes]], n: int, block: int = 10,
                      settle_s: float = 0.025) -> dict[str, list[float]]:
    """Latencies (ms) of `n` requests per system, the systems taking turns in blocks of `block` requests (the
    order rotating each round), so a change in the machine's load falls on all of them alike. At each turn the
    client waits `settle_s` and sends one unmeasured request first: what the previous system does after its
    answers (LiteLLM's callbacks and spend logging, some ms of CPU) and its hold on the CPU caches are not
    counted against the next one. Within a block each system serves back to back, as it would alone."""
    conns = {s.name: await Conn.open(s.port) for s in systems}
    out: dict[str, list[float]] = {s.name: [] for s in systems}
    sent = {s.name: 0 for s in systems}
    for r in range(-(-n // block)):
        for k in range(len(systems)):
            s = systems[(r + k) % len(systems)]
            conn, mine = conns[s.name], raws[s.name]
            await asyncio.sleep(settle_s)
            assert await conn.request(mine[sent[s.name] % len(mine)]) == 200
            sent[s.name] += 1
            for _ in range(min(block, n - len(out[s.name]))):
                t = time.perf_counter()
                status = await conn.request(mine[sent[s.name] % len(mine)])
                out[s.name].append((time.perf_counter() - t) * 1000)
                sent[s.name] += 1
                assert status == 200, (s.name, status)
    for name, c in conns.items():
        c.close()
        if c.overheads:
            out[f"{name} own"] = c.overheads
    return out


def measure(systems: list[System], w: Workload, args) -> list[dict]:
    """c=1 for every system interleaved, then c=32 for each in turn; CPU per request of each server process."""
    raws = {s.name: s.requests(w) for s in systems}
    for s in systems:
        asyncio.run(sequential(s.port, raws[s.name], w.warmup, 0))
    cpu0 = {s.name: cpu_seconds(s.pid) for s in systems}
    lat = asyncio.run(interleaved(systems, raws, w.requests, args.block, args.settle_ms / 1000))
    cpu1 = {s.name: cpu_seconds(s.pid) for s in systems}
    out = []
    for s in systems:
        before = cpu_seconds(s.pid)
        ok, bad = asyncio.run(concurrent(s.port, raws[s.name], 32, args.seconds))
        after = cpu_seconds(s.pid)
        result = {"name": s.name, "workload": w.label, "tokens": w.tokens, "p50_ms": pct(lat[s.name], 50),
                  "p99_ms": pct(lat[s.name], 99), "c1_cpu_ms": (cpu1[s.name] - cpu0[s.name]) * 1000 / w.requests,
                  "rps_c32": ok / args.seconds, "errors_c32": bad, "c32_cpu_ms": (after - before) * 1000 / max(ok, 1),
                  "own_overhead_p50_ms": pct(lat[f"{s.name} own"], 50) if f"{s.name} own" in lat else None}
        print(f"  {s.name}, {w.label}: p50 {result['p50_ms']:.2f} ms, p99 {result['p99_ms']:.2f} ms, "
              f"{result['rps_c32']:.0f} req/s at c=32, {result['c32_cpu_ms']:.2f} ms CPU/req"
              + (f", own overhead p50 {result['own_overhead_p50_ms']:.2f} ms" if result["own_overhead_p50_ms"] else ""),
              file=sys.stderr)
        out.append(result)
    return out


def start(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(cmd, env={**os.environ, **env}, stdout=log.open("w"), stderr=subprocess.STDOUT)


def stop(procs: list[subprocess.Popen]) -> None:
    """Stop the servers a run started, newest first."""
    for p in reversed(procs):
        p.terminate()
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()


def litellm_config(path: Path, upstream_port: int) -> None:
    path.write_text(
        "model_list:\n  - model_name: fake-openai\n    litellm_params:\n      model: openai/gpt-4o\n"
        f"      api_base: http://127.0.0.1:{upstream_port}/v1\n      api_key: sk-fake-openai\n"
        "  - model_name: fake-claude\n    litellm_params:\n      model: anthropic/claude-sonnet-5-5\n"
        f"      api_base: http://127.0.0.1:{upstream_port}\n      api_key: sk-ant-fake\n"
        # LiteLLM's own caching feature, as its users turn it on: "system + last message" markers.
        "      cache_control_injection_points:\n        - location: message\n          role: system\n"
        "        - location: message\n          index: -1\n"
        "litellm_settings:\n  drop_params: true\ngeneral_settings: {}\n")


LITELLM_ENV = {
    "LITELLM_OFFLINE_MODE": "true", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True",
    "LITELLM_LOCAL_BLOG_POSTS": "True", "LITELLM_LOCAL_POLICY_TEMPLATES": "true", "LITELLM_LOCAL_AUTOROUTER_PRESETS": "True",
    "LITELLM_DISABLE_LATEST_RELEASE_CHECK": "true", "DISABLE_ADMIN_UI": "True", "DISABLE_SCHEMA_UPDATE": "True",
    "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "DO_NOT_TRACK": "1", "OTEL_SDK_DISABLED": "true",
    "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
}


ANTHROPIC_HEADERS = {"anthropic-version": "2023-06-01"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", nargs="+", default=["chat2k", "agent20k", "agent100k"],
                        choices=["chat2k", "agent20k", "agent100k", *CAPTURED])
    parser.add_argument("--stream", default="both", choices=["both", "off", "on"], help="agent workloads")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each c=32 phase")
    parser.add_argument("--requests", type=int, default=500, help="sequential requests, chat2k")
    parser.add_argument("--warmup", type=int, default=100, help="discarded warm-ups, chat2k")
    parser.add_argument("--agent-requests", type=int, default=100, help="sequential requests, agent workloads")
    parser.add_argument("--agent-warmup", type=int, default=20, help="discarded warm-ups, agent workloads")
    parser.add_argument("--block", type=int, default=10, help="c=1: requests per system's turn")
    parser.add_argument("--settle-ms", type=float, default=25.0,
                        help="c=1: pause before each turn (what the previous system does after answering falls in it)")
    parser.add_argument("--json", default="")
    parser.add_argument("--no-litellm", action="store_true", help="skip the LiteLLM column")
    parser.add_argument("--base", type=Path, help="another checkout, served beside this one as 'prefixgate base' "
                        "(taking turns with it: an A/B on the same load)")
    parser.add_argument("--upstream", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.upstream:
        serve_upstream(args.upstream)
        return

    workloads = build_workloads(args)
    tmp = Path(tempfile.mkdtemp(prefix="pg-bench-"))
    procs: list[subprocess.Popen] = []
    systems: list[System] = []
    results: list[dict] = []
    firsts: dict[str, float] = {}
    real_models = {"openai": "gpt-4o", "anthropic": "claude-sonnet-5-5", "responses": "gpt-5.1"}

    def run(system: System) -> None:
        """A started server: its first request on its own, then it joins the systems measured together."""
        if system.name != "direct":
            firsts[system.name] = first_request(system, workloads[0])
        systems.append(system)

    try:
        up_port = free_port()
        procs.append(start([sys.executable, __file__, "--upstream", str(up_port)], {}, tmp / "upstream.log"))
        wait_ready(up_port, "/", 20)
        print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()}", file=sys.stderr)
        run(System("direct", procs[0].pid, up_port, real_models,
                   {"openai": {"authorization": "Bearer sk-fake-openai"}, "responses": {"authorization": "Bearer sk-fake-openai"},
                    "anthropic": {"x-api-key": "sk-ant-fake", **ANTHROPIC_HEADERS}}))

        pg_env = {"PREFIXGATE_OPENAI_BASE_URL": f"http://127.0.0.1:{up_port}", "OPENAI_API_KEY": "sk-fake-openai",
                  "PREFIXGATE_ANTHROPIC_BASE_URL": f"http://127.0.0.1:{up_port}", "ANTHROPIC_API_KEY": "sk-ant-fake"}
        trees = {"prefixgate": None, **({"prefixgate base": args.base.resolve()} if args.base else {})}
        for name, tree in trees.items():
            pg_port = free_port()
            launch = [sys.executable, "-c", LAUNCH, str(tree)] if tree else [str(ROOT / ".venv" / "bin" / "prefixgate")]
            procs.append(start([*launch, "serve", "--port", str(pg_port)],
                               {**pg_env, "PREFIXGATE_LEDGER_PATH": str(tmp / f"ledger-{len(procs)}.sqlite")},
                               tmp / f"prefixgate-{len(procs)}.log"))
            wait_ready(pg_port, "/health", 60)
            run(System(name, procs[-1].pid, pg_port, real_models,
                       {"openai": {"authorization": "Bearer caller"}, "responses": {"authorization": "Bearer caller"},
                        "anthropic": {"x-api-key": "caller", **ANTHROPIC_HEADERS}}))

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
            auth = {"authorization": f"Bearer {key}"}
            run(System("litellm", procs[-1].pid, ll_port,
                       {"openai": "fake-openai", "responses": "fake-openai", "anthropic": "fake-claude"},
                       {"openai": auth, "responses": auth, "anthropic": {**auth, **ANTHROPIC_HEADERS}}))
        else:
            print(f"LiteLLM column skipped: {LITELLM} not found. Install it with\n  python3.11 -m venv .venv-litellm && "
                  ".venv-litellm/bin/pip install 'litellm[proxy]==1.106.2'", file=sys.stderr)
        loads = [os.getloadavg()[0]]
        for w in workloads:
            results.extend(measure(systems, w, args))
        loads.append(os.getloadavg()[0])
    finally:
        stop(procs)

    print(f"\nload average (1 min) {loads[0]:.1f} at the start of the measured phases, {loads[1]:.1f} at their end")
    print(f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; c=1: {args.requests} sequential "
          f"requests (chat2k), {args.agent_requests} (agent); c=32: {args.seconds:g} s each\n")
    print("| workload | path | p50 ms | p99 ms | added p50 ms | added p99 ms | req/s c=32 | CPU ms/req (c=1 / c=32) |")
    print("|---|---|---|---|---|---|---|---|")
    for w in workloads:
        rows = [r for r in results if r["workload"] == w.label]
        base = rows[0]
        for r in rows:
            added = "- | -" if r is base else f"+{r['p50_ms'] - base['p50_ms']:.2f} | +{r['p99_ms'] - base['p99_ms']:.2f}"
            print(f"| {w.label} ({w.tokens // 1000}k tok) | {r['name']} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {added} | "
                  f"{r['rps_c32']:.0f} | {r['c1_cpu_ms']:.2f} / {r['c32_cpu_ms']:.2f} |")
    direct_first = next(r["p50_ms"] for r in results if r["name"] == "direct" and r["workload"] == workloads[0].label)
    for name, ms in firsts.items():
        print(f"\nfirst request after start, {name}: {ms:.1f} ms ({ms - direct_first:+.1f} ms over the direct p50 of "
              f"{workloads[0].label})")
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "first_request_ms": firsts}, indent=2))


if __name__ == "__main__":
    main()
