"""Planner benchmark: savings on realistic traces, replayed through the provider cache simulator.

For each trace (bench/planner_traces.py, Anthropic Sonnet 5.5 prices; bench/planner_responses.py, an
OpenAI Responses trace on gpt-4o and on gpt-6.2-sol) it compares
- passthrough: the requests as the application sent them (no cache markers);
- system + last: `cache_control` on the last system block and the last message, the common
  gateway injection;
- planner: prefixgate's planner, online, learning as it goes (on the unmarked traffic);
- expert: the static-first version of the same traffic with checkpoints placed with hindsight
  (each prefix marked only if it is read again, with the TTL that covers the next read).
Each trace is also marked "system + last" the way a caller would (Claude Code, LiteLLM's injection)
and planned under each `caller_checkpoints` policy (keep, add, optimize).
Targets: planner >= 97% of the expert's savings on every unmarked trace, `optimize` >= 95% on every
marked one, neither more than 1% dearer than no caching, and `add` never dearer than the marked traffic
as sent. It also times `plan()` on a 10,000-token request after a route's first request.

Run: `.venv/bin/python bench/planner.py` (about a minute on 2 cores).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from bisect import bisect_right
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from planner_responses import MODELS, responses_support  # noqa: E402
from planner_traces import TRACES  # noqa: E402

from prefixgate import tokens  # noqa: E402
from prefixgate.cache_planner import CALLER_CHECKPOINTS, PlannerState, Target, plan  # noqa: E402
from prefixgate.cache_planner.trace import replay_strategy  # noqa: E402
from prefixgate.dialects import anthropic as an  # noqa: E402
from prefixgate.ir import Checkpoint  # noqa: E402
from prefixgate.providers.pricing import resolve_model  # noqa: E402
from prefixgate.simulation.replay import passthrough, replay  # noqa: E402

LOOKBACK = 20


def system_and_last(record, _state) -> dict:
    """The common gateway injection: mark the system prompt's end and the last message's end, 5m."""
    conv = an.parse_request(record.body)
    for seg in conv.segments:
        if seg.role == "system" and seg.blocks:
            seg.blocks[-1].checkpoint = Checkpoint()
    last = conv.segments[-1]
    markable = [b for b in last.blocks if b.kind != "thinking" and (b.text or b.kind != "text")]
    if markable:
        markable[-1].checkpoint = Checkpoint()
    return an.encode_request(conv)


def expert(records: list) -> list:
    """Static-first records with checkpoints placed with hindsight: each candidate prefix is marked
    only if a later request reads it, with 5m when that read comes within 5 minutes, else 1h."""
    convs = [an.parse_request(r.body) for r in records]
    keys = [c.prefix_keys() for c in convs]
    seen_at: dict[str, list[float]] = defaultdict(list)
    for r, ks in zip(records, keys, strict=True):
        for k in set(ks):
            seen_at[k].append(r.t)
    out = []
    for r, conv, ks in zip(records, convs, keys, strict=True):
        flat = conv.blocks()
        lead = sum(len(s.blocks) for s in conv.segments if s.role in ("tools", "system"))
        marks = [i for i, b in enumerate(flat) if b.kind != "thinking" and (b.text or b.kind != "text")]
        cands: list[tuple[int, int]] = []  # (priority, index)
        static = [i for i in marks if i < lead]
        if static:
            cands.append((0, static[-1]))
        end = marks[-1] if marks and marks[-1] >= lead else None
        if end is not None:
            cands.append((1, end))
            earlier = [j for j in range(end) if any(t < r.t for t in seen_at[ks[j]])]
            if earlier and end - earlier[-1] > LOOKBACK:
                cands += [(2, j) for j in range(earlier[-1] + 15, end - 4, 15)]
        last_user = [b for s in conv.segments[-1:] for b in s.blocks]
        for b in last_user[:-1]:
            if len(b.text) >= 1000:
                cands.append((3, flat.index(b)))
        chosen = []
        minimum = resolve_model("anthropic", r.model).min_cache_tokens
        cumulative = 0
        sizes = {}
        for j, b in enumerate(flat):
            cumulative += tokens.block_tokens(b)
            sizes[j] = cumulative
        for _prio, i in sorted(cands)[:4]:
            if sizes[i] < minimum:
                continue  # below the model's minimum nothing is cached: the expert wastes no slot on it
            times = seen_at[ks[i]]
            nxt = bisect_right(times, r.t)
            gap = times[nxt] - r.t if nxt < len(times) else None
            ttl = None if gap is None else "5m" if gap <= 300 else "1h" if gap <= 3600 else None
            if ttl:
                chosen.append((i, ttl))
        # 1h before 5m: an earlier (shorter, so at least as often read) prefix takes a later 1h.
        needs_long = False
        for i, ttl in sorted(chosen, reverse=True):
            needs_long = needs_long or ttl == "1h"
            flat[i].checkpoint = Checkpoint("1h" if needs_long else ttl)
        out.append(type(r)(**{**r.__dict__, "body": an.encode_request(conv)}))
    return out


def _expert_strategy(bodies: list):
    it = iter(bodies)
    return lambda record, _state: next(it).body


def savings(report) -> tuple[float, object]:
    total = report.total
    if report.errors:
        raise SystemExit(f"simulator rejected requests: {report.errors[:3]}")
    return float(total.cost.savings / total.cost.without_cache), total


def planning_latency(n: int = 300) -> tuple[float, float]:
    """p50 and p95 of plan()'s CPU time in ms on a ~10,000-token request, after the route's first request."""
    import random

    from planner_traces import prose  # noqa: PLC0415

    rng = random.Random(9)
    # About 10,000 tokens in all, the size the target is stated for.
    policy = "\n".join(prose(rng, 6) for _ in range(117))
    state = PlannerState()
    samples = []
    for i in range(n + 1):
        body = {"model": "claude-sonnet-5-5", "max_tokens": 100,
                "system": f"You are Ava.\nCurrent time: 2026-11-22T10:{i % 60:02d}:{i % 59:02d}Z\n{policy}",
                "messages": [{"role": "user", "content": f"Question {i}: " + prose(rng, 2)}]}
        conv = an.parse_request(body)
        # CPU time of this thread: on a shared machine wall time measures the neighbours too.
        start = time.thread_time()
        plan(conv, Target("anthropic", "claude-sonnet-5-5"), state, route="latency", now=float(i))
        if i:
            samples.append((time.thread_time() - start) * 1000)
    from prefixgate import tokens

    size = tokens.count_tokens(body["system"]) + 20
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95)], size


def _responses_row(model: str) -> tuple:
    """The OpenAI Responses trace on `model` (no markers to inject, so no system+last column)."""
    original, marked = responses_support(model=model)
    order = sorted(range(len(original)), key=lambda i: original[i].t)
    original, marked = [original[i] for i in order], [marked[i] for i in order]
    p_sav, p_tot = savings(replay(original, passthrough, strategy_name="passthrough"))
    q_sav, q_tot = savings(replay(original, replay_strategy(), strategy_name="planner"))
    e_sav, _ = savings(replay(marked, _expert_strategy(marked), strategy_name="expert"))
    vs_expert = q_sav / e_sav if e_sav > 0 else 1.0
    vs_pass = float(q_tot.cost.total / p_tot.cost.total - 1)
    good = (e_sav <= 0 or vs_expert >= 0.97) and vs_pass <= 0.01
    return f"Responses support agent ({model})", len(original), p_sav, q_sav, e_sav, vs_expert, good


def main() -> None:
    rows = []
    ok = True
    for name, make in TRACES.items():
        original, static_first = make()
        # Replay in time order (generators emit session by session); both versions keep one order.
        order = sorted(range(len(original)), key=lambda i: original[i].t)
        original, static_first = [original[i] for i in order], [static_first[i] for i in order]
        # The same traffic as a caller that marks "system + last message" itself sends it.
        marked = [type(r)(**{**r.__dict__, "body": system_and_last(r, None)}) for r in original]
        p_sav, _ = savings(replay(original, passthrough, strategy_name="passthrough"))
        q_sav, _ = savings(replay(original, replay_strategy(), strategy_name="planner"))
        m_sav, _ = savings(replay(marked, passthrough, strategy_name="marked as sent"))
        modes = {mode: savings(replay(marked, replay_strategy(caller=mode), strategy_name=mode))[0]
                 for mode in CALLER_CHECKPOINTS}
        hindsight = expert(static_first)
        e_sav, _ = savings(replay(hindsight, _expert_strategy(hindsight), strategy_name="expert"))

        def vs_expert(sav: float, e_sav: float = e_sav) -> float:
            return sav / e_sav if e_sav > 0 else (1.0 if sav >= e_sav - 0.01 else 0.0)

        good = {
            "unmarked >= 0.97": e_sav <= 0 or vs_expert(q_sav) >= 0.97,
            "optimize >= 0.95": e_sav <= 0 or vs_expert(modes["optimize"]) >= 0.95,
            # keep and add send the caller's markers, whatever they cost; the planner's own choices may not lose.
            "never below -1%": min(q_sav, modes["optimize"]) >= -0.01,
            "add <= as sent": modes["add"] >= m_sav - 1e-9,
        }
        ok &= all(good.values())
        rows.append((name, len(original), p_sav, q_sav, m_sav, modes, e_sav, vs_expert, good))
    print("Savings vs no caching (ratio to the hindsight expert's savings in brackets).\n")
    print("| trace | requests | passthrough | planner (unmarked) | marked as sent | keep | add | optimize | expert | ok |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|:-:|")
    for name, n, p, q, m, modes, e, ve, good in rows:
        cells = " | ".join(f"{v:.1%} ({ve(v):.2f})" for v in (q, m, modes["keep"], modes["add"], modes["optimize"]))
        failed = ", ".join(k for k, v in good.items() if not v)
        print(f"| {name} | {n} | {p:.1%} | {cells} | {e:.1%} | {'yes' if not failed else 'NO: ' + failed} |")
    print("\nOpenAI Responses (no markers to inject or keep: the unmarked planner against the expert).\n")
    print("| trace | requests | passthrough | planner | expert (hindsight) | planner/expert | ok |")
    print("|---|---:|---:|---:|---:|---:|:-:|")
    for model in MODELS:
        name, n, p, q, e, ve, good = _responses_row(model)
        ok &= good
        print(f"| {name} | {n} | {p:.1%} | {q:.1%} | {e:.1%} | {ve:.2f} | {'yes' if good else 'NO'} |")
    p50, p95, size = planning_latency()
    print(f"\nplan() CPU time on a {size:,}-token request after the route's first: p50 {p50:.3f} ms, p95 {p95:.3f} ms "
          f"(target p50 <= 1 ms: {'yes' if p50 <= 1 else 'NO'})")
    print(json.dumps({"all_targets_met": ok and p50 <= 1}))


if __name__ == "__main__":
    main()
