"""PG000 invalid-request."""

from __future__ import annotations

from collections.abc import Iterator

from prefixgate.cache_planner.lint.inputs import Request
from prefixgate.cache_planner.lint.rules.base import Context, Hit, rule


@rule("PG000", "invalid-request", "error", "The provider would reject this request body.",
      "Fix the field named in the message; the gateway and the provider answer 400 to it.", "request", cost="rejected")
def invalid_request(req: Request, ctx: Context) -> Iterator[Hit]:
    """## What it does
    Parses each request body with the provider's own dialect and reports what the provider would reject.

    ## Why it matters
    A 400 costs a round trip and, in an agent loop, a retry; the gateway rejects the same body.

    ## Example
    ```json
    {"model": "claude-sonnet-5-5", "messages": [{"role": "user", "content": "hi"}]}
    ```
    (Anthropic requires `max_tokens`.)

    ## Use instead
    ```json
    {"model": "claude-sonnet-5-5", "max_tokens": 1024, "messages": [{"role": "user", "content": "hi"}]}
    ```
    """
    if req.conv is None:
        yield Hit(f"{req.provider} would reject this request: {req.error}", req.where(), req)
