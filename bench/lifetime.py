"""Cache-lifetime benchmark: the planner's TTL choices and its keep-alive refreshes against a hindsight expert.

For each trace (bench/lifetime_traces.py: human-paced chat, an agent's working day with breaks from minutes to
hours, prompts that never repeat; Claude Sonnet 5.5 prices) it replays through the provider cache simulator
- planner: `prefixgate plan` online, learning as it goes (the `planner` replay strategy);
- planner + keep-alive: `prefixgate plan --keepalive`, its refresh records priced like any request (on chat,
  whose traces carry the replies, most are upgrades: the reply written after the conversation with a 1h mark
  once the user has been away nearly 5 minutes, `cache_planner.keepalive.upgrade_body`);
- expert (marks): the cheapest checkpoint TTLs for the trace, knowing every future request
  (bench/lifetime_expert.py: an exact optimum by dynamic programming over the entries alive between requests);
- expert (marks + refreshes): the same optimum with refreshes allowed between requests.
Savings are against the same requests with no caching (a refresh costs money and saves nothing by itself).
Targets: planner >= 0.97 of the marks expert on human-paced chat (and, reported beside it, planner +
keep-alive against the same expert: the upgrade is an action no marks plan has); planner + keep-alive >= 0.99 of the marks +
refreshes expert on the agent's day; no refresh and no loss from keep-alive where nothing repeats.

Human-paced chat comes in two families: i.i.d. (every gap drawn alike) and paced by person (each person's pace
and break propensity their own, breaks clustering). For both, the online ceiling (bench/lifetime_ceiling.py) is
the Bayes-optimal online plan under the generator's true law, billed by the simulator: what no online planner
can beat in expectation (ratio to the marks expert in brackets), of marks alone and with keep-alive's upgrades.

Eight trace sets: `tune` (the parameters the method was developed on), `check` (other seeds and shapes, looked
at during development), `held-out` (other seeds and shapes again, run only for the first report), `fresh`
(chat only, new seeds and shapes of both families, run only for the report of the chat work), `unseen` (chat
only, run only for the report of keep-alive's upgrade, which was developed looking at the other four) and
`unseen-2` to `unseen-4` (each written down before its first run: `bench/lifetime_traces.py` says when).

Run: `.venv/bin/python bench/lifetime.py [tune|check|held-out|fresh|unseen|unseen-2 ...]` (about six minutes on 2
cores); `--seeds N [SET ...]`: the planner's and keep-alive's ratios over N fresh seeds of each chat shape (of those
sets; all without), one trace per cell being one draw (about a minute per 5 seeds of all shapes).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from lifetime_ceiling import ceiling_saved, online_laws  # noqa: E402
from lifetime_expert import hindsight  # noqa: E402
from lifetime_traces import IID_SHAPES, PACED_SHAPES, SETS, ChatCase  # noqa: E402

from prefixgate.cache_planner.trace import plan_trace, replay_strategy  # noqa: E402
from prefixgate.providers.trace import TraceRecord, parse_record  # noqa: E402
from prefixgate.simulation.replay import ReplayReport, passthrough, replay  # noqa: E402


def saved(report: ReplayReport) -> tuple[float, int]:
    """Share of the no-caching cost saved, and the refreshes sent."""
    if report.errors:
        raise SystemExit(f"simulator rejected requests: {report.errors[:3]}")
    total = report.total
    return float(total.cost.savings / total.cost.without_cache), total.keepalives


def planned_keepalive(records: list[TraceRecord]) -> list[dict]:
    """`prefixgate plan --keepalive` on `records`: the trace lines, with the plan's explanation of each."""
    return list(plan_trace(records, keepalive=True))


def score(records: list[TraceRecord], case: ChatCase | None = None) -> dict:
    planner, _ = saved(replay(records, replay_strategy(), strategy_name="planner"))
    laws = online_laws(case, records) if case is not None else None
    ceiling = ceiling_saved(records, laws) if laws is not None else None
    upgraded = ceiling_saved(records, laws, upgrades=True) if laws is not None else None
    lines = planned_keepalive(records)
    kept = [parse_record(json.dumps(line)) for line in lines]
    keepalive, refreshes = saved(replay(kept, passthrough, strategy_name="planner + keep-alive"))
    upgrades = sum(1 for line in lines if line.get("keepalive") and line["plan"][0].startswith("keepalive: upgrade"))
    marks, _ = saved(replay(hindsight(records, refresh=False)[0], passthrough, strategy_name="expert (marks)"))
    both, expert_refreshes = saved(replay(hindsight(records, refresh=True)[0], passthrough,
                                          strategy_name="expert (marks + refreshes)"))
    return {"requests": len(records), "planner": planner, "keepalive": keepalive, "refreshes": refreshes,
            "upgrades": upgrades, "marks": marks, "both": both, "expert_refreshes": expert_refreshes, "ceiling": ceiling,
            "ceiling_upgrades": upgraded}


