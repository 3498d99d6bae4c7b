"""What the static-first rewrite did per route: how many requests it rewrote, how many units and characters
it moved out of the cached prefix (and why: learned from the route's traffic, held, detected, declared), and
what those requests saved against no caching. Read from the plan lines each ledger record keeps."""

from __future__ import annotations

import re
from collections.abc import Iterable
from decimal import Decimal

from prefixgate.ledger import LedgerRecord

_MOVED = re.compile(r"^rewrite: moved (\d+) \w+ unit\(s\) .*\((\d+) chars; ([a-z, ]+)\)$")


def rewrites_by_route(records: Iterable[LedgerRecord], since: float) -> list[dict]:
    """Routes whose requests (ts >= since) the rewrite moved units in, most saved first."""
    routes: dict[str, dict] = {}
    for rec in records:
        if rec.ts < since:
            continue
        moved = [m for m in map(_MOVED.match, rec.explanation) if m]
        route = routes.setdefault(rec.route, {"route": rec.route, "requests": 0, "rewritten": 0, "units_moved": 0,
                                              "chars_moved": 0, "why": set(), "cache_read_tokens": 0,
                                              "saved_usd": Decimal(0)})
        route["requests"] += 1
        if not moved:
            continue
        route["rewritten"] += 1
        route["units_moved"] += sum(int(m[1]) for m in moved)
        route["chars_moved"] += sum(int(m[2]) for m in moved)
        route["why"].update(w.strip() for m in moved for w in m[3].split(","))
        route["cache_read_tokens"] += rec.cache_read
        route["saved_usd"] += Decimal(rec.savings_usd or 0)
    out = [{**r, "why": sorted(r["why"]), "saved_usd": str(r["saved_usd"])} for r in routes.values() if r["rewritten"]]
    out.sort(key=lambda r: (-Decimal(r["saved_usd"]), r["route"]))
    return out
