"""Memory the gateway's reuse memos hold on many distinct large bodies: RSS with the memo on, over the same run
with it off.

For each caller format (OpenAI chat, Anthropic Messages, Gemini generateContent) and each bound in `--mb`
(0 turns request-path reuse off: the baseline), a fresh `prefixgate serve` receives `--bodies` distinct
bodies of `--messages` short messages each (the first message differs, so no body resends another), one
after another, against a fake upstream that answers without parsing. The figure is the server's RSS after
the run minus the RSS of the memo-off run of the same format, and the memo's own accounted bytes from
/metrics (`prefixgate_memo_bytes`). Done-when of issue 35: at the default bound (24 MB), the difference is
at most 1.5x the bound.

    .venv/bin/python bench/memo_memory.py [--formats openai anthropic gemini] [--mb 0 24] [--bodies 80]
                                          [--messages 25000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil

# bench/ is the script's folder, first on sys.path: `gateway` here is bench/gateway.py.
from gateway import ROOT, free_port, start, stop, wait_ready

CHAT = json.dumps({"id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": "gpt-4o",
                   "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 900000, "completion_tokens": 1, "total_tokens": 900001}}).encode()
MESSAGE = json.dumps({"id": "msg_bench", "type": "message", "role": "assistant", "model": "claude-sonnet-5-5",
                      "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "stop_sequence": None,
                      "usage": {"input_tokens": 900000, "output_tokens": 1}}).encode()
GENERATE = json.dumps({"candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP",
                                       "index": 0}],
                       "usageMetadata": {"promptTokenCount": 900000, "candidatesTokenCount": 1, "totalTokenCount": 900001},
                       "modelVersion": "gemini-3.8-flash"}).encode()


def upstream_app():
    """Fixed answers for the three formats, the body read but not parsed."""
    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        more = True
        while more:
            more = (await receive()).get("more_body", False)
        path = scope["path"]
        body = MESSAGE if path.endswith("/messages") else GENERATE if ":generateContent" in path else CHAT
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
    return app


def body_for(fmt: str, session: int, messages: int) -> tuple[str, dict[str, str], bytes]:
    """(path, headers, body): `messages` short messages, the first naming the session."""
    texts = [f"session {session}"] + [f"m{i} s{session % 100:02d}" for i in range(1, messages)]
    roles = ("user", "assistant")
    if fmt == "openai":
        body = {"model": "gpt-4o", "messages": [{"role": roles[i % 2], "content": t} for i, t in enumerate(texts)]}
        return "/v1/chat/completions", {"authorization": "Bearer caller"}, json.dumps(body).encode()
    if fmt == "anthropic":
        body = {"model": "claude-sonnet-5-5", "max_tokens": 16,
                "messages": [{"role": roles[i % 2], "content": t} for i, t in enumerate(texts)]}
        return "/v1/messages", {"x-api-key": "caller", "anthropic-version": "2023-06-01"}, json.dumps(body).encode()
    body = {"contents": [{"role": ("user", "model")[i % 2], "parts": [{"text": t}]} for i, t in enumerate(texts)]}
    return "/v1beta/models/gemini-3.8-flash:generateContent", {"x-goog-api-key": "caller"}, json.dumps(body).encode()


def post(port: int, path: str, headers: dict[str, str], body: bytes) -> int:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method="POST",
                                 headers={"content-type": "application/json", **headers})
    with urllib.request.urlopen(req, timeout=300) as resp:
        resp.read()
        return resp.status


def memo_figures(port: int) -> dict[str, float]:
    """`prefixgate_memo_bytes` and `_entries` summed over memos, from /metrics (absent before the reuse layer)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
        text = resp.read().decode()
    out = {"bytes": 0.0, "entries": 0.0, "evictions": 0.0}
    for line in text.splitlines():
        for name in out:
            if line.startswith(f"prefixgate_memo_{name}") and not line.startswith("#"):
                out[name] += float(line.rsplit(" ", 1)[1])
    return out


def run(fmt: str, mb: int, args: argparse.Namespace, up_port: int, tmp: Path) -> dict:
    port = free_port()
    env = {"PREFIXGATE_OPENAI_BASE_URL": f"http://127.0.0.1:{up_port}", "OPENAI_API_KEY": "sk-fake-openai",
           "PREFIXGATE_ANTHROPIC_BASE_URL": f"http://127.0.0.1:{up_port}", "ANTHROPIC_API_KEY": "sk-ant-fake",
           "PREFIXGATE_GEMINI_BASE_URL": f"http://127.0.0.1:{up_port}", "GEMINI_API_KEY": "fake-gemini",
           "PREFIXGATE_LEDGER_PATH": str(tmp / f"ledger-{fmt}-{mb}.sqlite"), "PREFIXGATE_RESENT_BODIES_MB": str(mb),
           "PREFIXGATE_MAX_BODY_MB": "64"}
    proc = start([str(ROOT / ".venv" / "bin" / "prefixgate"), "serve", "--port", str(port)], env,
                 tmp / f"prefixgate-{fmt}-{mb}.log")
    try:
        wait_ready(port, "/health", 60)
        rss = psutil.Process(proc.pid)
        begin, t0, size = rss.memory_info().rss, time.perf_counter(), 0
        for session in range(args.bodies):
            path, headers, body = body_for(fmt, session, args.messages)
            size = len(body)
            status = post(port, path, headers, body)
            if status != 200:
                raise RuntimeError(f"{fmt}: status {status}")
        end = rss.memory_info().rss
        return {"format": fmt, "mb": mb, "body_mb": size / 2**20, "rss_start_mb": begin / 2**20,
                "rss_end_mb": end / 2**20, "seconds": time.perf_counter() - t0, "memo": memo_figures(port)}
    finally:
        stop([proc])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--formats", nargs="+", default=["openai", "anthropic", "gemini"],
                        choices=["openai", "anthropic", "gemini"])
    parser.add_argument("--mb", nargs="+", type=int, default=[0, 24], help="bounds to run (0: memo off, the baseline)")
    parser.add_argument("--bodies", type=int, default=80)
    parser.add_argument("--messages", type=int, default=25_000)
    parser.add_argument("--json", default="")
    parser.add_argument("--upstream", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.upstream:
        import uvicorn

        uvicorn.run(upstream_app(), host="127.0.0.1", port=args.upstream, log_level="warning", access_log=False)
        return
    tmp = Path(tempfile.mkdtemp(prefix="pg-memo-"))
    up_port = free_port()
    upstream = start([sys.executable, __file__, "--upstream", str(up_port)], {}, tmp / "upstream.log")
    results = []
    try:
        wait_ready(up_port, "/", 20)
        print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()}", file=sys.stderr)
        for fmt in args.formats:
            for mb in sorted(set([0, *args.mb])):
                r = run(fmt, mb, args, up_port, tmp)
                print(json.dumps(r), file=sys.stderr)
                results.append(r)
    finally:
        stop([upstream])
    print(f"\n{args.bodies} distinct bodies of {args.messages:,} short messages each, one after another\n")
    print("| format | body MB | bound MB | RSS after run MB | over memo off MB | x bound | memo's accounted MB |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        off = next(o for o in results if o["format"] == r["format"] and o["mb"] == 0)
        over = r["rss_end_mb"] - off["rss_end_mb"]
        ratio = f"{over / r['mb']:.2f}" if r["mb"] else "-"
        print(f"| {r['format']} | {r['body_mb']:.2f} | {r['mb'] or 'off'} | {r['rss_end_mb']:.0f} | "
              f"{over:+.0f} | {ratio} | {r['memo']['bytes'] / 2**20:.1f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
