"""Prefix affinity over replicas: rendezvous (highest-random-weight) consistent hashing on the plan's
prefix hash, with a bounded-load guard.

Every gateway replica ranks the replicas the same way for the same prefix without sharing state, so
requests that share a prefix land where it is already cached. Adding or removing a replica moves only
the prefixes that ranked it first. The guard caps a replica at `load_factor` x the average in-flight
load (plus one), so a single hot prefix spills to its second choice instead of overloading its first.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence


def ranking(prefix_hash: str, replicas: Sequence[str]) -> list[str]:
    """Replicas in preference order for this prefix."""
    def weight(name: str) -> bytes:
        return hashlib.blake2b(f"{prefix_hash}\x00{name}".encode(), digest_size=8).digest()

    return sorted(replicas, key=weight, reverse=True)


def load_cap(replicas: Sequence[str], in_flight: Mapping[str, int], load_factor: float) -> int:
    """In-flight requests a replica may hold before a prefix spills past it: load_factor x the average, plus one."""
    return math.ceil(load_factor * (sum(in_flight.get(r, 0) for r in replicas) + 1) / len(replicas))


def pick_replica(prefix_hash: str, replicas: Sequence[str], in_flight: Mapping[str, int], load_factor: float) -> str:
    """The most preferred replica whose in-flight load is under the cap; the least loaded if all are full."""
    if len(replicas) == 1:
        return replicas[0]
    cap = load_cap(replicas, in_flight, load_factor)
    order = ranking(prefix_hash, replicas)
    for name in order:
        if in_flight.get(name, 0) < cap:
            return name
    return min(order, key=lambda r: in_flight.get(r, 0))


def pick_by_prefix(held: Mapping[str, int], prefix_hash: str, replicas: Sequence[str], in_flight: Mapping[str, int],
                   load_factor: float) -> tuple[str, str]:
    """The replica holding the most of the prompt's leading blocks (`held`: blocks per replica, from its KV
    events), among those under the load cap of `pick_replica`; else rendezvous. Returns (replica, reason).

    Equal holdings go to the replica with fewer requests in flight, then to rendezvous order. Conversations
    under one shared system prompt all have that prompt's hash: ranked by it alone, every new conversation
    would start on one replica until the cap spilled it, and the spill would land apart from its own history.
    """
    if not any(held.get(r, 0) > 0 for r in replicas):
        return pick_replica(prefix_hash, replicas, in_flight, load_factor), "no_holder"
    cap = load_cap(replicas, in_flight, load_factor)
    order = ranking(prefix_hash, replicas)
    best = max(held.get(r, 0) for r in replicas)
    under = [r for r in order if in_flight.get(r, 0) < cap]
    if not under:
        return min(order, key=lambda r: in_flight.get(r, 0)), "over_load_cap"
    # max() keeps the first of equals, so rendezvous order breaks the last tie.
    name = max(under, key=lambda r: (held.get(r, 0), -in_flight.get(r, 0)))
    return name, "prefix_hit" if held.get(name, 0) == best else "over_load_cap"
