"""What each memo of the reuse store saves: the request path's CPU time per request (parse, plan, prefix shape,
encode) with every memo on, and with each memo alone turned off, on four workloads:

  - claude-code bytes: the request captured from Claude Code (bench/fixtures/), its last tool output new each
    turn, as Claude Code writes it (the resent-body path; its tools and system prompt follow the messages);
  - agent20k bytes: the coding agent's Anthropic request (bench/agent_request.py), resent every turn with a new
    last user text, as its bytes (the resent-body path);
  - agent20k dict: the same requests as dicts (an SDK wrapper's path: no bytes to compare, so no resent body);
  - gemini agent: the same conversation as Gemini contents (parsed whole: Gemini bodies take no resent path).

A memo pays where turning it off costs time; one that saves nothing on any workload is a candidate to drop.

    .venv/bin/python bench/memo_pays.py [--requests 40]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time

from agent_request import agent_body, variants

from prefixgate import reuse
from prefixgate.cache_planner import PlannerState, Target, plan
from prefixgate.cache_planner.detectors import volatile_spans
from prefixgate.dialects import anthropic, gemini
from prefixgate.dialects.resent import encode
from prefixgate.prefix_shape import prefix_shape


def gemini_body(body: dict) -> dict:
    """The Anthropic agent body as Gemini contents (text parts; tool calls and results as text)."""
    contents = []
    for m in body["messages"]:
        parts = [{"text": b.get("text") or json.dumps(b.get("input") or b.get("content"))} for b in m["content"]]
        contents.append({"role": "model" if m["role"] == "assistant" else "user", "parts": parts})
    return {"systemInstruction": {"parts": [{"text": b["text"]} for b in body["system"]]}, "contents": contents}


class GeminiWire:
    """Gemini's parser takes the model from the URL."""

    @staticmethod
    def parse_request(body: bytes) -> object:
        return gemini.parse_request(body, "gemini-3.8-flash")

    encode_request = staticmethod(gemini.encode_request)


def workloads(n: int) -> dict[str, tuple[list, object, Target]]:
    from gateway import ROOT, vary_tool_output  # bench/gateway.py: the captured request, as it sends it

    bodies = variants(agent_body(20_000), n)
    claude = Target("anthropic", "claude-sonnet-5-5")
    captured = vary_tool_output(json.loads((ROOT / "bench" / "fixtures" / "claude-code.json").read_text()), n)
    return {
        "claude-code bytes": ([json.dumps({**b, "model": claude.model}, ensure_ascii=False, separators=(",", ":")).encode()
                               for b in captured], anthropic, claude),
        "agent20k bytes": ([json.dumps(b).encode() for b in bodies], anthropic, claude),
        "agent20k dict": (bodies, anthropic, claude),
        "gemini agent": ([json.dumps(gemini_body(b)).encode() for b in bodies], GeminiWire, Target("gemini", "gemini-3.8-flash")),
    }


def per_request_ms(requests: list, wire: object, target: Target) -> float:
    """Median CPU ms of the request path over `requests`, after the first (which fills the memos)."""
    state, samples = PlannerState(), []
    for i, req in enumerate(requests):
        req = copy.deepcopy(req) if isinstance(req, dict) else req
        start = time.thread_time()
        conv = wire.parse_request(req)
        result = plan(conv, target, state)
        prefix_shape(result.conversation, target.provider, volatile_spans)
        body = wire.encode_request(result.conversation)
        if conv.source is not None:
            encode(body, conv.source)
        if i:
            samples.append((time.thread_time() - start) * 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=40)
    args = parser.parse_args()
    loads = workloads(args.requests)
    names = sorted(reuse.STORE.memos)
    rows = {}
    for label, (requests, wire, target) in loads.items():
        per_request_ms(requests[:3], wire, target)      # imports, tables and tokenizers loaded before timing
        reuse.STORE.clear()
        rows[(label, "all on")] = per_request_ms(requests, wire, target)
        for name in names:
            reuse.STORE.clear()
            reuse.STORE.memos[name].disabled = True
            rows[(label, name)] = per_request_ms(requests, wire, target)
            reuse.STORE.memos[name].disabled = False
        reuse.keep(0)
        rows[(label, "all off")] = per_request_ms(requests, wire, target)
        reuse.keep(24 << 20)
        rows[(label, "all on, again")] = per_request_ms(requests, wire, target)   # the run-to-run spread
    print(f"\nCPU ms per request (median of {args.requests - 1}, after the first), each memo alone off\n")
    print("| memo off | " + " | ".join(loads) + " |")
    print("|---|" + "---|" * len(loads))
    for name in ["all on", *names, "all off", "all on, again"]:
        print(f"| {name} | " + " | ".join(f"{rows[(label, name)]:.2f}" for label in loads) + " |")


if __name__ == "__main__":
    main()
