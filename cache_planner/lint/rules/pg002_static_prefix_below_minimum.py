"""PG002 static-prefix-below-minimum."""

from __future__ import annotations

from collections.abc import Iterator

from prefixgate.cache_planner.lint.inputs import Request, Template
from prefixgate.cache_planner.lint.rules.base import Context, Hit, rule
from prefixgate.cache_planner.lint.rules.prefix import (
    location_of,
    pieces_for,
    static_prefix_tokens,
)

# PG002 speaks up when the static prefix is at least this share of the minimum: close enough that
# merging shared material into it is realistic; a 50-token prompt is simply too small to cache.
NEAR_MINIMUM = 0.5


@rule("PG002", "static-prefix-below-minimum", "warning",
      "The static prefix is shorter than the target model's minimum cacheable length, so it is never cached.",
      "Put the material every request shares (instructions, examples, reference text) first so the prefix "
      "reaches the minimum, or set [tool.prefixgate.lint] min_cache_tokens if your usage shows another minimum.",
      "request", "template")
def static_prefix_below_minimum(subject: Request | Template, ctx: Context) -> Iterator[Hit]:
    """## What it does
    Measures the static prefix (up to the first volatile value) and reports it when it is between half
    and all of the model's minimum cacheable length.

    ## Why it matters
    Below the minimum (1,024 tokens for most Claude models) the provider caches nothing and says
    nothing: no error, cache counters stay 0.

    ## Example
    A 700-token system prompt followed by a per-request date.

    ## Use instead
    Put the material every request shares (instructions, examples, reference text) first, so the static
    prefix passes the minimum; move the date after it.
    """
    if isinstance(subject, Request) and subject.conv is None:
        return
    pieces, model = pieces_for(subject, ctx)
    if model is None or not pieces:
        return
    minimum = ctx.minimum(model)
    static = static_prefix_tokens(pieces)
    if not NEAR_MINIMUM * minimum <= static < minimum:
        return
    cut = next((p for p in pieces if p.spans), None)
    why = "; it ends at the first volatile value" if cut else ""
    at = location_of(subject, cut.block, cut.spans[0].start) if cut else location_of(subject, pieces[0].block, 0)
    yield Hit(f"static prefix is about {static:,} tokens, below {model.id}'s minimum of {minimum:,}: the provider "
              f"caches none of it (no error, cache counters stay 0){why}", at, subject,
              {"static": static, "minimum": minimum})
