"""PG004 too-many-breakpoints."""

from __future__ import annotations

from collections.abc import Iterator

from prefixgate.cache_planner.lint.inputs import Request
from prefixgate.cache_planner.lint.rules.base import Context, Hit, rule
from prefixgate.cache_planner.lint.rules.prefix import checkpoints_of


@rule("PG004", "too-many-breakpoints", "error",
      "More cache breakpoints than the provider allows (Anthropic: 4, explicit and automatic together).",
      "Keep at most 4: the end of tools+system, the end of the conversation, and at most two in between.",
      "request", cost="rejected")
def too_many_breakpoints(req: Request, ctx: Context) -> Iterator[Hit]:
    """## What it does
    Counts cache breakpoints in an Anthropic request, explicit markers and the top-level automatic
    `cache_control` together.

    ## Why it matters
    Anthropic allows 4 and answers 400 to a fifth.

    ## Example
    Five blocks each carrying `"cache_control": {"type": "ephemeral"}`.

    ## Use instead
    At most 4: the end of tools and system, the end of the conversation, and at most two in between.
    """
    if req.conv is None or req.provider != "anthropic":
        return
    limit = ctx.catalog.anthropic.max_breakpoints
    markers = checkpoints_of(req)
    automatic = "cache_control" in req.body
    count = len(markers) + automatic
    if count > limit:
        block = markers[min(limit, len(markers) - 1)][0] if markers else None
        extra = " (counting the top-level automatic cache_control)" if automatic else ""
        yield Hit(f"{count} cache breakpoints{extra}; Anthropic allows {limit} and answers 400",
                  req.where_marker(block) if block is not None else req.where(path=("cache_control",)), req,
                  {"count": count})
