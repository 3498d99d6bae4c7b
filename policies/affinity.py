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


def pick_replica(prefix_hash: str, replicas: Sequence[str], in_flight: Mapping[str, int], load_factor: float) -> str:
    """The most preferred replica whose in-flight load is under the cap; the least loaded if all are full."""
    if len(replicas) == 1:
        return replicas[0]
    total = sum(in_flight.get(r, 0) for r in replicas)
    cap = math.ceil(load_factor * (total + 1) / len(replicas))
    order = ranking(prefix_hash, replicas)
    for name in order:
        if in_flight.get(name, 0) < cap:
            return name
    return min(order, key=lambda r: in_flight.get(r, 0))
