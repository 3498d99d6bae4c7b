"""PG012 anthropic-no-checkpoint."""

from __future__ import annotations

from collections.abc import Iterator

from prefixgate.cache_planner.lint.inputs import Request
from prefixgate.cache_planner.lint.rules.base import Context, Hit, rule
from prefixgate.cache_planner.lint.rules.prefix import checkpoints_of, cumulative_tokens, request_pieces


@rule("PG012", "anthropic-no-checkpoint", "warning",
      "An Anthropic request long enough to cache has no cache_control at all, and Anthropic caches nothing unmarked.",
      "Add cache_control at the end of the static prefix (and of the conversation), or send it through the "
      "gateway, which places them; `prefixgate lint --fix` adds them to request files.", "request", cost="replay")
def anthropic_no_checkpoint(req: Request, ctx: Context) -> Iterator[Hit]:
    """## What it does
    Reports an Anthropic request long enough to cache that has no `cache_control` anywhere.

    ## Why it matters
    Anthropic caches only what is marked: every request pays full price for tools and system prompt.

    ## Example
    A 3,000-token system prompt and 10 tools, sent without any marker.

    ## Use instead
    Add `cache_control` at the end of the static prefix (and of the conversation), or send it through the
    gateway, which places them; `prefixgate lint --fix` adds them to request files.
    """
    if req.conv is None or req.provider != "anthropic" or req.model is None:
        return
    if checkpoints_of(req) or "cache_control" in req.body:
        return
    leading = sum(p.tokens for p in request_pieces(req))
    total = cumulative_tokens(req)[-1] if req.conv.blocks() else 0
    multi_turn = any(s.role == "assistant" for s in req.conv.segments)
    reusable = max(leading, total if multi_turn else 0)
    minimum = ctx.minimum(req.model)
    if reusable >= minimum:
        what = "conversation" if multi_turn and total > leading else "tools and system prompt"
        yield Hit(f"no cache_control: about {reusable:,} tokens of {what} are billed in full on every request "
                  f"(minimum {minimum:,})", req.where(), req, {"tokens": reusable})
