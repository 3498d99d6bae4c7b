"""PG010 conversation-rewrite."""

from __future__ import annotations

from collections.abc import Iterator

from prefixgate.cache_planner.lint.inputs import Request
from prefixgate.cache_planner.lint.rules.base import Context, Hit, rule
from prefixgate.cache_planner.lint.rules.samples import ref
from prefixgate.cache_planner.lint.simulation import simulate_turns


@rule("PG010", "conversation-rewrite", "warning",
      "A conversation's cache checkpoint placement makes each turn re-write history the previous turn already wrote.",
      "Mark the last block of each turn (or use automatic caching), keep history bytes unchanged between turns, "
      "add a checkpoint every ~15 blocks in long tool loops, and use ttl 1h if turns are minutes apart.",
      "corpus", cost="simulated")
def conversation_rewrite(requests: list[Request], ctx: Context) -> Iterator[Hit]:
    """## What it does
    Simulates a traced conversation turn by turn with the provider's cache rules and reports turns that pay
    again for history the previous turn already cached: a history block that changed, a checkpoint out of
    reach (Anthropic looks back 20 blocks), or an entry that expired between turns.

    ## Why it matters
    In agent loops history is most of the input; re-writing it each turn costs 1.25x instead of 0.1x.

    ## Example
    A tool loop that marks only the system prompt, so each turn's growing history is never read from cache.

    ## Use instead
    Mark the last block of each turn (or use automatic caching), keep history bytes unchanged between turns,
    add a checkpoint every ~15 blocks in long tool loops, and use ttl 1h if turns are minutes apart.
    """
    traced = [r for r in requests if r.record is not None and r.conv is not None]
    for turn in simulate_turns(traced, ctx.catalog):
        req = turn.request
        if turn.history_changed_at is not None:
            yield Hit(f"this history block differs from what {ref(req, turn.previous)} sent as the same turn: the "
                      f"conversation cache is rebuilt from here ({turn.rewritten:,} tokens paid again)",
                      req.where(turn.history_changed_at), req, turn.data)
        elif turn.rewritten:
            reason = (f"the previous turn's {turn.ttl} entry expired ({turn.gap:.0f}s between turns)" if turn.expired
                      else f"no checkpoint of {ref(req, turn.previous)} is within reach of this request's")
            yield Hit(f"this turn re-wrote about {turn.rewritten:,} tokens of history already written by "
                      f"{ref(req, turn.previous)}: {reason}",
                      req.where_marker(turn.last_marker) if turn.last_marker is not None else req.where(), req, turn.data)