def ratio(value: float, expert: float) -> float:
    return value / expert if expert > 0 else (1.0 if value >= expert - 1e-9 else 0.0)


def targets(name: str, row: dict) -> dict[str, bool]:
    if name.startswith("human-paced chat"):
        return {"planner >= 0.97 of marks expert": ratio(row["planner"], row["marks"]) >= 0.97,
                "planner + keep-alive >= 0.97 of it": ratio(row["keepalive"], row["marks"]) >= 0.97}
    if name == "agent working day":
        return {"keep-alive >= 0.99 of marks+refresh expert": ratio(row["keepalive"], row["both"]) >= 0.99}
    return {"no refresh": row["refreshes"] == 0, "keep-alive loses nothing": row["keepalive"] >= row["planner"] - 1e-12}


def main(which: list[str]) -> None:
    ok = True
    print("Savings vs no caching (ratio to the expert in brackets: the planner to the marks expert, planner + "
          "keep-alive to the marks + refreshes expert).\n")
    print("| set | trace | requests | planner | planner + keep-alive (refreshes) | expert, marks | "
          "expert, marks + refreshes (refreshes) | online ceiling | online ceiling with upgrades | target met |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for set_name in which:
        for name, make in SETS[set_name].items():
            start = time.process_time()
            row = score(make(), make if isinstance(make, ChatCase) else None)
            met = targets(name, row)
            ok &= all(met.values())
            upgraded = (f", {ratio(row['keepalive'], row['marks']):.3f} of marks; {row['refreshes']}, "
                        f"{row['upgrades']} upgrades") if row["upgrades"] or row["ceiling"] is not None else f"; {row['refreshes']}"
            cells = (f"{row['planner']:.1%} ({ratio(row['planner'], row['marks']):.3f}) | "
                     f"{row['keepalive']:.1%} ({ratio(row['keepalive'], row['both']):.3f}{upgraded}) | "
                     f"{row['marks']:.1%} | {row['both']:.1%} ({row['expert_refreshes']}) | ")
            if row["ceiling"] is not None:
                cells += (f"{row['ceiling']:.1%} ({ratio(row['ceiling'], row['marks']):.3f}) | "
                          f"{row['ceiling_upgrades']:.1%} ({ratio(row['ceiling_upgrades'], row['marks']):.3f})")
            else:
                cells += " | "
            verdict = "; ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in met.items())
            print(f"| {set_name} | {name} | {row['requests']} | {cells} | {verdict} |", flush=True)
            print(f"<!-- {set_name}/{name}: {time.process_time() - start:.1f} s CPU -->", file=sys.stderr)
    print(json.dumps({"all_targets_met": ok}))


def over_seeds(n: int, only: list[str]) -> None:
    """One trace per cell is one draw: the planner's and keep-alive's ratios to the marks expert over `n` fresh seeds
    (the set's seed + 1000 + k) of each chat shape (of the sets in `only`; empty: all), mean (min-max)."""
    print(f"Ratio to the marks expert over {n} fresh seeds of each chat shape, mean (min-max).\n")
    print("| family | shape | planner | planner + keep-alive | keep-alive >= 0.97 |")
    print("|---|---|---:|---:|---:|")
    for family, shapes in (("i.i.d.", IID_SHAPES), ("paced by person", PACED_SHAPES)):
        for name, shape in shapes.items():
            if only and name not in only:
                continue
            planner, kept = [], []
            for k in range(n):
                records = ChatCase(shape.seed + 1000 + k, shape.shape)()
                marks, _ = saved(replay(hindsight(records, refresh=False)[0], passthrough))
                planner.append(ratio(saved(replay(records, replay_strategy()))[0], marks))
                lines = [parse_record(json.dumps(line)) for line in planned_keepalive(records)]
                kept.append(ratio(saved(replay(lines, passthrough))[0], marks))
            cells = [f"{sum(v) / n:.3f} ({min(v):.3f}-{max(v):.3f})" for v in (planner, kept)]
            print(f"| {family} | {name} | {cells[0]} | {cells[1]} | {sum(r >= 0.97 for r in kept)} of {n} |", flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--seeds"]:
        over_seeds(int(sys.argv[2]), sys.argv[3:])
    else:
        main(sys.argv[1:] or list(SETS))
