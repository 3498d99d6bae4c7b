"""PG001 volatile-before-static."""

from __future__ import annotations

from collections.abc import Iterator

from prefixgate.cache_planner.lint.inputs import Request, Template
from prefixgate.cache_planner.lint.rules.base import Context, Hit, rule
from prefixgate.cache_planner.lint.rules.prefix import (
    block_text,
    kind_name,
    location_of,
    pieces_for,
    quoted,
)

# A few static tokens after a volatile value (a sign-off line) are not worth moving it for.
STATIC_TAIL_TOKENS = 16


@rule("PG001", "volatile-before-static", "warning",
      "A volatile value (date, time, id, template variable) comes before static prompt content.",
      "Move the value after the static content, e.g. into the latest user turn; `prefixgate lint --fix` does "
      "this for request files.", "request", "template", cost="replay")
def volatile_before_static(subject: Request | Template, ctx: Context) -> Iterator[Hit]:
    r"""## What it does
    Finds the first value that changes per request (the clock, a random or request id, user input, a
    template variable shown to change) ahead of static prompt text, in request files, templates and
    Python prompt code, and says where it lands in the provider's prefix (tools, then system, then
    messages) and how many tokens after it are re-billed. One finding per prefix: later values in the same
    prefix are related locations. A variable with no evidence that it changes per request is `info`.

    ## Why it matters
    Providers cache exact prefixes. Everything after the first changed byte is billed as new input on every
    request (and written again to the cache, at a premium on Anthropic).

    ## Example
    ```python
    SYSTEM = f"Today is {datetime.now():%Y-%m-%d %H:%M}. User: {user_id}.\n" + RULES
    ```

    ## Use instead
    ```python
    SYSTEM = RULES  # static: cached
    messages = [{"role": "user", "content": f"Now: {datetime.now():%Y-%m-%d %H:%M}. User: {user_id}.\n{question}"}]
    ```
    """
    if isinstance(subject, Request) and subject.conv is None:
        return
    pieces, _ = pieces_for(subject, ctx)
    for i, piece in enumerate(pieces):
        if not piece.spans:
            continue
        after = sum(p.tokens for p in pieces[i + 1:] if not p.spans)
        if after < STATIC_TAIL_TOKENS:
            continue
        span = piece.spans[0]
        value = block_text(subject, piece.block)[span.start:span.end]
        yield Hit(f"{kind_name(span)} {quoted(value)} comes before {after:,} tokens of static prompt: each new value "
                  f"re-bills them instead of reading them from cache", location_of(subject, piece.block, span.start),
                  subject, {"kind": span.kind, "static_after": after})
