"""The online ceiling of the cache-lifetime benchmark: the cheapest plan any *online* planner could expect on a
chat trace whose gap law it knows exactly (bench/lifetime_traces.py's generating distribution), but whose
realised gaps it does not.

The hindsight expert (bench/lifetime_expert.py) marks 1h exactly on the turn before a break. No online planner
can: when a turn's gap is drawn independently of everything the planner has seen, the best it can do is the
decision with the lowest *expected* cost under the true gap law. This module computes that Bayes policy over
the expert's own decision space (per request: the conversation end's TTL or none, or 1h on the turn's first new
block and 5m on its end; the static prefix 1h, which costs one write per hour of route activity), marks the
trace with it and lets the simulator bill it, like every other plan in the benchmark.

Per session, at each turn, it solves backward induction over the turns the session may yet have: the state at
a turn is what the previous one left readable (its end, its first new block, or the static prefix alone); a gap
falls within 5 minutes (every marked entry survives), within an hour (only 1h entries survive) or past it
(nothing of the session survives) with the law's probabilities, and the session goes on after each turn with
the probability its turn count gives. Later turns grow by the session's mean growth so far; whether they come,
when, and how large they are, the policy does not know. The law is the one each turn's gap is drawn from:
- i.i.d. chat (`human_chat`): the generator's one law for every gap (`iid_law`);
- chat paced by person (`paced_chat`): the posterior law given only the gaps the session has shown, under the
  generator's own priors on a person's pace and break propensity (`paced_online_laws`: the Bayes-optimal online
  planner, which knows the population but not the person); and, as an upper bound no online planner reaches,
  the `oracle_laws` of a policy told each person's pace and propensity.
Each turn's decision treats its law as holding for the rest of the session (exact for i.i.d. gaps).

With `upgrades` (where the trace has the replies), a turn marked 5m may also be upgraded when the gap after it
passes 5 minutes: keep-alive's upgrade through the reply (`cache_planner.keepalive.upgrade_body`), sent 30 s
before the entry expires whether or not the session comes back (the policy cannot tell), decided by the same
backward induction; the next turn then reads through the reply if it comes within the hour.

Run: `.venv/bin/python bench/lifetime_ceiling.py [SEEDS] [iid|paced] [--without-context]`: the planner, the ceiling (and the
oracle) against the marks expert over SEEDS fresh seeds of each chat shape of the benchmark's sets (default 20);
`--without-context` scores the planner with a conversation's own gaps left out (`reuse.CONTEXT_PRIOR`).
"""

from __future__ import annotations

import math
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace

from lifetime_expert import Step, _marked, _steps, hindsight
from lifetime_traces import IID_SHAPES, PACED_SHAPES, Chat, ChatCase, PacedChat, paced_chat

from prefixgate.cache_planner.keepalive import FILLER_TOKENS, upgrade_body
from prefixgate.cache_planner.lifetime import REFRESH_MARGIN_S
from prefixgate.cache_planner.trace import replay_strategy
from prefixgate.providers.pricing import resolve_model
from prefixgate.providers.trace import TraceRecord
from prefixgate.simulation.replay import passthrough, replay

# A turn's options: (TTL of a checkpoint on its first new block, TTL of the one at its end).
OPTIONS: tuple[tuple[str | None, str | None], ...] = ((None, None), (None, "5m"), (None, "1h"), ("1h", "5m"))
SURVIVES = {None: (False, False, False), "5m": (True, False, False), "1h": (True, True, False)}


@dataclass(frozen=True)
class GapLaw:
    """The next gap's law as the ceiling needs it: P(gap <= 5 min), P(gap <= 1 h); `more(j)`: P(the session has
    a turn j + 2 | it has turn j + 1), j counted from 0."""

    within_5m: float
    within_1h: float
    more: Callable[[int], float]


def uniform_turns(lo: int, hi: int) -> Callable[[int], float]:
    """`GapLaw.more` for a turn count uniform on [lo, hi]."""
    def more(j: int) -> float:
        done = j + 1
        alive = sum(1 for n in range(lo, hi + 1) if n >= done)
        return sum(1 for n in range(lo, hi + 1) if n > done) / alive if alive else 0.0
    return more


