"""A problem answered in the caller's own error shape (its SDK raises its own exception from it)."""

from __future__ import annotations

from collections.abc import Awaitable

from starlette.responses import Response

from prefixgate.compact_json import compact_bytes
from prefixgate.dialects import wire_format
from prefixgate.errors import RequestError, retry_after_header
from prefixgate.gateway.upstream import UpstreamFailure


def error_response(err: RequestError, dialect: str, headers: dict[str, str] | None = None,
                   background: object = None) -> Response:
    wire = wire_format(dialect)
    status, body, own = wire.error_reply(err)
    # An upstream's refusal passed on: its own headers (retry-after-ms, x-ratelimit-*, anthropic-ratelimit-*) to a
    # caller of its provider's format, whose SDK reads them by those names; any other caller gets retry-after alone,
    # which every caller gets as the gateway read it (whole seconds, a value that is no wait left out).
    passed = err.refused.headers if err.refused and err.refused.provider == wire.planner_provider else {}
    headers = {**{k: v for k, v in passed.items() if k != "retry-after"}, **own, **(headers or {})}
    if err.retry_after is not None:
        headers["retry-after"] = retry_after_header(err.retry_after)
    if err.kind in ("quota", "not_configured"):
        # The openai and anthropic SDKs retry every 429 (the anthropic one sleeping out a Retry-After of days) and
        # every 5xx unless told not to: a spent budget fails the same way until its window resets, a gateway not
        # set up for what was asked until its operator sets it up.
        headers["x-should-retry"] = "false"
    return Response(compact_bytes(body), status, headers, media_type="application/json", background=background)


async def answer_or_error(dialect: str, work: Awaitable[Response]) -> Response:
    """`work`'s response, or the caller's error shape for a bad request or a failed upstream call."""
    try:
        return await work
    except UpstreamFailure as f:
        return error_response(f.request_error(), dialect)
    except RequestError as e:
        return error_response(e, dialect)
    except RecursionError:
        return error_response(RequestError("request body is nested too deeply for the gateway"), dialect)
