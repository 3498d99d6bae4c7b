"""What the planner does with cache markers the caller placed itself (Claude Code, LiteLLM's
"system + last message" injection, an SDK user's own `cache_control`).

- `keep` (the default): the caller's markers go out as sent and the planner adds none. A proxy that
  moves a caller's breakpoints is the most reported gateway bug, and a caller who placed markers
  has usually measured them; trust costs nothing here.
- `add`: the caller's markers stay where they are, with their TTLs or longer; the planner adds its own
  where they pay (the conversation tail, bridges past Anthropic's 20-block lookback, a document)
  within the provider's marker limit, and lengthens a caller's TTL (5m -> 1h) when the route's gaps
  make the longer one cheaper.
- `optimize`: the cheapest of the caller's placement, `add`'s, and the planner's own.

`add` and `optimize` change the caller's request only when the planner's cost model expects the
change to be cheaper than the request as sent, and the explanation lists every marker added,
lengthened, moved or dropped. The estimate prices each marked segment with the route's learned reuse
(a recurring prefix: read with p, else rewritten; a conversation: tokens read from an earlier entry,
new tokens written, the next turn's expected read credited), and counts an earlier entry as read only
when some marker sits within Anthropic's lookback of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from prefixgate.cache_planner.economics import growing_cost, recurring_cost
from prefixgate.cache_planner.stability import RouteState
from prefixgate.cost import Price
from prefixgate.ir import ttl_seconds

if TYPE_CHECKING:
    from prefixgate.cache_planner.checkpoints import Candidate

CallerCheckpoints = Literal["keep", "add", "optimize"]
CALLER_CHECKPOINTS: tuple[CallerCheckpoints, ...] = ("keep", "add", "optimize")
# Anthropic: a breakpoint finds an earlier entry only within this many blocks before it.
LOOKBACK = 20
# A change must be expected to save at least this many input tokens' worth: a tie is the caller's.
MIN_SAVING = 1.0


def caller_marks(flat: list) -> dict[int, str]:
    """Block index -> TTL of every marker in the request as the caller sent it."""
    return {i: block.checkpoint.ttl for i, (_, block) in enumerate(flat) if block.checkpoint is not None}


@dataclass
class MarkerCosts:
    """Prices a placement (block index -> TTL) of one request with the route's learned reuse."""

    cands: Sequence[Candidate]
    cumulative: list[int]
    route: RouteState
    price: Price
    last_hit: int | None   # the latest block whose prefix an earlier request opened (None: none)

    def level(self, index: int) -> str:
        for c in self.cands:
            if c.index == index:
                return "conversation" if c.level == "lookback" else c.level
        static = next((c.index for c in self.cands if c.level == "static"), -1)
        return "static" if index <= static else "conversation"

    def cost(self, marks: dict[int, str]) -> float:
        if self.price.input <= 0:
            return 0.0
        hit = self.last_hit
        reachable = hit is not None and any(hit <= i <= hit + LOOKBACK for i in marks)
        carried_to = self.cumulative[hit] if reachable and hit is not None else 0
        total, before = 0.0, 0
        for i in sorted(marks):
            upto = self.cumulative[i]
            size = upto - before
            level = self.level(i)
            stats = self.route.reuse.level(level)
            if level == "conversation":
                carried = max(min(upto, carried_to) - before, 0)
                total += growing_cost(self.price, marks[i], stats.p_within(ttl_seconds(marks[i])), carried, size - carried)
                # growing_cost prices carried tokens at 1 (the turn that wrote them was credited the read):
                # here they are actually read, at r.
                total -= carried * (1 - float(self.price.cache_read / self.price.input))
            else:
                total += recurring_cost(stats, self.price, marks[i], size)
            before = upto
        return total + (self.cumulative[-1] - before if self.cumulative else 0)


def settle_caller_marks(
    policy: CallerCheckpoints, theirs: dict[int, str], ours: list[Candidate], cands: Sequence[Candidate],
    cumulative: list[int], route: RouteState, price: Price, ttls: tuple[str, ...], limit: int, one_ttl: bool,
    last_hit: int | None, notes: list[str],
) -> dict[int, str]:
    """The markers to send under `policy` (block index -> TTL), explained in `notes`."""
    costs = MarkerCosts(cands, cumulative, route, price, last_hit)
    sent = costs.cost(theirs)
    options = [("as sent", theirs)]
    if policy in ("add", "optimize"):
        options.append(("add", _added(theirs, ours, costs, ttls, limit, one_ttl)))
    if policy == "optimize":
        options.append(("planner", {c.index: c.choice.ttl for c in ours if c.choice and c.choice.ttl}))
    name, best = min(options, key=lambda o: costs.cost(o[1]))
    saving = sent - costs.cost(best)
    if best == theirs or saving < MIN_SAVING:
        notes.append(f"cache: the caller placed {len(theirs)} checkpoint(s); kept as sent ({policy}: no change "
                     "is expected to be cheaper)")
        return dict(theirs)
    notes.append(f"cache: caller's {len(theirs)} checkpoint(s) changed ({policy}, {name}): expected "
                 f"{saving:.0f} input-token equivalents cheaper than as sent")
    for i in sorted(set(theirs) | set(best)):
        at = f"at {cumulative[i]} tokens ({costs.level(i)})"
        if i not in best:
            notes.append(f"checkpoint: dropped the caller's {theirs[i]} marker {at}")
        elif i not in theirs:
            notes.append(f"checkpoint: added a {best[i]} marker {at}")
        elif best[i] != theirs[i]:
            notes.append(f"checkpoint: caller's marker {at}: ttl {theirs[i]} -> {best[i]}")
    return best


def _added(theirs: dict[int, str], ours: list[Candidate], costs: MarkerCosts, ttls: tuple[str, ...], limit: int,
           one_ttl: bool) -> dict[int, str]:
    """The caller's markers, each lengthened where that is cheaper, plus the planner's where they pay,
    greedily by expected saving, keeping longer TTLs before shorter ones and within `limit`."""
    marks = dict(theirs)
    rank = {t: ttl_seconds(t) for t in ttls}
    if not one_ttl:
        for i in sorted(theirs):
            for longer in (t for t in ttls if rank[t] > rank.get(marks[i], 0)):
                trial = {**marks, i: longer}
                if _ordered(trial, rank) and costs.cost(trial) < costs.cost(marks) - MIN_SAVING:
                    marks = trial
    ttl_for_all = next(iter(theirs.values()), None) if one_ttl else None
    for c in ours:
        if len(marks) >= limit:
            break
        if c.index in marks or c.choice is None or c.choice.ttl is None:
            continue
        tries = [ttl_for_all] if ttl_for_all else [c.choice.ttl, *ttls]
        for ttl in tries:
            trial = {**marks, c.index: ttl}
            if (one_ttl or _ordered(trial, rank)) and costs.cost(trial) < costs.cost(marks) - MIN_SAVING:
                marks = trial
                break
    return marks


def _ordered(marks: dict[int, str], rank: dict[str, int]) -> bool:
    """Anthropic requires a longer TTL's markers before a shorter one's."""
    seq = [rank.get(marks[i], 0) for i in sorted(marks)]
    return all(a >= b for a, b in zip(seq, seq[1:], strict=False))