def _turn_cost(step: Step, covered: int, option: tuple[str | None, str | None], read: float,
               write: dict[str, float], minimum: int) -> float:
    """Input cost in plain-input tokens: `covered` read, the marks written from there, the rest uncached."""
    anchor, end = option
    marks = [(step.static, "1h"), (step.anchor, anchor), (step.total, end)]
    cost, cur = read * covered, covered
    for tokens, ttl in marks:
        if ttl is not None and tokens > cur and tokens >= minimum:
            cost, cur = cost + (tokens - cur) * write[ttl], tokens
    return cost + (step.total - cur)


def _held(prev: Step, option: tuple[str | None, str | None], gap_class: int) -> tuple[int, int | None, str | None]:
    """What the next turn reads after a gap of `gap_class` (0: <= 5 min, 1: <= 1 h, 2: longer): its tokens, and
    the block and TTL of the entry (None: the static prefix, or nothing)."""
    anchor, end = option
    if end is not None and SURVIVES[end][gap_class]:
        return prev.total, prev.conv_at, end
    if anchor is not None and prev.reads_anchor and SURVIVES[anchor][gap_class]:
        return prev.anchor, prev.anchor_at, anchor
    return (prev.static if gap_class < 2 else 0), None, None


def _covered(prev: Step, option: tuple[str | None, str | None], gap_class: int) -> int:
    return _held(prev, option, gap_class)[0]


def _ahead(seen: list[Step], more: Callable[[int], float], growth: tuple[float, float]) -> list[Step]:
    """The session as the policy sees it at its latest turn: the turns so far, then the turns it may yet have,
    each growing by the mean growth seen so far (`growth`: tokens per turn, share of them in the first new block,
    for a session too young to show its own), up to the last turn the law gives a chance of."""
    last = seen[-1]
    if len(seen) > 1:
        grown = [b.total - a.total for a, b in zip(seen, seen[1:], strict=False)]
        firsts = [b.anchor - a.total for a, b in zip(seen, seen[1:], strict=False) if b.anchor]
        growth = (sum(grown) / len(grown), sum(firsts) / max(sum(grown), 1) if firsts else growth[1])
    out, total, k = list(seen), last.total, len(seen) - 1
    while more(k) > 0 and k < 4 * MAX_TURNS:
        anchor = total + growth[1] * growth[0]
        total += growth[0]
        out.append(Step(last.record, None, None, last.static, round(total), anchor_at=None, anchor=round(anchor),
                        reads_anchor=True))
        k += 1
    return out


MAX_TURNS = 64
# Before a session's second turn shows its own: a turn adds about this many tokens, this share of them in its
# first new block (the assistant's reply; the traces' replies and questions are of this size).
FIRST_TURN_GROWTH = (250.0, 0.85)


def decide(ahead: list[Step], j: int, covered: int, law: GapLaw, read: float, write: dict[str, float],
           minimum: int, upgrades: bool = False) -> tuple[float, tuple[str | None, str | None], bool]:
    """The option for turn `j` of `ahead` (the session as the policy sees it) that reading `covered` tokens
    leads into, with its expected input cost through the session's end: backward induction from the last turn
    the law allows, over the few prefixes a turn can find readable, every later gap drawn from `law`.

    With `upgrades`, a 5m end may also be upgraded once the gap passes 5 minutes (keep-alive's upgrade through
    the reply: a read of the prefix, the reply written 1h, a few filler tokens), decided then, knowing only that
    the gap passed 5 minutes; the third value says whether it would be (for this turn's option)."""
    probs = (law.within_5m, law.within_1h - law.within_5m, 1.0 - law.within_1h)
    future: dict[int, dict[int, float]] = {}

    def away(k: int, option: tuple[str | None, str | None]) -> tuple[float, bool]:
        """Expected cost from a gap past 5 minutes on (its probability included), and whether to upgrade."""
        more = law.more(k)
        plain = more * sum(p * future[k + 1][_covered(ahead[k], option, c)] for c, p in enumerate(probs)
                           if c and p > 0)
        if not upgrades or option[1] != "5m" or ahead[k].total < minimum:
            return plain, False
        nxt = ahead[k + 1]
        cost = (probs[1] + probs[2]) * (read * ahead[k].total + write["1h"] * (nxt.anchor - ahead[k].total)
                                        + FILLER_TOKENS)
        up = cost + more * (probs[1] * future[k + 1][nxt.anchor] + probs[2] * future[k + 1][_covered(ahead[k], option, 2)])
        return (up, True) if up < plain else (plain, False)

    def value(k: int, cov: int) -> tuple[float, tuple[str | None, str | None], bool]:
        best: tuple[float, tuple[str | None, str | None], bool] = (math.inf, OPTIONS[0], False)
        for option in OPTIONS:
            cost, upgrade = _turn_cost(ahead[k], cov, option, read, write, minimum), False
            if k + 1 < len(ahead):
                later, upgrade = away(k, option)
                cost += later + (law.more(k) * probs[0] * future[k + 1][_covered(ahead[k], option, 0)]
                                 if probs[0] > 0 else 0.0)
            if cost < best[0]:
                best = (cost, option, upgrade)
        return best

    for k in range(len(ahead) - 1, j, -1):
        prev = ahead[k - 1]
        future[k] = {cov: value(k, cov)[0] for cov in {prev.total, prev.anchor, prev.static, 0, ahead[k].anchor}}
    return value(j, covered)


