"""PG000 invalid-request."""

from __future__ import annotations

from collections.abc import Iterator

from prefixgate.cache_planner.lint.inputs import Request
from prefixgate.cache_planner.lint.rules.base import Context, Hit, rule


@rule("PG000", "invalid-request", "error", "The provider would reject this request body.",
      "Fix the field named in the message; the gateway and the provider answer 400 to it.", "request", cost="rejected")
def invalid_request(req: Request, ctx: Context) -> Iterator[Hit]:
    if req.conv is None:
        yield Hit(f"{req.provider} would reject this request: {req.error}", req.where(), req)
