"""PG006 ttl-order."""

from __future__ import annotations

from collections.abc import Iterator

from prefixgate.cache_planner.lint.inputs import Request
from prefixgate.cache_planner.lint.rules.base import Context, Hit, rule
from prefixgate.cache_planner.lint.rules.prefix import checkpoints_of
from prefixgate.ir import ttl_seconds


@rule("PG006", "ttl-order", "error",
      "A longer-lived checkpoint (1h) comes after a shorter one (5m), or the automatic TTL contradicts the last marker.",
      "Put every 1h checkpoint before any 5m one; Anthropic answers 400 otherwise.", "request", cost="rejected")
def ttl_order(req: Request, ctx: Context) -> Iterator[Hit]:
    """## What it does
    Checks Anthropic TTL order: a 1h checkpoint after a 5m one, or an automatic `cache_control` TTL that
    contradicts the marker on the last block.

    ## Why it matters
    Anthropic answers 400.

    ## Example
    A `"ttl": "5m"` marker on the system prompt and a `"ttl": "1h"` marker on a later message.

    ## Use instead
    Put every 1h checkpoint before any 5m one.
    """
    if req.conv is None or req.provider != "anthropic":
        return
    ttls = ctx.catalog.anthropic.ttls
    shortest: tuple[int, str] | None = None
    for block, ttl in checkpoints_of(req):
        seconds = ttls.get(ttl, ttl_seconds(ttl))
        if shortest is not None and seconds > ttls.get(shortest[1], 0):
            earlier = req.where(shortest[0])
            yield Hit(f"{ttl} checkpoint after a {shortest[1]} one (line {earlier.line}): longer TTLs must come first",
                      req.where_marker(block), req)
            return
        if shortest is None or seconds < ttls.get(shortest[1], 0):
            shortest = (block, ttl)
    auto = req.body.get("cache_control")
    blocks = req.conv.blocks()
    if isinstance(auto, dict) and blocks and blocks[-1].checkpoint is not None:
        auto_ttl = auto.get("ttl", ctx.catalog.anthropic.default_ttl)
        if auto_ttl != blocks[-1].checkpoint.ttl:
            yield Hit(f"automatic cache_control ttl {auto_ttl} differs from the explicit {blocks[-1].checkpoint.ttl} "
                      "marker on the last block: Anthropic answers 400", req.where(path=("cache_control",)), req)