def plan_session(chain: list[Step], laws: list[GapLaw], read: float, write: dict[str, float], minimum: int,
                 static_alive: bool, growth: tuple[float, float], upgrades: bool = False
                 ) -> tuple[list[dict[int | None, str | None]], list[bool]]:
    """The Bayes policy's marks (block index -> TTL) along one session, turn by turn: each turn decided from the
    turns so far and that turn's law alone (whether more turns come, and their size, it does not know). A turn
    that writes nothing still marks the entry it reads: Anthropic looks up a prefix only from a checkpoint.
    With `upgrades`, also per turn whether its entry is upgraded when the gap after it passes 5 minutes (sent
    then whether or not the session comes back: the policy does not know)."""
    marks: list[dict[int | None, str | None]] = []
    upgraded: list[bool] = []
    covered, held = (chain[0].static if static_alive else 0), [None, None]
    for j, step in enumerate(chain):
        ahead = _ahead(chain[:j + 1], laws[j].more, growth)
        _, option, upgrade = decide(ahead, j, covered, laws[j], read, write, minimum, upgrades)
        marks.append({step.static_at: "1h", step.anchor_at: option[0], step.conv_at: option[1]})
        if option[1] is None and held[0] is not None:
            marks[-1][held[0]] = held[1]
        gap = chain[j + 1].record.t - step.record.t if j + 1 < len(chain) else math.inf
        upgraded.append(upgrade and step.reply is not None and gap > 300 - REFRESH_MARGIN_S)
        if j + 1 < len(chain):
            nxt = chain[j + 1]
            if upgraded[-1] and gap <= 300 - REFRESH_MARGIN_S + 3600:
                covered, held = nxt.anchor, [nxt.anchor_at, "1h"]
            else:
                covered, *held = _held(step, option, 0 if gap <= 300 else 1 if gap <= 3600 else 2)
    return marks, upgraded


def bayes_online(records: list[TraceRecord], law_of: Callable[[int], GapLaw], upgrades: bool = False) -> list[TraceRecord]:
    """`records` marked by the Bayes policy; `law_of(i)`: the law of the gap after `records[i]` (time order).
    `upgrades`: with keep-alive's upgrades (where the trace has the replies), sent as refresh records."""
    rules = resolve_model("anthropic", records[0].model)
    price = rules.price.price
    read = float(price.cache_read / price.input)
    write = {t: float(price.write_price(t) / price.input) for t in ("5m", "1h")}
    out: list[TraceRecord] = []
    for scope in sorted({(r.tenant, r.route) for r in records}):
        index = [i for i, r in enumerate(records) if (r.tenant, r.route) == scope]
        steps = _steps([records[i] for i in index])
        touched = -1e18   # the static prefix's 1h entry: alive while the route is active within the hour
        starts = {i for i, s in enumerate(steps) if s.prev is None}
        alive_at = {}
        for i, s in enumerate(steps):
            if i in starts:
                alive_at[i] = s.record.t - touched <= 3600
            touched = s.record.t
        for first in sorted(starts):
            chain, k = [first], steps[first].next
            while k is not None:
                chain.append(k)
                k = steps[k].next
            laws = [law_of(index[k]) for k in chain]
            options, upgraded = plan_session([steps[k] for k in chain], laws, read, write, rules.min_cache_tokens,
                                             alive_at[first], FIRST_TURN_GROWTH, upgrades)
            for k, marks, upgrade in zip(chain, options, upgraded, strict=True):
                body = _marked(steps[k], marks)
                out.append(replace(steps[k].record, body=body))
                up = upgrade_body("anthropic", body, steps[k].reply or [], "1h") if upgrade else None
                if up is not None:
                    out.append(replace(steps[k].record, t=steps[k].record.t + 300 - REFRESH_MARGIN_S, body=up.body,
                                       output_tokens=0, keepalive=True, response=None))
    return sorted(out, key=lambda r: r.t)


