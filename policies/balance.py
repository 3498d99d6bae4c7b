"""Load-balanced routes: which of a route's targets a new prefix goes to, and what each checks at load.

A route with `balance` set treats its targets as one pool serving the same model (several Azure deployments,
Bedrock regions, two OpenAI-compatible deployments). A prefix stays on the target where its cache is warm
(the gateway's `sticky.py` holds that); this module only ranks the targets for a prefix that has none, and
names the order to fail over in:

- `cost`: by expected cost per prompt token, hit rate x cached price + miss rate x write price (each target's
  own price row and the hit rate seen there), targets within `TIE` of the cheapest ordered by rendezvous on
  the prefix key, so equal targets share new prefixes between them and every replica ranks them alike;
- `round_robin`: new prefixes in turn, one target after another.

Without `balance` a route's targets are ordered fallbacks, tried in the order written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Literal

from prefixgate.cost import MTOK, Price
from prefixgate.policies.affinity import ranking

if TYPE_CHECKING:
    from prefixgate.policies.schema import TargetRef, Upstream

Balance = Literal["", "cost", "round_robin"]
BALANCES: tuple[str, ...] = ("cost", "round_robin")
# Expected costs this close to the cheapest count as equal: hit rates move a little with every answer, and
# ranking on that noise would send every new prefix to whichever target was luckiest last.
TIE = Decimal("0.05")


def check_balance(value: object, targets: Sequence[TargetRef], upstreams: Mapping[str, Upstream], path: str) -> Balance:
    """The route's `balance`, checked against its targets (a ValueError naming the key path otherwise)."""
    if value is None:
        return ""
    if value not in BALANCES:
        raise ValueError(f"{path}.balance: must be one of {', '.join(BALANCES)}, got {value!r}")
    if len(targets) < 2:
        raise ValueError(f"{path}.balance: a balanced route needs at least two targets, got {len(targets)}")
    for i, ref in enumerate(targets):
        if len(ref.upstreams) != 1:
            raise ValueError(f"{path}.targets.{i}: a balanced route's targets each name one upstream "
                             "(the prefix sticks to an upstream; list replicas as targets of their own)")
    names = [ref.upstreams[0] for ref in targets]
    if len(set(names)) != len(names):
        raise ValueError(f"{path}.targets: a balanced route names each upstream once, got {names}")
    if len({upstreams[n].dialect for n in names}) > 1:
        raise ValueError(f"{path}.targets: a balanced route's targets serve one model in one format; got "
                         f"{', '.join(f'{n} ({upstreams[n].dialect})' for n in names)}")
    named = [ref.model is not None for ref in targets]
    if any(named) and not all(named):
        raise ValueError(f"{path}.targets: give every target of a balanced route the model it serves, or none "
                         "(each then forwards the caller's)")
    if all(named):
        served = {upstreams[ref.upstreams[0]].base_model(ref.model) for ref in targets if ref.model}
        if len(served) > 1:
            raise ValueError(f"{path}.targets: a balanced route's targets serve one model, got {sorted(served)}")
    return value  # type: ignore[return-value]


def expected_cost(price: Price | None, hit_rate: float, ttl: str) -> Decimal | None:
    """USD per prompt token of a prefix sent there: hit rate x cached price + miss rate x write price."""
    if price is None:
        return None
    hit = Decimal(str(round(hit_rate, 4)))
    return (hit * price.cache_read + (1 - hit) * price.write_price(ttl)) / MTOK


def rank(balance: Balance, names: Sequence[str], prefix_key: str, costs: Mapping[str, Decimal | None],
         turn: int) -> list[str]:
    """The targets (upstream names) in the order a new prefix tries them. `costs`: each one's expected cost
    (None: unpriced, ranked last); `turn`: how many new prefixes the route has placed (round_robin)."""
    if balance == "round_robin":
        start = turn % len(names)
        return [*names[start:], *names[:start]]
    order = ranking(prefix_key, names)
    priced = [n for n in order if costs.get(n) is not None]
    if not priced:
        return order
    cheapest = min(costs[n] for n in priced)  # type: ignore[type-var]
    near = [n for n in priced if costs[n] <= cheapest * (1 + TIE)]  # type: ignore[operator]
    rest = sorted((n for n in priced if n not in near), key=lambda n: costs[n])  # type: ignore[arg-type, return-value]
    return [*near, *rest, *(n for n in order if costs.get(n) is None)]
