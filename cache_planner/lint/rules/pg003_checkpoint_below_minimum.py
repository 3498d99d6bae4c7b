"""PG003 checkpoint-below-minimum."""

from __future__ import annotations

from collections.abc import Iterator

from prefixgate.cache_planner.lint.inputs import Request
from prefixgate.cache_planner.lint.rules.base import Context, Hit, rule
from prefixgate.cache_planner.lint.rules.prefix import checkpoints_of, cumulative_tokens


@rule("PG003", "checkpoint-below-minimum", "warning",
      "A cache checkpoint ends a prefix shorter than the model's minimum, so the provider silently ignores it.",
      "Remove the marker, or move it to a later block whose prefix reaches the minimum.", "request")
def checkpoint_below_minimum(req: Request, ctx: Context) -> Iterator[Hit]:
    """## What it does
    Reports a `cache_control` checkpoint whose prefix is shorter than the model's minimum.

    ## Why it matters
    The provider silently ignores it: nothing is written or read, and the breakpoint slot is wasted.

    ## Example
    ```json
    {"system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]}
    ```

    ## Use instead
    Remove the marker, or move it to a later block whose prefix reaches the minimum.
    """
    if req.conv is None or req.model is None:
        return
    minimum = ctx.minimum(req.model)
    cumulative = cumulative_tokens(req)
    for block, _ in checkpoints_of(req):
        if cumulative[block] < minimum:
            yield Hit(f"checkpoint ends a prefix of about {cumulative[block]:,} tokens, below {req.model.id}'s minimum "
                      f"of {minimum:,}: nothing is written or read", req.where_marker(block), req,
                      {"tokens": cumulative[block], "minimum": minimum})