def iid_law(shape: Chat) -> GapLaw:
    """The law of every gap of `human_chat(seed, shape)`: a reply (uniform) or a break (log-uniform)."""
    return GapLaw(_within(shape, 300.0), _within(shape, 3600.0), uniform_turns(*shape.turns))


def online_laws(case: ChatCase, records: list[TraceRecord]) -> list[GapLaw]:
    """Per record of `case`, the law of its next gap as the Bayes-optimal online planner knows it: the i.i.d.
    law itself, or for chat paced by person the posterior given the session's gaps so far."""
    if isinstance(case.shape, Chat):
        return [iid_law(case.shape)] * len(records)
    return paced_online_laws(records, case.shape)


def oracle_laws(case: ChatCase) -> list[GapLaw]:
    """For chat paced by person: each record's true law, the person's pace and propensity known (more than
    any online planner can know; an upper bound on the ceiling)."""
    assert isinstance(case.shape, PacedChat)
    more = uniform_turns(*case.shape.turns)
    return [GapLaw(a, b, more) for a, b in paced_chat(case.seed, case.shape)[1]]


def _within(shape: Chat, t: float) -> float:
    def share(lo: float, hi: float, log: bool) -> float:
        if t <= lo:
            return 0.0
        if t >= hi:
            return 1.0
        return math.log(t / lo) / math.log(hi / lo) if log else (t - lo) / (hi - lo)
    return (1 - shape.break_p) * share(*shape.reply_s, False) + shape.break_p * share(*shape.break_s, True)


def ceiling_saved(records: list[TraceRecord], laws: list[GapLaw], upgrades: bool = False) -> float:
    """The Bayes policy's savings against no caching, as the simulator bills them (`upgrades`: with keep-alive's
    upgrades, their cost included)."""
    from lifetime import saved  # the benchmark's scoring, imported late: it imports this module

    return saved(replay(bayes_online(records, laws.__getitem__, upgrades), passthrough))[0]


def ratios(records: list[TraceRecord], laws: list[GapLaw]) -> dict[str, float]:
    """Savings against no caching of the planner, the Bayes ceiling under `laws` and the marks expert, and their
    ratios to the expert."""
    from lifetime import saved  # the benchmark's scoring, imported late: it imports this module

    planner, _ = saved(replay(records, replay_strategy()))
    ceiling = ceiling_saved(records, laws)
    marks, _ = saved(replay(hindsight(records, refresh=False)[0], passthrough))
    return {"planner": planner, "ceiling": ceiling, "marks": marks,
            "planner/marks": planner / marks, "ceiling/marks": ceiling / marks}


FAMILIES = {"iid": ("i.i.d.", IID_SHAPES), "paced": ("paced by person", PACED_SHAPES)}


def main(seeds: int, families: list[str]) -> None:
    """The ceiling's expectation: the benchmark's chat shapes (tune, check, held-out) each over `seeds` fresh
    seeds; for chat paced by person also the oracle that knows each person's pace and propensity."""
    print("| family | shape | seeds | planner / marks expert | online ceiling / marks expert | "
          "oracle / marks expert |")
    print("|---|---|---:|---:|---:|---:|")
    for family, shapes in (FAMILIES[f] for f in families):
        for name, case in shapes.items():
            if name == "fresh":
                continue
            rows = []
            for s in range(seeds):
                seeded = replace(case, seed=1000 + s)
                records = seeded()
                row = ratios(records, online_laws(seeded, records))
                if isinstance(case.shape, PacedChat):
                    row["oracle/marks"] = ceiling_saved(records, oracle_laws(seeded)) / row["marks"]
                rows.append(row)
            cells = []
            for key in ("planner/marks", "ceiling/marks", "oracle/marks"):
                values = [r[key] for r in rows if key in r]
                cells.append(f"{sum(values) / len(values):.3f} ({min(values):.3f}-{max(values):.3f})" if values else "-")
            print(f"| {family} | {name} | {seeds} | {' | '.join(cells)} |", flush=True)


def paced_online_laws(records: list[TraceRecord], shape: PacedChat, particles: int = 2000,
                      seed: int = 0) -> list[GapLaw]:
    """For `paced_chat(_, shape)`: per record, the law of its next gap given only the gaps its session has shown
    so far, under the generator's own priors (a person's pace, break propensity and whether the last gap was a
    break, all unseen): the Bayes posterior by importance sampling over `particles` people drawn from the prior,
    each filtered through the session's gaps as a two-state hidden Markov chain (after a reply, after a break)."""
    rng = random.Random(seed)
    people = []
    for _ in range(particles):
        if rng.random() < shape.slow_p:
            lo, hi = shape.slow_s
            pace = lo * (hi / lo) ** rng.random()
        else:
            pace = rng.lognormvariate(math.log(shape.pace_s[0]), shape.pace_s[1])
        people.append((pace, rng.betavariate(*shape.propensity)))
    more = uniform_turns(*shape.turns)

    def reply_cdf(t: float, pace: float) -> float:
        return 0.5 * (1 + math.erf(math.log(t / pace) / (shape.spread * math.sqrt(2))))

    def reply_pdf(g: float, pace: float) -> float:
        z = math.log(g / pace) / shape.spread
        return math.exp(-z * z / 2) / (g * shape.spread * math.sqrt(2 * math.pi))

    def break_pdf(g: float) -> float:
        (lo, hi), (llo, lhi) = shape.break_s, (3600.0, 3 * 3600.0)
        short = 1 / (g * math.log(hi / lo)) if lo <= g <= hi else 0.0
        long = 1 / (g * math.log(lhi / llo)) if llo <= g <= lhi else 0.0
        return (1 - shape.long_p) * short + shape.long_p * long

    steps = _steps(records)
    laws: list[GapLaw] = []
    filters: dict[int, list[tuple[float, float]]] = {}   # session's first step -> per person (after reply, after break)
    first: dict[int, int] = {}
    for i, step in enumerate(steps):
        if step.prev is None:
            first[i], alpha = i, [(1.0, 0.0)] * particles
        else:
            first[i] = first[step.prev]
            alpha = filters[first[i]]
            g = max(step.record.t - steps[step.prev].record.t, 1e-3)
            fb, out = break_pdf(g), []
            for (pace, prop), (ar, ab) in zip(people, alpha, strict=True):
                pb = ar * prop + ab * (prop + (1 - prop) * shape.stick)
                out.append(((ar + ab - pb) * reply_pdf(g, pace), pb * fb))
            total = sum(a + b for a, b in out) or 1.0
            alpha = [(a / total, b / total) for a, b in out]
        filters[first[i]] = alpha
        w5 = w60 = weight = 0.0
        for (pace, prop), (ar, ab) in zip(people, alpha, strict=True):
            w = ar + ab
            if w <= 0:
                continue
            pb = (ar * prop + ab * (prop + (1 - prop) * shape.stick)) / w
            w5 += w * (1 - pb) * reply_cdf(300.0, pace)
            w60 += w * ((1 - pb) * reply_cdf(3600.0, pace) + pb * (1 - shape.long_p))
            weight += w
        laws.append(GapLaw(w5 / weight, w60 / weight, more))
    return laws


if __name__ == "__main__":
    if "--without-context" in sys.argv:
        # The planner as it was before a conversation's own gaps counted: every context answers as the route.
        from prefixgate.cache_planner import reuse

        reuse.CONTEXT_PRIOR = 1e12
    numbers = [a for a in sys.argv[1:] if a.isdigit()]
    families = [a for a in sys.argv[1:] if a in FAMILIES] or list(FAMILIES)
    main(int(numbers[0]) if numbers else 20, families)
